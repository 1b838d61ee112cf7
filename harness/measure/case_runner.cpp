#include "harness/measure/case_runner.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "harness/core/nvtx.h"
#include "harness/measure/npy.h"
#include "harness/measure/timing.h"
#include "kernels/registry.h"
#include "reference/formats.h"

namespace attnbench {
namespace {

// The kernel's details and the device's, as one JSON object (either may be empty).
std::string merged_details(const std::string& kernel_details, const std::string& device_details) {
  if (device_details.empty()) return kernel_details;
  if (kernel_details.empty()) return device_details;
  nlohmann::json merged = nlohmann::json::parse(kernel_details, nullptr, false);
  if (!merged.is_object()) return kernel_details;
  merged.update(nlohmann::json::parse(device_details));
  return merged.dump();
}

Status dump_case(const std::string& directory, const ProblemInputs& inputs,
                 const KernelOutputs* outputs, const ReferenceRows* reference,
                 const GradientReference* gradients, const CaseRequest& request,
                 const CaseOutcome& outcome) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) return Status::Error("cannot create dump folder '" + directory + "': " + error.message());
  const Problem& p = inputs.problem;
  const AttentionInputs view = inputs.view();
  auto dump_tensor = [&](const std::string& name, const TensorView& tensor, int64_t seqlen,
                         int64_t heads, int64_t dim) -> Status {
    std::vector<float> values(static_cast<size_t>(p.batch * seqlen * heads * dim));
    size_t i = 0;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t s = 0; s < seqlen; ++s)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < dim; ++d) {
            const bool held = s < tensor.placement.rows(b, seqlen);  // varlen: NaN past a length
            values[i++] = held ? tensor.at(b, s, h, d) : std::numeric_limits<float>::quiet_NaN();
          }
    return write_npy(directory + "/" + name + ".npy", {p.batch, seqlen, heads, dim}, values.data());
  };
  Status status = dump_tensor("q", view.q, p.seqlen_q, p.heads_q, p.head_dim_qk);
  if (status.ok) status = dump_tensor("k", view.k, p.seqlen_k, p.heads_kv, p.head_dim_qk);
  if (status.ok) status = dump_tensor("v", view.v, p.seqlen_k, p.heads_kv, p.head_dim_v);
  if (status.ok && outputs != nullptr) {
    const TensorView out_view{p.output_dtype, outputs->out.data(), inputs.layout.out, 1.0f};
    status = dump_tensor("out", out_view, p.seqlen_q, p.heads_q, p.head_dim_v);
  }
  if (status.ok && p.has_backward()) {
    status = dump_tensor("dout", view.dout, p.seqlen_q, p.heads_q, p.head_dim_v);
  }
  if (status.ok && p.has_backward() && outputs != nullptr && outputs->has_gradients) {
    const DType grad = p.grad_dtype();
    status = dump_tensor("dq", {grad, outputs->dq.data(), inputs.layout.dq}, p.seqlen_q, p.heads_q,
                         p.head_dim_qk);
    if (status.ok)
      status = dump_tensor("dk", {grad, outputs->dk.data(), inputs.layout.dk}, p.seqlen_k,
                           p.heads_kv, p.head_dim_qk);
    if (status.ok)
      status = dump_tensor("dv", {grad, outputs->dv.data(), inputs.layout.dv}, p.seqlen_k,
                           p.heads_kv, p.head_dim_v);
  }
  if (status.ok && gradients != nullptr) {
    const int64_t query_rows = static_cast<int64_t>(gradients->query_rows.size());
    const int64_t key_rows = static_cast<int64_t>(gradients->key_rows.size());
    std::vector<int64_t> query_indices, key_indices;
    for (const RowIndex& r : gradients->query_rows)
      query_indices.insert(query_indices.end(), {r.b, r.query, r.h});
    for (const KeyRowIndex& r : gradients->key_rows)
      key_indices.insert(key_indices.end(), {r.b, r.key, r.kv_head});
    status = write_npy(directory + "/ref_dq.npy", {query_rows, p.head_dim_qk}, gradients->dq.data());
    if (status.ok)
      status = write_npy(directory + "/ref_dq_rows.npy", {query_rows, 3}, query_indices.data());
    if (status.ok)
      status = write_npy(directory + "/ref_dk.npy", {key_rows, p.head_dim_qk}, gradients->dk.data());
    if (status.ok)
      status = write_npy(directory + "/ref_dv.npy", {key_rows, p.head_dim_v}, gradients->dv.data());
    if (status.ok)
      status = write_npy(directory + "/ref_key_rows.npy", {key_rows, 3}, key_indices.data());
  }
  if (status.ok && reference != nullptr) {
    const int64_t rows = static_cast<int64_t>(reference->rows.size());
    std::vector<int64_t> indices;
    for (const RowIndex& r : reference->rows) indices.insert(indices.end(), {r.b, r.query, r.h});
    status = write_npy(directory + "/ref.npy", {rows, p.head_dim_v}, reference->ref.data());
    if (status.ok) status = write_npy(directory + "/ref_rows.npy", {rows, 3}, indices.data());
  }
  std::ofstream repro(directory + "/repro.txt");
  repro << "# " << request.kernel << " " << shape_string(p) << " dist=" << request.distribution
        << "\n# status: " << result_status_name(outcome.status)
        << (outcome.message.empty() ? "" : " (" + outcome.message + ")") << "\n"
        << "# q, k, v, out: (batch, seq, heads, dim) float32, real values (FP8 descaled); a "
           "varlen batch's sequences padded to the longest with NaN rows\n"
        << "# ref: fp64 reference of the checked rows; ref_rows: their (batch, query, head)\n"
        << (p.has_backward()
                ? "# dout: the upstream gradient; dq, dk, dv: the kernel's gradients (batch, seq, "
                  "heads, dim); ref_dq (ref_dq_rows: batch, query, head), ref_dk and ref_dv "
                  "(ref_key_rows: batch, key, kv head): the fp64 gradients of the checked rows\n"
                : "")
        << request.repro << "\n";
  if (!repro) return Status::Error("cannot write '" + directory + "/repro.txt'");
  return status;
}

