// Where one forward's time goes (issue 17, `attnbench profile`). A device records one forward as
// activities: on the CPU, the phases its kernel marked (kernels/cpu/phases.h) on each thread; on a
// GPU, what CUPTI's activity API saw (kernels, copies, fills on their streams, and the runtime
// calls on their host threads); on the emulated device, each emulated launch. The breakdown sums
// the work per name as shares of the forward; the same activities become a Chrome / Perfetto
// trace (chrome://tracing and ui.perfetto.dev open it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/phases.h"

namespace attnbench {

// What an activity is. Work (phase, kernel, memcpy, memset) fills a track's time and is what the
// breakdown sums; a runtime call is the host asking for it, shown in the trace only.
enum class ActivityKind { phase, kernel, memcpy, memset, runtime };
const char* activity_kind_name(ActivityKind kind);
bool is_work(ActivityKind kind);

struct Activity {
  ActivityKind kind = ActivityKind::phase;
  std::string name;      // the breakdown's row: a phase, a kernel's short name, "memcpy HtoD"
  std::string detail;    // the whole name where it was shortened (a kernel's demangled one)
  int track = 0;         // the thread (phase, runtime) or stream (kernel, memcpy, memset)
  int64_t start_ns = 0;  // on the profile's clock
  int64_t end_ns = 0;
  int64_t correlation = -1;  // CUPTI's id linking a runtime call to the work it launched
};

// One recorded forward. forward_s is its time as the device times a forward (host clock on the
// CPU, CUDA events on a GPU); start_ns..end_ns is the host's view of it on the activities' clock.
struct ForwardProfile {
  std::string source;  // how it was recorded: "phases", "CUPTI", "emulated launches"
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  double forward_s = 0;
  double median_s = -1;  // the plain (unrecorded) forwards' median; < 0: none was timed
  std::vector<Activity> activities;
};

// The phases a CPU forward recorded, one track per thread (thread 0 is track 0).
std::vector<Activity> activities_from_phases(const std::vector<std::vector<PhaseEvent>>& by_thread);

// The name a kernel goes by in a breakdown: a demangled C++ name without its return type,
// namespaces, template arguments and parameters ("void ns::flash_kernel<128>(Params)" gives
// "flash_kernel"); a C name as it is.
std::string short_kernel_name(const std::string& demangled);
// The demangled form of a mangled name; the name itself when it is not one.
std::string demangled_name(const char* mangled);

struct PhaseTotal {
  std::string name;
  std::string kind;  // activity_kind_name of its activities, or kGapsPhase
  int64_t count = 0;
  double total_s = 0;  // track time
  double share = 0;
};

// The work summed per name, largest first, then "gaps": the tracks' time no work covered
// (forward_s times the tracks that did work, less the work). If the work exceeds it (overlapping
// scopes on a thread, a device's work outlasting its timer), the shares are of the work's sum and
// the gaps are 0. Either way the shares add up to 1.
struct ProfileBreakdown {
  double forward_s = 0;
  int tracks = 0;  // threads on the CPU, streams on a GPU
  std::vector<PhaseTotal> phases;
};
constexpr const char* kGapsPhase = "gaps";

ProfileBreakdown breakdown_of(const ForwardProfile& profile);

// The trace events of one profiled forward as process `pid` named `title`: a track "forward"
// holding the whole forward, one track per thread or stream with its activities; microseconds from
// `origin_ns`.
nlohmann::json trace_events(const ForwardProfile& profile, int pid, const std::string& title,
                            int64_t origin_ns);

// A whole trace file's JSON: {"traceEvents": events, "displayTimeUnit": "ms"}.
nlohmann::json trace_document(nlohmann::json events);

// The worker protocol's form of a profile (harness/measure/worker.h).
nlohmann::json profile_to_json(const ForwardProfile& profile);
ForwardProfile profile_from_json(const nlohmann::json& json);  // throws on a malformed one

}  // namespace attnbench
