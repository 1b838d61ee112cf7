// The recipe for one case on one device, the same for every device: inputs (made once per
// shape and reused by the kernels that follow), plan, checked runs against the reference, then
// timing through Google Benchmark, launches, energy. Runs inside a worker process, so a kernel
// that crashes takes only its worker down.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/measure/checker.h"
#include "harness/measure/gradient_checker.h"
#include "harness/measure/executor.h"
#include "harness/measure/inputs.h"
#include "harness/measure/timing.h"
#include "harness/core/records.h"

namespace attnbench {

struct CaseRequest {
  std::string name;  // kernel/shape/distribution: the benchmark's name
  std::string kernel;
  Problem problem;
  std::string distribution = "normal";
  uint64_t seed = 0;  // this case's seed: inputs and the sampled rows
  bool check_only = false;
  int repetitions = 10;
  double max_case_seconds = 2.0;
  bool measure_energy = false;
  std::string dump_dir;          // dump every case's tensors here when set
  std::string failure_dump_dir;  // where a failing case dumps otherwise
  std::string repro;             // the command that reproduces the case, for repro.txt
  // `attnbench profile`: after a passed check, this many pairs of a plain timed forward and a
  // recorded one (executor.h profile_forward) instead of the timing; 0 for a run.
  int profile_forwards = 0;
};

// What the device side measured; the parent adds ids, series key and derived throughput.
struct CaseOutcome {
  ResultStatus status = ResultStatus::error;
  std::string message;
  CheckSummary check;
  TimingSummary timing;
  std::vector<Sample> samples;
  int64_t extra_memory_bytes = -1;
  int launches = -1;
  double energy_j = kNotMeasured;
  std::string details_json;  // Plan::details()
  std::string timer;         // how the samples were timed
  bool device_unusable = false;  // the worker must be replaced after this case
  // Of a profile request: the recorded forward of median time, with the plain forwards' median.
  std::optional<ForwardProfile> profile;
};

// Poison, run one forward, compare; for deterministic kernels run again and demand identical
// bytes. `outputs` keeps the first run's output.
CheckSummary check_kernel(const Kernel& kernel, Plan& plan, DeviceExecutor& executor,
                          const ProblemInputs& inputs, const ReferenceRows& reference,
                          KernelOutputs& outputs, std::string& failure, Status& run_status);

// A backward's check: the forward first (check_kernel: a wrong forward fails the case as
// "forward: ..."), then one backward from its outputs, its gradients compared
// (compare_gradients), then a second backward: bit for bit equal for a kernel whose backward is
// deterministic, else its largest difference per gradient measured. `details` gets the forward's
// check, each gradient's figures and the rerun's difference (stored with the result).
CheckSummary check_backward(const Kernel& kernel, Plan& plan, DeviceExecutor& executor,
                            const ProblemInputs& inputs, const ReferenceRows& reference,
                            const GradientReference& gradients, KernelOutputs& outputs,
                            std::string& failure, Status& run_status, nlohmann::json& details);

// A case between its check and its timing: what its timed steps need kept alive.
struct CaseInFlight {
  CaseInFlight(CaseRequest r, size_t i) : request(std::move(r)), index(i) {}
  CaseRequest request;
  size_t index = 0;  // in its group
  const Kernel* kernel = nullptr;
  std::unique_ptr<Plan> plan;
  KernelOutputs outputs;  // the checked run's, kept for dumps
  bool checked_output_kept = false;
  bool out_of_memory = false;  // its plan could not be made for lack of memory
  nlohmann::json check_details = nlohmann::json::object();
  CaseOutcome outcome;
  KernelOutputs scratch_outputs;   // what the timed forwards write
  std::optional<TimedCase> timed;  // after its warm-up: what time_interleaved runs
};

class CaseRunner {
 public:
  explicit CaseRunner(DeviceExecutor& executor) : executor_(executor) {}
  CaseOutcome run(const CaseRequest& request);
  // The cases of one problem (the kernels of one shape, pass and distribution), each checked as
  // run() checks it, their plans kept, then all timed together, round-robin (time_interleaved),
  // so what the host does meanwhile reaches every kernel alike; then energy and dumps case by
  // case. One outcome per request, in order. A plan out of memory beside the others first lets
  // those be timed and freed; a case that makes the device unusable ends the group (the rest:
  // crashed, "not run").
  std::vector<CaseOutcome> run_group(const std::vector<CaseRequest>& requests);

 private:
  static std::string inputs_key(const CaseRequest& request);
  Status prepare_inputs(const CaseRequest& request);
  // Inputs, plan, reference, check; for a passed case to be timed, its launches and warm-up
  // (prepare_timing); a profile request is recorded here. Never throws: the outcome says.
  void check_case(CaseInFlight& c);
  void prepare_timing(CaseInFlight& c);
  // The case's samples and energy (outcome.message says what could not be measured, and why).
  void finish_timing(CaseInFlight& c, const TimingResult& timing);
  // Details and dumps: the outcome as sent back.
  CaseOutcome finish_case(CaseInFlight& c);
  // Times the cases in flight together, finishes each into outcomes[its index], frees them.
  void time_and_finish(std::vector<std::unique_ptr<CaseInFlight>>& in_flight,
                       std::vector<CaseOutcome>& outcomes);
  // Wall time of one timed forward beyond the forward itself (the L2 flush, events and
  // synchronize on a GPU), measured once per worker with an empty plan: the median of
  // kOverheadProbeForwards.
  double timed_forward_overhead(KernelOutputs& outputs);
  // A passed case's profile (request.profile_forwards): plain and recorded forwards interleaved,
  // so drift (clocks, other load) reaches both alike.
  void record_profile(const Kernel& kernel, Plan& plan, const CaseRequest& request,
                      CaseOutcome& outcome);
  static constexpr int kOverheadProbeForwards = 21;

  DeviceExecutor& executor_;
  std::optional<double> forward_overhead_s_;
  std::string inputs_key_;  // shape + distribution + seed of the cached inputs
  std::unique_ptr<ProblemInputs> inputs_;
  std::unique_ptr<ReferenceRows> reference_;
  std::unique_ptr<GradientReference> gradient_reference_;  // problems with a backward
  // Outputs for the timed steps: for a backward alone, filled by one forward first (the
  // backward reads them; a GPU keeps them on the device).
  KernelOutputs outputs_for_steps(const Kernel& kernel, Plan& plan);
  // The reference rows with the low-precision rows of each FP8 recipe judged on these inputs.
  std::vector<std::pair<Fp8Recipe, ReferenceRows>> recipe_references_;
  // The envelopes judged on these inputs, by their base recipe.
  std::vector<std::pair<Fp8Recipe, ReferenceRows>> envelope_references_;
  // The rows lowp_model_for names: reference_, its rows with the kernel's own FP8 recipe, or the
  // envelope of the opaque FP8 recipes around the kernel's base.
  const ReferenceRows& reference_for(const Kernel& kernel);
};

// Whether a failed make_plan means "outside what the kernel can do here" (skipped) rather than
// an error: out of memory, or the library's own refusal ("unsupported: ...", "cudnn: ...").
bool plan_failure_is_skip(const std::string& message);
// Of those, the lack of memory (run_group then frees the plans in flight and tries again).
bool plan_failure_is_out_of_memory(const std::string& message);

}  // namespace attnbench