// A forward that does nothing: what remains of a timed forward is its overhead.
class EmptyPlan final : public Plan {
 public:
  Status run(const AttentionParams&) override { return Status::Ok(); }
  Status run_backward(const AttentionParams&) override { return Status::Ok(); }
};

// Bytes of two gradients differ: the largest |a - b| over the elements (NaN-aware: a NaN on one
// side only counts as infinite).
double max_difference(DType dtype, const GuardedBuffer& a, const GuardedBuffer& b) {
  double largest = 0;
  const int64_t elements = static_cast<int64_t>(a.bytes() / dtype_size(dtype));
  for (int64_t e = 0; e < elements; ++e) {
    const double x = load_element(dtype, a.data(), e), y = load_element(dtype, b.data(), e);
    if (std::isnan(x) && std::isnan(y)) continue;
    const double difference = std::fabs(x - y);
    largest = std::max(largest, std::isnan(difference) ? INFINITY : difference);
  }
  return largest;
}

nlohmann::json check_json(const CheckSummary& check) {
  return {{"max_abs_error", check.max_abs_error}, {"bound", check.bound},
          {"lse_max_error", std::isfinite(check.lse_max_error) ? nlohmann::json(check.lse_max_error)
                                                               : nlohmann::json()}};
}

// What could not be measured says why in the result (a passed result's message is otherwise
// empty): a forward that could not be captured, an energy counter missing.
void note_unmeasured(CaseOutcome& outcome, const std::string& what, const std::string& why) {
  outcome.message += (outcome.message.empty() ? "" : "; ") + what + " not measured: " + why;
}

