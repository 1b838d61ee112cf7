#include "harness/measure/cuda/cupti_trace.h"

#include <cupti.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "harness/measure/cuda/shared_library.h"

namespace attnbench {
namespace {

constexpr size_t kBufferBytes = 8u << 20;  // CUPTI fills buffers of this size, then asks again
constexpr size_t kBufferAlignment = 8;     // ACTIVITY_RECORD_ALIGNMENT
constexpr CUpti_ActivityKind kRecordedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME};

std::string memcpy_name(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}

// The completed buffers' records, gathered by CUPTI's callbacks (C functions: no state but this).
// CUPTI may call them from its own thread.
struct Collected {
  std::mutex mutex;
  std::vector<std::vector<uint8_t>> buffers;  // each cut to its valid bytes
};
Collected& collected() {
  static Collected instance;
  return instance;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;
  *max_records = 0;  // as many as fit
}

}  // namespace

struct CuptiTrace::Api {
  void* library = nullptr;
  CUptiResult (*get_version)(uint32_t*) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*dropped_records)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*get_timestamp)(uint64_t*) = nullptr;
  CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
  bool registered = false;

  std::string error(const char* call, CUptiResult result) const {
    const char* text = nullptr;
    if (result_string != nullptr) result_string(result, &text);
    return std::string("CUPTI: ") + call +
           " failed: " + (text != nullptr ? text : std::to_string(static_cast<int>(result)));
  }
};

namespace {

// Called by CUPTI with a buffer it filled: the valid bytes are copied out, the buffer freed.
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Collected& all = collected();
  {
    std::lock_guard<std::mutex> lock(all.mutex);
    if (valid > 0) all.buffers.emplace_back(buffer, buffer + valid);
  }
  std::free(buffer);
}

}  // namespace

std::unique_ptr<CuptiTrace> CuptiTrace::load(std::string& absence_reason) {
  std::string tried;
  // The loader's path first (LD_LIBRARY_PATH: gpu-check puts the toolkit's or the wheel's there),
  // then where the build's toolkit and older toolkits (extras/CUPTI) keep it.
  void* library = open_first_library({"libcupti.so.13", "libcupti.so",
                                      std::string(ATTNBENCH_CUPTI_TOOLKIT_DIR) + "/libcupti.so.13",
                                      "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"},
                                     tried);
  if (library == nullptr) {
    absence_reason =
        "CUPTI not loadable (the toolkit's libcupti or PyTorch's nvidia-cuda-cupti "
        "wheel on LD_LIBRARY_PATH): " +
        tried;
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  api->library = library;
  api->get_version = lookup_symbol<decltype(api->get_version)>(library, "cuptiGetVersion");
  api->register_callbacks =
      lookup_symbol<decltype(api->register_callbacks)>(library, "cuptiActivityRegisterCallbacks");
  api->enable = lookup_symbol<decltype(api->enable)>(library, "cuptiActivityEnable");
  api->disable = lookup_symbol<decltype(api->disable)>(library, "cuptiActivityDisable");
  api->flush_all = lookup_symbol<decltype(api->flush_all)>(library, "cuptiActivityFlushAll");
  api->next_record =
      lookup_symbol<decltype(api->next_record)>(library, "cuptiActivityGetNextRecord");
  api->dropped_records =
      lookup_symbol<decltype(api->dropped_records)>(library, "cuptiActivityGetNumDroppedRecords");
  api->get_timestamp = lookup_symbol<decltype(api->get_timestamp)>(library, "cuptiGetTimestamp");
  api->callback_name = lookup_symbol<decltype(api->callback_name)>(library, "cuptiGetCallbackName");
  api->result_string = lookup_symbol<decltype(api->result_string)>(library, "cuptiGetResultString");
  if (api->get_version == nullptr || api->register_callbacks == nullptr || api->enable == nullptr ||
      api->disable == nullptr || api->flush_all == nullptr || api->next_record == nullptr ||
      api->get_timestamp == nullptr) {
    dlclose(library);
    absence_reason = "CUPTI too old: an activity function is missing";
    return nullptr;
  }
  uint32_t version = 0;
  if (api->get_version(&version) != CUPTI_SUCCESS || version < CUPTI_API_VERSION) {
    dlclose(library);
    absence_reason = "CUPTI API version " + std::to_string(version) +
                     " is older than the headers attnbench was built with (" +
                     std::to_string(CUPTI_API_VERSION) + "): its records have another layout";
    return nullptr;
  }
  return std::unique_ptr<CuptiTrace>(new CuptiTrace(std::move(api)));
}

CuptiTrace::CuptiTrace(std::unique_ptr<Api> api) : api_(std::move(api)) {}

CuptiTrace::~CuptiTrace() {
  for (CUpti_ActivityKind kind : kRecordedKinds) api_->disable(kind);
  // The library stays loaded: CUPTI keeps hooks in the driver for the process's lifetime.
}

Status CuptiTrace::start() {
  if (!api_->registered) {
    if (CUptiResult r = api_->register_callbacks(buffer_requested, buffer_completed);
        r != CUPTI_SUCCESS) {
      return Status::Error(api_->error("cuptiActivityRegisterCallbacks", r));
    }
    api_->registered = true;
  }
  {
    std::lock_guard<std::mutex> lock(collected().mutex);
    collected().buffers.clear();
  }
  for (CUpti_ActivityKind kind : kRecordedKinds) {
    if (CUptiResult r = api_->enable(kind); r != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind enabled : kRecordedKinds) api_->disable(enabled);  // none stays on
      return Status::Error(api_->error("cuptiActivityEnable", r));
    }
  }
  return Status::Ok();
}

