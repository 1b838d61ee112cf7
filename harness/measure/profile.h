// Where one forward's time goes (issue 17, `attnbench profile`): the phases a CPU kernel recorded
// (kernels/cpu/phases.h) summed per phase, as shares of the forward's thread time, and the same
// events as a Chrome / Perfetto trace (chrome://tracing and ui.perfetto.dev open it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/phases.h"

namespace attnbench {

struct PhaseTotal {
  std::string name;
  int64_t count = 0;
  double total_s = 0;  // thread time
  double share = 0;
};

// The forward's thread time is its wall time times the threads that recorded a phase. Phases
// come largest first, then "gaps": the thread time no phase recorded (threads idle or between
// phases). If the phases' sum exceeds it (overlapping scopes: a kernel that nests them), the
// shares are of the sum and the gaps are 0. Either way the shares add up to 1.
struct ProfileBreakdown {
  double forward_s = 0;
  int threads = 0;
  std::vector<PhaseTotal> phases;
};
constexpr const char* kGapsPhase = "gaps";

ProfileBreakdown breakdown_of(const std::vector<std::vector<PhaseEvent>>& by_thread,
                              int64_t start_ns, int64_t end_ns);

// The trace events of one profiled forward as process `pid` named `title`: one track per thread
// with its phases, and a track "forward" holding the whole forward; microseconds from `origin_ns`.
nlohmann::json trace_events(const std::vector<std::vector<PhaseEvent>>& by_thread, int64_t start_ns,
                            int64_t end_ns, int pid, const std::string& title, int64_t origin_ns);

// A whole trace file's JSON: {"traceEvents": events, "displayTimeUnit": "ms"}.
nlohmann::json trace_document(nlohmann::json events);

}  // namespace attnbench