// A failure leads the message; what was noted before it (unmeasured launches) follows.
void set_failure(CaseOutcome& outcome, const std::string& failure) {
  outcome.message = failure + (outcome.message.empty() ? "" : "; " + outcome.message);
}

std::string sanitize(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '=' || c == '-';
    out += keep ? c : '_';
  }
  return out;
}

}  // namespace

const ReferenceRows& CaseRunner::reference_for(const Kernel& kernel) {
  switch (lowp_model_for(kernel, inputs_->problem)) {
    case LowpModel::plain:
      return *reference_;
    case LowpModel::envelope: {
      const Fp8Recipe base = envelope_base_for(kernel);
      for (const auto& [known, rows] : envelope_references_) {
        if (known == base) return rows;
      }
      NvtxRange range("reference (FP8 envelope)");
      envelope_references_.emplace_back(base, with_envelope(*reference_, *inputs_, base));
      return envelope_references_.back().second;
    }
    case LowpModel::own_recipe:
      break;
  }
  for (const auto& [recipe, rows] : recipe_references_) {
    if (recipe == *kernel.fp8_recipe) return rows;
  }
  NvtxRange range("reference (FP8 recipe)");
  recipe_references_.emplace_back(*kernel.fp8_recipe,
                                  with_recipe(*reference_, *inputs_, *kernel.fp8_recipe));
  return recipe_references_.back().second;
}

bool plan_failure_is_out_of_memory(const std::string& message) {
  return message.rfind("out of memory", 0) == 0;
}

bool plan_failure_is_skip(const std::string& message) {
  return plan_failure_is_out_of_memory(message) || message.rfind("unsupported", 0) == 0 ||
         message.rfind("cudnn:", 0) == 0;
}

CheckSummary check_kernel(const Kernel& kernel, Plan& plan, DeviceExecutor& executor,
                          const ProblemInputs& inputs, const ReferenceRows& reference,
                          KernelOutputs& outputs, std::string& failure, Status& run_status) {
  outputs = make_outputs(inputs, kernel.returns_lse);
  run_status = executor.run_checked(plan, outputs, Pass::fwd);
  if (!run_status.ok) {
    failure = "kernel error: " + run_status.message;
    return CheckSummary{};
  }
  CheckSummary summary = compare_output(inputs, reference, outputs, failure);
  if (kernel.deterministic) {
    KernelOutputs second = make_outputs(inputs, kernel.returns_lse);
    run_status = executor.run_checked(plan, second, Pass::fwd);
    if (!run_status.ok) {
      failure = "kernel error on the second run: " + run_status.message;
      return summary;
    }
    const bool same_out = std::memcmp(outputs.out.data(), second.out.data(), outputs.out.bytes()) == 0;
    const bool same_lse = !outputs.has_lse ||
                          std::memcmp(outputs.lse.data(), second.lse.data(), outputs.lse.bytes()) == 0;
    summary.repeatable = same_out && same_lse;
    if (!summary.repeatable && failure.empty()) failure = "not repeatable: a second run gave different bits";
  }
  return summary;
}

