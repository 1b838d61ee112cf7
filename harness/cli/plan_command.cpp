#include "harness/cli/plan_command.h"

#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "harness/cli/runner.h"
#include "harness/measure/cost_model.h"
#include "harness/measure/devices.h"
#include "harness/suite/case_matrix.h"
#include "harness/suite/suite.h"
#include "reference/flops.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

Result<Suite> load_selection(const PlanOptions& options) {
  return selection_suite(options.suite, options.shapes, "", options.pass, {},
                         "nothing to plan: give --suite NAME|FILE or --shape ...");
}

struct ChosenModel {
  DeviceModel model;
  std::string source;  // why this model: "--device-model", the GPU it was read from, the default
};

// --device-model when given; else the first GPU's model; else the default. A GPU no model
// describes (an A100, an H100 PCIe) is planned as the default, and the source says so: a plan
// is a lead, and gpu-check must still run there.
Result<ChosenModel> choose_device_model(const std::string& asked) {
  const DeviceModel fallback = *find_device_model(kDefaultDeviceModel);
  if (!asked.empty()) {
    if (std::optional<DeviceModel> model = find_device_model(asked)) {
      return ChosenModel{*model, "--device-model"};
    }
    return Status::Error("--device-model '" + asked + "': accepted: " + device_model_names());
  }
  for (const Device& device : discover_devices()) {
    if (device.backend != Backend::cuda) continue;
    const std::string gpu = device.label() + " (" + device.info.name + ")";
    if (std::optional<DeviceModel> model = device_model_of_gpu(device.info.name)) {
      return ChosenModel{*model, gpu};
    }
    return ChosenModel{fallback, gpu + " has no model of its own: planned as " + fallback.name};
  }
  return ChosenModel{fallback, "no GPU here: the default"};
}

}  // namespace

int plan_command(const PlanOptions& options, std::ostream& out, std::ostream& err) {
  const Result<ChosenModel> chosen = choose_device_model(options.device_model);
  if (!chosen) {
    err << "error: " << chosen.status().message << "\n";
    return kExitUsage;
  }
  const DeviceModel* device = &chosen->model;
  Result<Suite> selection = load_selection(options);
  if (!selection) {
    err << "error: " << selection.status().message << "\n";
    return kExitUsage;
  }
  const Suite& suite = *selection;
  if (Status s = load_selected_kernels(suite, options.kernel_globs, options.plugins); !s.ok) {
    err << "error: " << s.message << "\n";
    return kExitUsage;
  }
  const Result<std::optional<std::regex>> parsed_filter = parse_case_filter(options.filter);
  if (!parsed_filter) {
    err << "error: " << parsed_filter.status().message << "\n";
    return kExitUsage;
  }
  const std::optional<std::regex>& filter = *parsed_filter;
  const std::vector<CaseSpec> cases =
      expand_cases(suite, options.kernel_globs, filter, {{Backend::cuda, device->name}});
  CaseCostRequest request;
  request.check_only = options.check_only;
  request.repetitions = resolve_repetitions(options.repetitions, suite);
  request.max_case_seconds = resolve_max_case_seconds(options.max_case_seconds, suite);
  request.measure_energy = options.measure_energy || suite.measure_energy;

  json rows = json::array();
  std::set<std::string> groups_paid;
  double total_s = device->worker_start_s;
  for (const CaseSpec& spec : cases) {
    const std::string reason = skip_reason(*spec.kernel, spec.problem);
    json row = {{"name", spec.name},
                {"kernel", spec.kernel->name},
                {"shape", shape_string(spec.problem)},
                {"supported", reason.empty()},
                {"reason", reason}};
    if (reason.empty()) {
      const CasePrediction p = predict_case(*spec.kernel, spec.problem, *device, request);
      // Inputs and the reference are made once per group (every pass of a shape), by its first
      // supported case; the gradients' reference by its first case with a backward.
      double host_s = groups_paid.insert(spec.group).second ? p.host_s : 0.0;
      if (spec.problem.has_backward() && groups_paid.insert(spec.group + "|gradients").second) {
        host_s += p.gradient_reference_s;
      }
      const double case_s = host_s + p.case_s();
      total_s += case_s;
      row.update({{"forward_s", p.forward_s},
                  {"flops_per_s", attention_flops(spec.problem) / p.forward_s},
                  {"host_s", host_s},
                  {"plan_s", p.plan_s},
                  {"check_s", p.check_s},
                  {"timing_s", p.timing_s},
                  {"energy_s", p.energy_s},
                  {"iterations", options.check_only ? 0 : p.timing.iterations},
                  {"repetitions", options.check_only ? 0 : p.timing.repetitions_within_budget()},
                  {"case_s", case_s}});
    }
    rows.push_back(row);
  }
  if (options.json) {
    out << json{{"device_model", device->name},
                {"device_model_source", chosen->source},
                {"rates_measured", device->rates_measured},
                {"worker_start_s", device->worker_start_s},
                {"repetitions", request.repetitions},
                {"max_case_seconds", request.max_case_seconds},
                {"check_only", options.check_only},
                {"cases", rows},
                {"total_s", total_s}}
               .dump(1)
        << "\n";
    return kExitClean;
  }
  // Columns as wide as their longest entry (a variant's name, a serving shape), at least the usual.
  size_t kernel_width = 24, shape_width = 64;
  for (const json& row : rows) {
    kernel_width = std::max(kernel_width, row["kernel"].get<std::string>().size());
    shape_width = std::max(shape_width, row["shape"].get<std::string>().size());
  }
  out << std::fixed;
  for (const json& row : rows) {
    out << std::left << std::setw(static_cast<int>(kernel_width))
        << row["kernel"].get<std::string>() << " " << std::setw(static_cast<int>(shape_width))
        << row["shape"].get<std::string>() << " ";
    if (!row["supported"].get<bool>()) {
      out << "skip: " << row["reason"].get<std::string>() << "\n";
      continue;
    }
    out << std::right << std::setprecision(1) << std::setw(10)
        << row["forward_s"].get<double>() * 1e6 << " us/step " << std::setw(7)
        << row["flops_per_s"].get<double>() / 1e12 << " TFLOP/s " << std::setprecision(2)
        << std::setw(7) << row["case_s"].get<double>() << " s";
    // The group's first case pays its inputs and reference (a backward's gradients included).
    if (const double host_s = row["host_s"].get<double>(); host_s > 0) {
      out << " (inputs and reference " << host_s << " s)";
    }
    out << "\n";
  }
  out << std::setprecision(1) << cases.size() << " cases on a modeled " << device->name << " ("
      << chosen->source << "; rates: " << device->rates_measured << "): predicted " << total_s
      << " s (worker start " << device->worker_start_s << " s included)\n";
  return kExitClean;
}

}  // namespace attnbench
