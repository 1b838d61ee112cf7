#include "harness/measure/profile.h"

#include <algorithm>
#include <map>

namespace attnbench {
namespace {

using json = nlohmann::json;

constexpr double kNsPerSecond = 1e9;
constexpr double kNsPerMicrosecond = 1e3;

// Chrome's metadata event naming a process or a thread track.
json name_event(const char* kind, int pid, int tid, const std::string& name) {
  return {{"name", kind}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

json complete_event(const std::string& name, const char* category, int pid, int tid,
                    int64_t start_ns, int64_t end_ns, int64_t origin_ns) {
  return {{"name", name},
          {"cat", category},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", static_cast<double>(start_ns - origin_ns) / kNsPerMicrosecond},
          {"dur", static_cast<double>(end_ns - start_ns) / kNsPerMicrosecond}};
}

}  // namespace

ProfileBreakdown breakdown_of(const std::vector<std::vector<PhaseEvent>>& by_thread,
                              int64_t start_ns, int64_t end_ns) {
  ProfileBreakdown breakdown;
  breakdown.forward_s = static_cast<double>(end_ns - start_ns) / kNsPerSecond;
  std::map<std::string, PhaseTotal> totals;
  double recorded_s = 0;
  for (const std::vector<PhaseEvent>& events : by_thread) {
    if (events.empty()) continue;
    ++breakdown.threads;
    for (const PhaseEvent& event : events) {
      PhaseTotal& total = totals[event.phase];
      total.name = event.phase;
      ++total.count;
      const double seconds = static_cast<double>(event.end_ns - event.start_ns) / kNsPerSecond;
      total.total_s += seconds;
      recorded_s += seconds;
    }
  }
  for (auto& [name, total] : totals) breakdown.phases.push_back(total);
  std::sort(breakdown.phases.begin(), breakdown.phases.end(),
            [](const PhaseTotal& a, const PhaseTotal& b) { return a.total_s > b.total_s; });
  const double capacity_s = breakdown.forward_s * std::max(breakdown.threads, 1);
  const double denominator = std::max(capacity_s, recorded_s);
  breakdown.phases.push_back({kGapsPhase, 0, denominator - recorded_s, 0});
  for (PhaseTotal& phase : breakdown.phases) {
    phase.share = denominator > 0 ? phase.total_s / denominator : 0;
  }
  return breakdown;
}

json trace_events(const std::vector<std::vector<PhaseEvent>>& by_thread, int64_t start_ns,
                  int64_t end_ns, int pid, const std::string& title, int64_t origin_ns) {
  json events = json::array();
  events.push_back(name_event("process_name", pid, 0, title));
  constexpr int kForwardTrack = 0;  // threads are tracks 1..n
  events.push_back(name_event("thread_name", pid, kForwardTrack, "forward"));
  events.push_back(
      complete_event("forward", "forward", pid, kForwardTrack, start_ns, end_ns, origin_ns));
  for (size_t thread = 0; thread < by_thread.size(); ++thread) {
    if (by_thread[thread].empty()) continue;
    const int tid = static_cast<int>(thread) + 1;
    events.push_back(name_event("thread_name", pid, tid, "thread " + std::to_string(thread)));
    for (const PhaseEvent& event : by_thread[thread]) {
      events.push_back(
          complete_event(event.phase, "phase", pid, tid, event.start_ns, event.end_ns, origin_ns));
    }
  }
  return events;
}

json trace_document(json events) {
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace attnbench