CheckSummary check_backward(const Kernel& kernel, Plan& plan, DeviceExecutor& executor,
                            const ProblemInputs& inputs, const ReferenceRows& reference,
                            const GradientReference& gradients, KernelOutputs& outputs,
                            std::string& failure, Status& run_status, nlohmann::json& details) {
  const CheckSummary forward =
      check_kernel(kernel, plan, executor, inputs, reference, outputs, failure, run_status);
  details["forward_check"] = check_json(forward);
  if (!failure.empty()) {
    failure = "forward: " + failure;
    return forward;
  }
  run_status = executor.run_checked(plan, outputs, Pass::bwd);
  if (!run_status.ok) {
    failure = "kernel error in the backward: " + run_status.message;
    return CheckSummary{};
  }
  std::vector<GradientCheck> checks;
  CheckSummary summary = compare_gradients(inputs, gradients, outputs, checks, failure);
  summary.lse_max_error = forward.lse_max_error;
  for (const GradientCheck& check : checks) {
    details["gradients"][check.name] = {{"max_abs_error", check.max_abs_error},
                                        {"bound", check.bound},
                                        {"rel_l2", check.rel_l2}};
  }

  // The rerun reads the same forward outputs (kept on a GPU's buffers; copied for the host).
  KernelOutputs second = make_outputs(inputs, kernel.returns_lse);
  std::memcpy(second.out.data(), outputs.out.data(), outputs.out.bytes());
  if (outputs.has_lse) std::memcpy(second.lse.data(), outputs.lse.data(), outputs.lse.bytes());
  run_status = executor.run_checked(plan, second, Pass::bwd);
  if (!run_status.ok) {
    if (failure.empty()) failure = "kernel error in the second backward: " + run_status.message;
    return summary;
  }
  const DType dtype = inputs.problem.grad_dtype();
  const std::pair<const char*, std::pair<const GuardedBuffer*, const GuardedBuffer*>> pairs[] = {
      {"dq", {&outputs.dq, &second.dq}}, {"dk", {&outputs.dk, &second.dk}},
      {"dv", {&outputs.dv, &second.dv}}};
  for (const auto& [name, buffers] : pairs) {
    const bool same =
        std::memcmp(buffers.first->data(), buffers.second->data(), buffers.first->bytes()) == 0;
    details["backward_rerun_max_difference"][name] =
        same ? 0.0 : max_difference(dtype, *buffers.first, *buffers.second);
    if (same || !kernel.backward_deterministic) continue;
    summary.repeatable = false;
    if (failure.empty()) {
      failure = std::string("not repeatable: a second backward gave different bits in ") + name +
                " (the kernel declares its backward deterministic)";
    }
  }
  return summary;
}

Status CaseRunner::prepare_inputs(const CaseRequest& request) {
  Distribution distribution = Distribution::normal;
  if (!parse_distribution(request.distribution, distribution)) {
    return Status::Error("unknown distribution '" + request.distribution + "'");
  }
  // The passes of one shape share their inputs (dO drawn once a pass needs it) and the forward's
  // reference.
  const std::string key = inputs_key(request);
  if (inputs_ && key == inputs_key_) {
    // A dO of another distribution has gradients of its own.
    if (request.problem.has_backward() && inputs_->dout_drawn != request.problem.dout) {
      gradient_reference_.reset();
    }
    set_pass(request.problem, request.seed, *inputs_);
    return Status::Ok();
  }
  inputs_.reset();
  reference_.reset();
  gradient_reference_.reset();
  recipe_references_.clear();
  envelope_references_.clear();
  inputs_key_.clear();
  NvtxRange range("inputs");
  auto inputs = std::make_unique<ProblemInputs>();
  if (Status s = make_inputs(request.problem, distribution, request.seed, *inputs); !s.ok) return s;
  inputs_ = std::move(inputs);
  inputs_key_ = key;
  return Status::Ok();
}

double CaseRunner::timed_forward_overhead(KernelOutputs& outputs) {
  if (forward_overhead_s_) return *forward_overhead_s_;
  EmptyPlan empty;
  TimedForward forward = executor_.timed_forward(empty, outputs);
  std::vector<double> overheads;
  std::string error;
  for (int i = 0; i < kOverheadProbeForwards; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double timed = forward(error);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timed < 0) return 0;  // the real forward will report the error
    overheads.push_back(std::max(0.0, wall - timed));
  }
  std::sort(overheads.begin(), overheads.end());
  forward_overhead_s_ = overheads[overheads.size() / 2];
  return *forward_overhead_s_;
}

