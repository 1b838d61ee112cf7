#include "harness/cli/profile_command.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>

#include "harness/cli/runner.h"
#include "harness/measure/checker.h"
#include "harness/measure/environment.h"
#include "harness/measure/executor.h"
#include "harness/measure/inputs.h"
#include "harness/measure/profile.h"
#include "harness/measure/worker.h"
#include "harness/store/store.h"
#include "harness/suite/case_matrix.h"
#include "harness/suite/suite.h"
#include "kernels/registry.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

// One profiled case: the recorded forward's phases and wall time, and the timed median.
struct ProfiledCase {
  std::vector<std::vector<PhaseEvent>> by_thread;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  double median_s = 0;
  int64_t extra_memory_bytes = 0;  // as `run` measures it: the plan's own, or scratch's peak
};

// One forward while a recording lives: its phases and its start and end.
Result<ProfiledCase> recorded_forward(const TimedForward& forward) {
  ProfiledCase recorded;
  PhaseRecording recording(omp_get_max_threads());
  std::string error;
  recorded.start_ns = phase_clock_ns();
  const double seconds = forward(error);
  recorded.end_ns = phase_clock_ns();
  if (seconds < 0) return Status::Error(error);
  recorded.by_thread = recording.by_thread();
  return recorded;
}

// Inputs, plan and a warm-up forward; then `timed` pairs of a plain timed forward and a recorded
// one, interleaved so that drift (clocks, other load) reaches both alike. The recorded forward
// shown is the one of median wall time; median_s is the plain forwards' median.
Result<ProfiledCase> profile_case(const CaseSpec& spec, uint64_t seed, int timed) {
  Result<std::unique_ptr<DeviceExecutor>> executor = make_device_executor("cpu");
  if (!executor) return executor.status();
  ProblemInputs inputs;
  if (Status status = make_inputs(spec.problem, spec.distribution, seed, inputs); !status) {
    return status;
  }
  if (Status status = (*executor)->load_inputs(inputs); !status) return status;
  (*executor)->reset_scratch_peak();
  Result<std::unique_ptr<Plan>> plan =
      spec.kernel->make_plan(spec.problem, (*executor)->plan_context());
  if (!plan) return plan.status();
  KernelOutputs outputs = make_outputs(inputs, spec.kernel->returns_lse);
  if (Status status = (*executor)->run_checked(**plan, outputs); !status) return status;
  const TimedForward forward = (*executor)->timed_forward(**plan, outputs);
  std::vector<double> plain;
  std::vector<ProfiledCase> recorded;
  for (int i = 0; i < timed; ++i) {
    std::string error;
    const double seconds = forward(error);
    if (seconds < 0) return Status::Error(error);
    plain.push_back(seconds);
    Result<ProfiledCase> one = recorded_forward(forward);
    if (!one) return one.status();
    recorded.push_back(std::move(*one));
  }
  const auto middle = [](auto& values, auto key) {
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end(),
                     [&](const auto& a, const auto& b) { return key(a) < key(b); });
    return values.begin() + values.size() / 2;
  };
  ProfiledCase shown =
      std::move(*middle(recorded, [](const ProfiledCase& c) { return c.end_ns - c.start_ns; }));
  shown.median_s = *middle(plain, [](double seconds) { return seconds; });
  shown.extra_memory_bytes = (*plan)->own_extra_memory_bytes().value_or(
      static_cast<int64_t>((*executor)->scratch_peak_bytes()));
  return shown;
}

void print_breakdown(const ProfileBreakdown& breakdown, double median_s, int64_t extra_memory_bytes,
                     std::ostream& out) {
  char line[160];
  if (breakdown.threads == 0) {
    out << "  no phase recorded: the kernel marks none (kernels/cpu/phases.h); forward "
        << breakdown.forward_s * 1e3 << " ms\n";
    return;
  }
  std::snprintf(line, sizeof line,
                "  forward %.3f ms on %d threads (plain median %.3f ms; recorded vs plain "
                "%+.1f %%), extra memory %.1f MiB\n",
                breakdown.forward_s * 1e3, breakdown.threads, median_s * 1e3,
                (breakdown.forward_s / median_s - 1) * 100,
                static_cast<double>(extra_memory_bytes) / (1 << 20));
  out << line;
  std::snprintf(line, sizeof line, "  %-10s %8s %14s %7s\n", "phase", "count", "thread time ms",
                "share");
  out << line;
  for (const PhaseTotal& phase : breakdown.phases) {
    std::snprintf(line, sizeof line, "  %-10s %8lld %14.3f %6.1f%%\n", phase.name.c_str(),
                  static_cast<long long>(phase.count), phase.total_s * 1e3, phase.share * 100);
    out << line;
  }
}

