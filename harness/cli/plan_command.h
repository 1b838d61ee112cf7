// `attnbench plan`: what a selection of cases would cost on a modeled device, without running
// anything (harness/cost_model.h). ci/gpu-check.sh --plan reads its JSON to budget each step.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attnbench {

// The model planned for when --device-model is not given and no GPU is present.
inline constexpr const char* kDefaultDeviceModel = "h200";

struct PlanOptions {
  std::string suite;
  std::vector<std::string> shapes;
  std::string pass;  // --pass, as `run`
  std::vector<std::string> kernel_globs;
  std::vector<std::string> plugins;  // --plugin, as `run`
  std::string filter;
  std::string device_model;  // empty: the GPU present, else kDefaultDeviceModel
  bool check_only = false;
  int repetitions = 0;          // 0: the suite's, else the default (as `run`)
  double max_case_seconds = 0;  // 0: the suite's, else the default
  bool measure_energy = false;
  bool json = false;
};

int plan_command(const PlanOptions& options, std::ostream& out, std::ostream& err);

}  // namespace attnbench