// Launches, then timing, then energy (when asked): a passed case's performance. The timed and
// counted forwards write into their own buffers, so the checked output stays for dumps.
KernelOutputs CaseRunner::outputs_for_steps(const Kernel& kernel, Plan& plan) {
  KernelOutputs outputs = make_outputs(*inputs_, kernel.returns_lse);
  if (inputs_->problem.pass == Pass::bwd) {
    if (Status s = executor_.run_checked(plan, outputs, Pass::fwd); !s.ok) {
      throw std::runtime_error("the forward before the timed backwards: " + s.message);
    }
  }
  return outputs;
}

void CaseRunner::prepare_timing(CaseInFlight& c) {
  c.scratch_outputs = outputs_for_steps(*c.kernel, *c.plan);
  Status launches_status;
  c.outcome.launches = executor_.count_launches(*c.plan, c.scratch_outputs, launches_status);
  if (!launches_status.ok) note_unmeasured(c.outcome, "launches", launches_status.message);
  TimedForward forward = executor_.timed_forward(*c.plan, c.scratch_outputs);
  std::string error;
  const double warmup_seconds = forward(error);  // untimed: caches, clocks, lazy loading
  if (warmup_seconds < 0) throw std::runtime_error("warm-up: " + error);
  const ForwardCost cost{warmup_seconds, timed_forward_overhead(c.scratch_outputs)};
  c.timed = TimedCase{c.request.name, std::move(forward),
                      plan_timing(cost, c.request.repetitions, c.request.max_case_seconds),
                      [this](Sample& sample) { executor_.annotate_sample(sample); }};
}

void CaseRunner::finish_timing(CaseInFlight& c, const TimingResult& timing) {
  CaseOutcome& outcome = c.outcome;
  if (!timing.status.ok) {
    outcome.status = executor_.healthy() ? ResultStatus::error : ResultStatus::crashed;
    outcome.device_unusable = !executor_.healthy();
    set_failure(outcome, "timing: " + timing.status.message);
    return;
  }
  outcome.samples = timing.samples;
  outcome.timing = timing.summary;
  if (!c.request.measure_energy) return;
  NvtxRange range("energy");
  Status energy_status;
  outcome.energy_j = executor_.energy_per_forward(*c.plan, c.scratch_outputs, energy_status);
  if (!energy_status.ok) {
    note_unmeasured(outcome, "energy", energy_status.message);
  } else if (!std::isfinite(outcome.energy_j)) {
    note_unmeasured(outcome, "energy", "the executor gave no value and no reason");
  }
}

void CaseRunner::record_profile(const Kernel& kernel, Plan& plan, const CaseRequest& request,
                                CaseOutcome& outcome) {
  NvtxRange range("profile");
  KernelOutputs scratch_outputs = outputs_for_steps(kernel, plan);
  TimedForward forward = executor_.timed_forward(plan, scratch_outputs);
  std::string error;
  const bool timed = executor_.measures_time();
  if (timed && forward(error) < 0) throw std::runtime_error("warm-up: " + error);
  std::vector<double> plain;
  std::vector<ForwardProfile> recorded;
  for (int i = 0; i < request.profile_forwards; ++i) {
    if (timed) {
      const double seconds = forward(error);
      if (seconds < 0) throw std::runtime_error("timing: " + error);
      plain.push_back(seconds);
    }
    Result<ForwardProfile> one = executor_.profile_forward(plan, scratch_outputs);
    if (!one) throw std::runtime_error("profile: " + one.status().message);
    recorded.push_back(std::move(*one));
  }
  std::sort(recorded.begin(), recorded.end(),
            [](const ForwardProfile& a, const ForwardProfile& b) { return a.forward_s < b.forward_s; });
  std::sort(plain.begin(), plain.end());
  outcome.profile = std::move(recorded[recorded.size() / 2]);
  outcome.profile->median_s = plain.empty() ? -1 : plain[plain.size() / 2];
}

std::string CaseRunner::inputs_key(const CaseRequest& request) {
  return inputs_shape(request.problem) + "|" + request.distribution + "|" +
         std::to_string(request.seed);
}

