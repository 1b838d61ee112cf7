#include "harness/cli/profile_command.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "harness/cli/runner.h"
#include "harness/measure/devices.h"
#include "harness/measure/environment.h"
#include "harness/measure/profile.h"
#include "harness/measure/worker.h"
#include "harness/store/store.h"
#include "harness/suite/case_matrix.h"
#include "harness/suite/suite.h"
#include "kernels/registry.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

// The selected cases on the selected devices, and the selected kernels no such device runs.
struct ProfileSelection {
  std::vector<Device> devices;
  std::vector<CaseSpec> cases;
  std::vector<std::string> unprofiled;
};

Result<ProfileSelection> select_cases(const ProfileOptions& options) {
  Result<Suite> suite =
      selection_suite(options.suite, options.shapes, options.distribution, options.pass, {},
                      "nothing to profile: give --suite NAME|FILE or --shape ...");
  if (!suite) return suite.status();
  if (Status s = load_selected_kernels(*suite, options.kernel_globs, options.plugins); !s) {
    return s;
  }
  const Result<std::optional<std::regex>> filter = parse_case_filter(options.filter);
  if (!filter) return filter.status();
  Result<std::vector<Device>> devices = select_devices(options.devices, discover_devices());
  if (!devices) return devices.status();
  ProfileSelection selection;
  selection.devices = std::move(*devices);
  std::vector<MatrixDevice> matrix_devices;
  for (const Device& device : selection.devices) {
    matrix_devices.push_back({device.backend, device.label()});
  }
  selection.cases = expand_cases(*suite, options.kernel_globs, *filter, matrix_devices);
  // Every backend, to name the selected kernels that none of the selected devices runs.
  std::set<std::string> profiled;
  for (const CaseSpec& spec : selection.cases) profiled.insert(spec.kernel->name);
  for (const CaseSpec& spec :
       expand_cases(*suite, options.kernel_globs, *filter,
                    {{Backend::cpu, "cpu"}, {Backend::cuda, "gpu"}, {Backend::emu, "emu"}})) {
    const std::string& name = spec.kernel->name;
    if (!profiled.count(name) && std::find(selection.unprofiled.begin(), selection.unprofiled.end(),
                                           name) == selection.unprofiled.end()) {
      selection.unprofiled.push_back(name);
    }
  }
  return selection;
}

// Why profile skips a case ("" when it runs it): the kernel cannot run here, or the problem is
// outside its table. The size limit budgets a matrix's time (kernel.h); one profiled forward may
// exceed it.
std::string profile_skip_reason(const CaseSpec& spec) {
  if (!spec.kernel->unavailable_reason.empty()) return spec.kernel->unavailable_reason;
  SupportTable table = spec.kernel->support;
  table.max_flops = 0;
  return unsupported_reason(table, spec.problem);
}

// What one recorded forward says beyond its rows: on how many threads or streams, against the
// plain forwards, and the launches of a device that launches kernels.
void print_profile(const ForwardProfile& profile, const ProfileBreakdown& breakdown,
                   int64_t extra_memory_bytes, std::ostream& out) {
  char line[200];
  const bool phases = profile.source == "phases";
  if (breakdown.tracks == 0) {
    out << "  nothing recorded (" << profile.source
        << "): " << (phases ? "the kernel marks no phase (kernels/cpu/phases.h)" : "no activity")
        << "; forward " << profile.forward_s * 1e3 << " ms\n";
    return;
  }
  std::snprintf(line, sizeof line, "  forward %.3f ms on %d %s (%s)", profile.forward_s * 1e3,
                breakdown.tracks,
                phases ? (breakdown.tracks == 1 ? "thread" : "threads")
                       : (breakdown.tracks == 1 ? "stream" : "streams"),
                profile.source.c_str());
  out << line;
  if (profile.median_s > 0) {
    std::snprintf(line, sizeof line, "; plain median %.3f ms, recorded vs plain %+.1f %%",
                  profile.median_s * 1e3, (profile.forward_s / profile.median_s - 1) * 100);
    out << line;
  } else {
    out << "; the emulator's time, not a GPU's";
  }
  if (extra_memory_bytes < 0) {
    out << "; extra memory unknown (the kernel's memory bypasses attnbench's allocator)\n";
  } else {
    std::snprintf(line, sizeof line, "; extra memory %.1f MiB\n",
                  static_cast<double>(extra_memory_bytes) / (1 << 20));
    out << line;
  }
  if (!phases) {
    const auto launches =
        std::count_if(profile.activities.begin(), profile.activities.end(),
                      [](const Activity& a) { return a.kind == ActivityKind::kernel; });
    out << "  launches: " << launches << "\n";
  }
  std::snprintf(line, sizeof line, "  %-28s %8s %14s %7s\n", phases ? "phase" : "activity", "count",
                phases ? "thread time ms" : "time ms", "share");
  out << line;
  for (const PhaseTotal& phase : breakdown.phases) {
    std::snprintf(line, sizeof line, "  %-28s %8lld %14.3f %6.1f%%\n", phase.name.c_str(),
                  static_cast<long long>(phase.count), phase.total_s * 1e3, phase.share * 100);
    out << line;
  }
}