std::vector<ProfilePhaseRecord> profile_rows(const CaseSpec& spec,
                                             const ProfileBreakdown& breakdown,
                                             const ProfiledCase& profiled) {
  const std::string id = make_uuid();
  const std::string at = now_utc_iso8601();
  std::vector<ProfilePhaseRecord> rows;
  for (const PhaseTotal& phase : breakdown.phases) {
    ProfilePhaseRecord row;
    row.profile_id = id;
    row.profiled_at = at;
    row.kernel = spec.kernel->name;
    row.shape = shape_string(spec.problem);
    row.distribution = std::string(distribution_name(spec.distribution));
    row.device = cpu_model_name();
    row.forward_s = breakdown.forward_s;
    row.median_s = profiled.median_s;
    row.extra_memory_bytes = profiled.extra_memory_bytes;
    row.threads = breakdown.threads;
    row.name = phase.name;
    row.count = phase.count;
    row.total_s = phase.total_s;
    row.share = phase.share;
    rows.push_back(std::move(row));
  }
  return rows;
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

// The selected cases on every backend: the CPU's to profile, and the names of the other kernels,
// each once, which profile does not cover yet.
struct ProfileSelection {
  std::vector<CaseSpec> cpu_cases;
  std::vector<std::string> unprofiled;
};

Result<ProfileSelection> select_cases(const ProfileOptions& options) {
  Result<Suite> suite =
      selection_suite(options.suite, options.shapes, options.distribution, {},
                      "nothing to profile: give --suite NAME|FILE or --shape ...");
  if (!suite) return suite.status();
  if (Status s = load_selected_kernels(*suite, options.kernel_globs, {}); !s) return s;
  const Result<std::optional<std::regex>> filter = parse_case_filter(options.filter);
  if (!filter) return filter.status();
  ProfileSelection selection;
  for (CaseSpec& spec : expand_cases(*suite, options.kernel_globs, *filter,
                                     {{Backend::cpu, "cpu"}, {Backend::cuda, "gpu"}})) {
    if (spec.kernel->backend == Backend::cpu) {
      selection.cpu_cases.push_back(std::move(spec));
      continue;
    }
    // "cuda.flash2 [cuda]": a PyTorch peer has a CPU and a GPU kernel of one name.
    const std::string name =
        spec.kernel->name + " [" + std::string(backend_name(spec.kernel->backend)) + "]";
    if (std::find(selection.unprofiled.begin(), selection.unprofiled.end(), name) ==
        selection.unprofiled.end()) {
      selection.unprofiled.push_back(name);
    }
  }
  return selection;
}

// Profiles one case: prints its breakdown, adds its trace events, stores its rows. False when it
// failed (printed).
bool profile_one(const CaseSpec& spec, int pid, uint64_t seed, const ProfileOptions& options,
                 Store* store, json& events, int64_t& origin_ns, std::ostream& out,
                 std::ostream& err) {
  Result<ProfiledCase> result = profile_case(spec, seed, options.timed_forwards);
  if (!result) {
    out << "  error: " << result.status().message << "\n";
    return false;
  }
  if (origin_ns == 0) origin_ns = result->start_ns;
  const ProfileBreakdown breakdown =
      breakdown_of(result->by_thread, result->start_ns, result->end_ns);
  print_breakdown(breakdown, result->median_s, result->extra_memory_bytes, out);
  for (json& event :
       trace_events(result->by_thread, result->start_ns, result->end_ns, pid,
                    spec.kernel->name + " " + shape_string(spec.problem), origin_ns)) {
    events.push_back(std::move(event));
  }
  if (store != nullptr) {
    if (Status s = store->add_profile(profile_rows(spec, breakdown, *result)); !s) {
      err << "error: " << s.message << "\n";
      return false;
    }
  }
  return true;
}

}  // namespace

int profile_command(const ProfileOptions& options, std::ostream& out, std::ostream& err) {
  Result<ProfileSelection> selection = select_cases(options);
  if (!selection) {
    err << "error: " << selection.status().message << "\n";
    return kExitUsage;
  }
  for (const std::string& name : selection->unprofiled) {
    out << name
        << ": not profiled: profile records CPU kernels' phases; CUPTI's trace of GPU "
           "kernels is not built yet\n";
  }
  const std::vector<CaseSpec>& cases = selection->cpu_cases;
  if (cases.empty()) {
    err << "error: no CPU kernel's case in the selection to profile\n";
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
      << " plain and recorded forwards each\n";
  json events = json::array();
  int64_t origin_ns = 0;
  int profiled = 0, failed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseSpec& spec = cases[i];
    out << "[" << i + 1 << "/" << cases.size() << "] " << spec.kernel->name << " "
        << shape_string(spec.problem) << "\n";
    if (const std::string why = profile_skip_reason(spec); !why.empty()) {
      out << "  skipped: " << why << "\n";
      continue;
    }
    const bool ok = profile_one(spec, static_cast<int>(i) + 1, seed, options, store.get(), events,
                                origin_ns, out, err);
    (ok ? profiled : failed) += 1;
  }
  if (trace.is_open()) {
    trace << trace_document(std::move(events)).dump() << "\n";
    out << "trace: " << options.trace_path << " (open it in ui.perfetto.dev or chrome://tracing)\n";
  }
  if (store) out << "stored in " << options.db_path << " (table profiles)\n";
  out << profiled << " profiled" << (failed > 0 ? ", " + std::to_string(failed) + " failed" : "")
      << "\n";
  if (profiled == 0 && failed == 0) err << "error: every selected case was skipped\n";
  return failed > 0 ? kExitFailures : profiled > 0 ? kExitClean : kExitUsage;
}

}  // namespace attnbench