void CaseRunner::check_case(CaseInFlight& c) {
  NvtxRange case_range(c.request.name);
  const CaseRequest& request = c.request;
  CaseOutcome& outcome = c.outcome;
  outcome.timer = executor_.timer_name();
  const PlanContext context = executor_.plan_context();
  c.kernel = find_kernel(request.kernel, executor_.backend());
  if (c.kernel == nullptr) {
    outcome.message = "unknown kernel '" + request.kernel + "'";
    return;
  }
  const Kernel& kernel = *c.kernel;
  try {
    if (Status s = prepare_inputs(request); !s.ok) throw std::runtime_error("inputs: " + s.message);
    if (Status s = executor_.load_inputs(*inputs_); !s.ok) {
      outcome.device_unusable = !executor_.healthy();
      throw std::runtime_error("loading inputs: " + s.message);
    }
    executor_.reset_scratch_peak();
    {
      NvtxRange range("plan");
      Result<std::unique_ptr<Plan>> made = kernel.make_plan(request.problem, context);
      if (!made || *made == nullptr) {
        const std::string why = made ? "the kernel made no plan" : made.status().message;
        outcome.status = plan_failure_is_skip(why) ? ResultStatus::skipped : ResultStatus::error;
        outcome.message = why;
        outcome.device_unusable = !executor_.healthy();
        c.out_of_memory = plan_failure_is_out_of_memory(why);
        return;
      }
      c.plan = std::move(*made);
    }
    if (!reference_) {
      NvtxRange range("reference");
      reference_ = std::make_unique<ReferenceRows>(compute_reference(*inputs_, request.seed, 1.0f));
    }
    const ReferenceRows& reference = reference_for(kernel);
    if (request.problem.has_backward() && !gradient_reference_) {
      NvtxRange range("reference (gradients)");
      gradient_reference_ =
          std::make_unique<GradientReference>(compute_gradient_reference(*inputs_, request.seed, *reference_));
    }
    std::string failure;
    Status run_status;
    {
      NvtxRange range("check");
      outcome.check =
          request.problem.has_backward()
              ? check_backward(kernel, *c.plan, executor_, *inputs_, reference,
                               *gradient_reference_, c.outputs, failure, run_status,
                               c.check_details)
              : check_kernel(kernel, *c.plan, executor_, *inputs_, reference, c.outputs, failure,
                             run_status);
    }
    c.checked_output_kept = true;
    // A kernel whose memory bypasses the tracking allocator reports its own (or -1: unknown).
    outcome.extra_memory_bytes = c.plan->own_extra_memory_bytes().value_or(
        static_cast<int64_t>(executor_.scratch_peak_bytes()));
    if (!executor_.healthy()) {
      outcome.status = ResultStatus::crashed;
      outcome.message = failure;
      outcome.device_unusable = true;
    } else {
      outcome.status = failure.empty() ? ResultStatus::passed : ResultStatus::failed;
      outcome.message = failure;
    }
    if (outcome.status == ResultStatus::passed && !executor_.measures_time()) {
      // A device that times nothing runs no forward of its own for the count: the checked
      // forward's launches (emu) are the count.
      Status launches_status;
      outcome.launches = executor_.count_launches(*c.plan, c.outputs, launches_status);
      if (!launches_status.ok) note_unmeasured(outcome, "launches", launches_status.message);
    }
    if (outcome.status == ResultStatus::passed && request.profile_forwards > 0) {
      record_profile(kernel, *c.plan, request, outcome);
    } else if (outcome.status == ResultStatus::passed && !request.check_only &&
               executor_.measures_time()) {
      prepare_timing(c);
    }
  } catch (const std::exception& e) {
    c.timed.reset();
    outcome.status = executor_.healthy() ? ResultStatus::error : ResultStatus::crashed;
    outcome.device_unusable = !executor_.healthy();
    set_failure(outcome, e.what());
  }
}