std::vector<ProfilePhaseRecord> profile_rows(const CaseSpec& spec, const Device& device,
                                             const ProfileBreakdown& breakdown,
                                             const CaseOutcome& outcome) {
  const std::string id = make_uuid();
  const std::string at = now_utc_iso8601();
  const std::optional<int> expected_launches =
      expected_resources(*spec.kernel, spec.problem).launches;
  std::vector<ProfilePhaseRecord> rows;
  for (const PhaseTotal& phase : breakdown.phases) {
    ProfilePhaseRecord row;
    row.profile_id = id;
    row.profiled_at = at;
    row.kernel = spec.kernel->name;
    row.shape = shape_string(spec.problem);
    row.distribution = std::string(distribution_name(spec.distribution));
    row.device = device.info.name;
    row.forward_s = breakdown.forward_s;
    row.median_s = outcome.profile->median_s;
    row.extra_memory_bytes = outcome.extra_memory_bytes;
    row.threads = breakdown.tracks;
    row.name = phase.name;
    row.count = phase.count;
    row.total_s = phase.total_s;
    row.share = phase.share;
    row.kind = phase.kind;
    row.source = outcome.profile->source;
    row.expected_launches = expected_launches.value_or(-1);
    rows.push_back(std::move(row));
  }
  return rows;
}

// The trace, the store and the tallies the cases share.
struct ProfileSink {
  Store* store = nullptr;
  json events = json::array();
  int64_t origin_ns = 0;  // the first host-clock profile's start
  int profiled = 0;
  int stored = 0;
  int failed = 0;
};

// One case in its device's worker: checked, then profiled; printed, traced, stored.
void profile_one(const CaseSpec& spec, const Device& device, int pid, uint64_t seed,
                 const ProfileOptions& options, WorkerProcess& worker, ProfileSink& sink,
                 std::ostream& out, std::ostream& err) {
  CaseRequest request;
  request.name = spec.name;
  request.kernel = spec.kernel->name;
  request.problem = spec.problem;
  request.distribution = std::string(distribution_name(spec.distribution));
  request.seed = seed;
  request.check_only = true;
  // An emulated forward takes the emulator's time, and tells no time worth a median.
  request.profile_forwards = device.backend == Backend::emu ? 1 : options.timed_forwards;
  const CaseOutcome outcome =
      worker.run(request, std::chrono::seconds(options.case_timeout_seconds));
  if (outcome.status != ResultStatus::passed || !outcome.profile) {
    out << "  " << result_status_name(outcome.status) << ": " << outcome.message << "\n";
    ++sink.failed;
    return;
  }
  const ForwardProfile& profile = *outcome.profile;
  const ProfileBreakdown breakdown = breakdown_of(profile);
  print_profile(profile, breakdown, outcome.extra_memory_bytes, out);
  // The host's steady clock (CPU phases, emulated launches) is one timeline; CUPTI's timestamps are
  // another, so each GPU case starts at its own zero.
  if (sink.origin_ns == 0 && device.backend != Backend::cuda) sink.origin_ns = profile.start_ns;
  for (json& event :
       trace_events(profile, pid,
                    spec.kernel->name + " " + shape_string(spec.problem) + " on " + device.label(),
                    device.backend == Backend::cuda ? profile.start_ns : sink.origin_ns)) {
    sink.events.push_back(std::move(event));
  }
  ++sink.profiled;
  if (sink.store == nullptr) return;
  if (device.backend == Backend::emu) {
    out << "  not stored: the emulated device's times are the emulator's\n";
    return;
  }
  if (Status s = sink.store->add_profile(profile_rows(spec, device, breakdown, outcome)); !s) {
    err << "error: " << s.message << "\n";
    ++sink.failed;
    return;
  }
  ++sink.stored;
}

}  // namespace

