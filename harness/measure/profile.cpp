#include "harness/measure/profile.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <utility>

namespace attnbench {
namespace {

using json = nlohmann::json;

constexpr double kNsPerSecond = 1e9;
constexpr double kNsPerMicrosecond = 1e3;

constexpr std::pair<ActivityKind, const char*> kKindNames[] = {{ActivityKind::phase, "phase"},
                                                               {ActivityKind::kernel, "kernel"},
                                                               {ActivityKind::memcpy, "memcpy"},
                                                               {ActivityKind::memset, "memset"},
                                                               {ActivityKind::runtime, "runtime"}};

ActivityKind activity_kind_from(const std::string& name) {
  for (const auto& [kind, text] : kKindNames) {
    if (name == text) return kind;
  }
  throw std::invalid_argument("unknown activity kind '" + name + "'");
}

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

// Trace tracks: 0 is the forward; work on thread or stream n is n + 1; runtime calls of host
// thread n are kRuntimeTracks + n, below the work (CUDA stream ids stay far below it).
constexpr int kForwardTrack = 0;
constexpr int kRuntimeTracks = 1 << 30;

int trace_track(const Activity& activity) {
  return activity.kind == ActivityKind::runtime ? kRuntimeTracks + activity.track
                                                : activity.track + 1;
}

std::string track_title(const Activity& activity) {
  switch (activity.kind) {
    case ActivityKind::phase:
      return "thread " + std::to_string(activity.track);
    case ActivityKind::runtime:
      return "runtime calls, host thread " + std::to_string(activity.track);
    default:
      return "stream " + std::to_string(activity.track);
  }
}

// Drops the balanced <...> and (...) groups of a name, and "(anonymous namespace)".
std::string without_groups(const std::string& name) {
  std::string text = name;
  for (const std::string anonymous = "(anonymous namespace)";;) {
    const size_t at = text.find(anonymous);
    if (at == std::string::npos) break;
    text.erase(at, anonymous.size());
  }
  std::string kept;
  int depth = 0;
  for (const char c : text) {
    if (c == '<' || c == '(') ++depth;
    if (depth == 0) kept += c;
    if ((c == '>' || c == ')') && depth > 0) --depth;
  }
  return kept;
}

}  // namespace

const char* activity_kind_name(ActivityKind kind) {
  for (const auto& [each, text] : kKindNames) {
    if (each == kind) return text;
  }
  return "?";
}

bool is_work(ActivityKind kind) { return kind != ActivityKind::runtime; }

std::vector<Activity> activities_from_phases(
    const std::vector<std::vector<PhaseEvent>>& by_thread) {
  std::vector<Activity> activities;
  for (size_t thread = 0; thread < by_thread.size(); ++thread) {
    for (const PhaseEvent& event : by_thread[thread]) {
      Activity activity;
      activity.kind = ActivityKind::phase;
      activity.name = event.phase;
      activity.track = static_cast<int>(thread);
      activity.start_ns = event.start_ns;
      activity.end_ns = event.end_ns;
      activities.push_back(std::move(activity));
    }
  }
  return activities;
}

std::string demangled_name(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(mangled);
}

std::string short_kernel_name(const std::string& demangled) {
  std::string name = without_groups(demangled);
  // The return type ends at the last space outside the groups ("void f" -> "f").
  if (const size_t space = name.find_last_of(' '); space != std::string::npos) {
    name = name.substr(space + 1);
  }
  if (const size_t scope = name.rfind("::"); scope != std::string::npos) {
    name = name.substr(scope + 2);
  }
  return name.empty() ? demangled : name;
}

ProfileBreakdown breakdown_of(const ForwardProfile& profile) {
  ProfileBreakdown breakdown;
  breakdown.forward_s = profile.forward_s;
  std::map<std::string, PhaseTotal> totals;
  std::set<int> tracks;
  double recorded_s = 0;
  for (const Activity& activity : profile.activities) {
    if (!is_work(activity.kind)) continue;
    tracks.insert(activity.track);
    PhaseTotal& total = totals[activity.name];
    total.name = activity.name;
    total.kind = activity_kind_name(activity.kind);
    ++total.count;
    const double seconds = static_cast<double>(activity.end_ns - activity.start_ns) / kNsPerSecond;
    total.total_s += seconds;
    recorded_s += seconds;
  }
  breakdown.tracks = static_cast<int>(tracks.size());
  for (auto& [name, total] : totals) breakdown.phases.push_back(total);
  std::sort(breakdown.phases.begin(), breakdown.phases.end(),
            [](const PhaseTotal& a, const PhaseTotal& b) { return a.total_s > b.total_s; });
  const double capacity_s = breakdown.forward_s * std::max(breakdown.tracks, 1);
  const double denominator = std::max(capacity_s, recorded_s);
  breakdown.phases.push_back({kGapsPhase, kGapsPhase, 0, denominator - recorded_s, 0});
  for (PhaseTotal& phase : breakdown.phases) {
    phase.share = denominator > 0 ? phase.total_s / denominator : 0;
  }
  return breakdown;
}

json trace_events(const ForwardProfile& profile, int pid, const std::string& title,
                  int64_t origin_ns) {
  json events = json::array();
  events.push_back(name_event("process_name", pid, 0, title));
  events.push_back(name_event("thread_name", pid, kForwardTrack, "forward"));
  events.push_back(complete_event("forward", "forward", pid, kForwardTrack, profile.start_ns,
                                  profile.end_ns, origin_ns));
  std::set<int> named;
  for (const Activity& activity : profile.activities) {
    const int tid = trace_track(activity);
    if (named.insert(tid).second) {
      events.push_back(name_event("thread_name", pid, tid, track_title(activity)));
    }
    json event = complete_event(activity.name, activity_kind_name(activity.kind), pid, tid,
                                activity.start_ns, activity.end_ns, origin_ns);
    if (!activity.detail.empty()) event["args"]["name"] = activity.detail;
    if (activity.correlation >= 0) event["args"]["correlation"] = activity.correlation;
    events.push_back(std::move(event));
  }
  return events;
}

json trace_document(json events) {
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

json profile_to_json(const ForwardProfile& profile) {
  json activities = json::array();
  for (const Activity& a : profile.activities) {
    activities.push_back({{"kind", activity_kind_name(a.kind)},
                          {"name", a.name},
                          {"detail", a.detail},
                          {"track", a.track},
                          {"start_ns", a.start_ns},
                          {"end_ns", a.end_ns},
                          {"correlation", a.correlation}});
  }
  return {{"source", profile.source},     {"start_ns", profile.start_ns},
          {"end_ns", profile.end_ns},     {"forward_s", profile.forward_s},
          {"median_s", profile.median_s}, {"activities", std::move(activities)}};
}

ForwardProfile profile_from_json(const json& j) {
  ForwardProfile profile;
  profile.source = j.at("source").get<std::string>();
  profile.start_ns = j.at("start_ns").get<int64_t>();
  profile.end_ns = j.at("end_ns").get<int64_t>();
  profile.forward_s = j.at("forward_s").get<double>();
  profile.median_s = j.at("median_s").get<double>();
  for (const json& a : j.at("activities")) {
    Activity activity;
    activity.kind = activity_kind_from(a.at("kind").get<std::string>());
    activity.name = a.at("name").get<std::string>();
    activity.detail = a.at("detail").get<std::string>();
    activity.track = a.at("track").get<int>();
    activity.start_ns = a.at("start_ns").get<int64_t>();
    activity.end_ns = a.at("end_ns").get<int64_t>();
    activity.correlation = a.at("correlation").get<int64_t>();
    profile.activities.push_back(std::move(activity));
  }
  return profile;
}

}  // namespace attnbench