CaseOutcome CaseRunner::finish_case(CaseInFlight& c) {
  CaseOutcome& outcome = c.outcome;
  if (c.plan) {
    outcome.details_json = merged_details(
        merged_details(c.plan->details(), c.check_details.empty() ? "" : c.check_details.dump()),
        executor_.run_details());
  }
  const CaseRequest& request = c.request;
  const bool failed = outcome.status == ResultStatus::failed;
  if (inputs_ && (failed || !request.dump_dir.empty())) {
    const std::string base = request.dump_dir.empty() ? request.failure_dump_dir : request.dump_dir;
    const std::string directory =
        (std::filesystem::path(base.empty() ? "." : base) /
         sanitize(request.kernel + "__" + shape_string(request.problem) + "__" + request.distribution))
            .string();
    const Status dumped = dump_case(directory, *inputs_, c.checked_output_kept ? &c.outputs : nullptr,
                                    reference_.get(), gradient_reference_.get(), request, outcome);
    if (!dumped.ok) outcome.message += " [dump failed: " + dumped.message + "]";
    else if (failed) outcome.message += " [dumped to " + directory + "]";
  }
  return std::move(outcome);
}

void CaseRunner::time_and_finish(std::vector<std::unique_ptr<CaseInFlight>>& in_flight,
                                 std::vector<CaseOutcome>& outcomes) {
  std::vector<TimedCase> timed;
  std::vector<CaseInFlight*> timed_cases;
  for (const auto& c : in_flight) {
    if (!c->timed) continue;
    timed.push_back(*c->timed);
    timed_cases.push_back(c.get());
  }
  std::vector<TimingResult> timings;
  {
    NvtxRange range("timing");
    timings = time_interleaved(timed);
  }
  for (size_t t = 0; t < timed_cases.size(); ++t) {
    CaseInFlight& c = *timed_cases[t];
    try {
      finish_timing(c, timings[t]);
    } catch (const std::exception& e) {
      c.outcome.status = executor_.healthy() ? ResultStatus::error : ResultStatus::crashed;
      c.outcome.device_unusable = !executor_.healthy();
      set_failure(c.outcome, e.what());
    }
  }
  for (auto& c : in_flight) outcomes[c->index] = finish_case(*c);
  in_flight.clear();  // the plans and their scratch go
}

std::vector<CaseOutcome> CaseRunner::run_group(const std::vector<CaseRequest>& requests) {
  std::vector<CaseOutcome> outcomes(requests.size());
  std::vector<std::unique_ptr<CaseInFlight>> in_flight;
  for (size_t i = 0; i < requests.size(); ++i) {
    // Inputs are shared by the cases in flight: another problem's wait for them to finish.
    if (!in_flight.empty() && inputs_key(requests[i]) != inputs_key_)
      time_and_finish(in_flight, outcomes);
    auto c = std::make_unique<CaseInFlight>(requests[i], i);
    check_case(*c);
    // Out of memory beside the plans in flight: time and free those, then try it alone.
    if (c->out_of_memory && !in_flight.empty()) {
      time_and_finish(in_flight, outcomes);
      c = std::make_unique<CaseInFlight>(requests[i], i);
      check_case(*c);
    }
    const bool unusable = c->outcome.device_unusable;
    in_flight.push_back(std::move(c));
    // A device that can no longer run anything times nothing more; the rest are not started.
    if (unusable) {
      time_and_finish(in_flight, outcomes);
      for (size_t rest = i + 1; rest < requests.size(); ++rest) {
        outcomes[rest].status = ResultStatus::crashed;
        outcomes[rest].message = "not run: the device became unusable in an earlier case of its group";
        outcomes[rest].device_unusable = true;
      }
      return outcomes;
    }
  }
  time_and_finish(in_flight, outcomes);
  return outcomes;
}

CaseOutcome CaseRunner::run(const CaseRequest& request) { return run_group({request}).front(); }

}  // namespace attnbench