int profile_command(const ProfileOptions& options, std::ostream& out, std::ostream& err) {
  Result<ProfileSelection> selection = select_cases(options);
  if (!selection) {
    err << "error: " << selection.status().message << "\n";
    return kExitUsage;
  }
  std::string labels;
  for (const Device& device : selection->devices)
    labels += (labels.empty() ? "" : ", ") + device.label();
  for (const std::string& name : selection->unprofiled) {
    out << name << ": not profiled: no selected device runs it (devices: " << labels
        << "; without a GPU, --devices emu runs the in-house CUDA kernels emulated)\n";
  }
  const std::vector<CaseSpec>& cases = selection->cases;
  if (cases.empty()) {
    err << "error: no case in the selection runs on the selected devices (" << labels << ")\n";
    return kExitUsage;
  }
  std::ofstream trace;
  if (!options.trace_path.empty()) {
    trace.open(options.trace_path);
    if (!trace) {
      err << "error: cannot write the trace to " << options.trace_path << ": "
          << std::strerror(errno) << "\n";
      return kExitUsage;
    }
  }
  std::unique_ptr<Store> store;
  if (!options.db_path.empty()) {
    Result<std::unique_ptr<Store>> opened = Store::open(options.db_path);
    if (!opened) {
      err << "error: " << opened.status().message << "\n";
      return kExitUsage;
    }
    store = std::move(*opened);
  }
  const uint64_t seed =
      (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  out << "attnbench profile: " << cases.size() << " case" << (cases.size() == 1 ? "" : "s")
      << ", seed " << seed << ", " << options.timed_forwards
      << " plain and recorded forwards each (1 recorded on emu)\n";
  ProfileSink sink;
  sink.store = store.get();
  // One worker per device, as `run` has: a kernel that crashes takes only its worker down.
  std::vector<std::unique_ptr<WorkerProcess>> workers(selection->devices.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseSpec& spec = cases[i];
    const Device& device = selection->devices[spec.device_index];
    out << "[" << i + 1 << "/" << cases.size() << "] " << spec.kernel->name << " "
        << shape_string(spec.problem) << " on " << device.label() << "\n";
    if (const std::string why = profile_skip_reason(spec); !why.empty()) {
      out << "  skipped: " << why << "\n";
      continue;
    }
    std::unique_ptr<WorkerProcess>& worker = workers[spec.device_index];
    if (!worker) {
      worker = std::make_unique<WorkerProcess>(std::vector<std::string>{"/proc/self/exe"},
                                               device.label());
    }
    profile_one(spec, device, static_cast<int>(i) + 1, seed, options, *worker, sink, out, err);
  }
  if (trace.is_open()) {
    trace << trace_document(std::move(sink.events)).dump() << "\n";
    out << "trace: " << options.trace_path << " (open it in ui.perfetto.dev or chrome://tracing)\n";
  }
  if (sink.stored > 0) {
    out << "stored " << sink.stored << " in " << options.db_path << " (table profiles)\n";
  }
  out << sink.profiled << " profiled"
      << (sink.failed > 0 ? ", " + std::to_string(sink.failed) + " failed" : "") << "\n";
  if (sink.profiled == 0 && sink.failed == 0) err << "error: every selected case was skipped\n";
  return sink.failed > 0 ? kExitFailures : sink.profiled > 0 ? kExitClean : kExitUsage;
}

}  // namespace attnbench