Result<int64_t> CuptiTrace::timestamp() const {
  uint64_t now = 0;
  if (CUptiResult r = api_->get_timestamp(&now); r != CUPTI_SUCCESS) {
    return Status::Error(api_->error("cuptiGetTimestamp", r));
  }
  return static_cast<int64_t>(now);
}

Result<std::vector<Activity>> CuptiTrace::stop() {
  const CUptiResult flushed = api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kRecordedKinds) api_->disable(kind);
  if (flushed != CUPTI_SUCCESS) return Status::Error(api_->error("cuptiActivityFlushAll", flushed));
  std::vector<std::vector<uint8_t>> buffers;
  {
    std::lock_guard<std::mutex> lock(collected().mutex);
    buffers.swap(collected().buffers);
  }
  const auto runtime_name = [this](uint32_t cbid) {
    const char* name = nullptr;
    if (api_->callback_name != nullptr) {
      api_->callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name);
    }
    return name != nullptr ? std::string(name) : "runtime call " + std::to_string(cbid);
  };
  std::vector<Activity> activities;
  std::map<int, int> host_threads;  // OS thread id -> 0, 1, ...
  for (std::vector<uint8_t>& buffer : buffers) {
    CUpti_Activity* record = nullptr;
    while (api_->next_record(buffer.data(), buffer.size(), &record) == CUPTI_SUCCESS) {
      Activity activity;
      if (!activity_from_record(record, runtime_name, activity)) continue;
      if (activity.kind == ActivityKind::runtime) {
        activity.track = host_threads.emplace(activity.track, static_cast<int>(host_threads.size()))
                             .first->second;
      }
      activities.push_back(std::move(activity));
    }
  }
  size_t dropped = 0;
  if (api_->dropped_records != nullptr &&
      api_->dropped_records(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    return Status::Error("CUPTI dropped " + std::to_string(dropped) +
                         " records: the trace would miss work");
  }
  return activities;
}

bool activity_from_record(const void* record,
                          const std::function<std::string(uint32_t)>& runtime_name,
                          Activity& activity) {
  const auto* any = static_cast<const CUpti_Activity*>(record);
  switch (any->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* kernel = static_cast<const CUpti_ActivityKernel10*>(record);
      activity.kind = ActivityKind::kernel;
      activity.detail = demangled_name(kernel->name);
      activity.name = short_kernel_name(activity.detail);
      activity.track = static_cast<int>(kernel->streamId);
      activity.start_ns = static_cast<int64_t>(kernel->start);
      activity.end_ns = static_cast<int64_t>(kernel->end);
      activity.correlation = kernel->correlationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* copy = static_cast<const CUpti_ActivityMemcpy6*>(record);
      activity.kind = ActivityKind::memcpy;
      activity.name = memcpy_name(copy->copyKind);
      activity.detail = std::to_string(copy->bytes) + " bytes";
      activity.track = static_cast<int>(copy->streamId);
      activity.start_ns = static_cast<int64_t>(copy->start);
      activity.end_ns = static_cast<int64_t>(copy->end);
      activity.correlation = copy->correlationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* fill = static_cast<const CUpti_ActivityMemset4*>(record);
      activity.kind = ActivityKind::memset;
      activity.name = "memset";
      activity.detail = std::to_string(fill->bytes) + " bytes";
      activity.track = static_cast<int>(fill->streamId);
      activity.start_ns = static_cast<int64_t>(fill->start);
      activity.end_ns = static_cast<int64_t>(fill->end);
      activity.correlation = fill->correlationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto* call = static_cast<const CUpti_ActivityAPI*>(record);
      activity.kind = ActivityKind::runtime;
      activity.name = runtime_name(call->cbid);
      activity.track = static_cast<int>(call->threadId);
      activity.start_ns = static_cast<int64_t>(call->start);
      activity.end_ns = static_cast<int64_t>(call->end);
      activity.correlation = call->correlationId;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace attnbench
