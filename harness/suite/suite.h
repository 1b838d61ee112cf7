// Suite files (TOML, in suites/): which kernels x which problems. Data, no code.
//
//   name = "smoke"
//   description = "CPU-sized: every CPU kernel x every mask x every dtype"
//   repetitions = 5            # optional: timed repetitions per case
//   max_case_seconds = 2.0     # optional: time cap per case (check + timing)
//   energy = true              # optional: energy per forward (a >= 1 s loop per case, GPU)
//   interleave_gpus = true     # optional: time a problem's kernels round-robin on GPUs too
//   detect_target = 5          # optional: the slowdown (%) the gate should see within three
//                              # nightlies; the gate names the kernels it cannot (default 5)
//
//   [[matrix]]                 # one block = the cartesian product of its axes
//   kernels = ["cpu.*"]        # globs over registry names
//   batch = 2                  # or tokens = 16384 (batch = tokens / seqlen_k, at least 1)
//   heads_q = 8
//   heads_kv = [8, 2]          # or gqa = [1, 4, 8] (heads_kv = heads_q / gqa)
//   seqlen = [128, 257]        # sets seqlen_q and seqlen_k; or seqlen_q / seqlen_k
//   head_dim = 64              # sets head_dim_qk and head_dim_v; or each on its own
//   dtype = ["fp32", "bf16"]   # out_dtype, p_dtype, fp8_scaling optional
//   mask = ["none", "causal", "causal_br", "window(64,0)", "padding"]
//   layout = "bshd"
//   distribution = ["normal", "large_logits", "outliers", "sink"]
//   scale = 0.125              # optional; default 1/sqrt(head_dim_qk)
//   passes = ["fwd", "bwd"]    # fwd (default), bwd, fwd_bwd: the step each case times
//   dout = ["normal", "small"] # the backward's dO: normal (default), small, outliers
//
// Every axis takes a value or an array of values. Errors name file:line and the field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "reference/problem.h"
#include "reference/status.h"

namespace attnbench {

struct SuiteEntry {
  std::vector<std::string> kernel_globs;
  Problem problem;
  std::string distribution = "normal";
  int line = 0;  // [[matrix]] block it came from
};

struct Suite {
  std::string name;
  std::string description;
  std::string path;                 // the file it was read from
  int repetitions = 0;              // 0 = the harness's default
  double max_case_seconds = 0;      // 0 = the harness's default
  bool measure_energy = false;      // energy per forward from a >= 1 s hot loop (GPU), per case
  bool interleave_gpus = false;     // a problem's kernels timed round-robin on GPUs too
  double detect_target = 0;         // relative; 0 = the analysis's default (DetectorOptions)
  std::vector<SuiteEntry> entries;  // expanded, in file order, duplicates removed
};

// Input distributions of DESIGN: normal, large_logits, outliers.
const std::vector<std::string>& distribution_names();

// `source` names the text in error messages ("suites/smoke.toml").
Result<Suite> parse_suite(std::string_view text, const std::string& source);
// NAME (looked up in the suites directory) or a path to a .toml file.
Result<Suite> load_suite(const std::string& name_or_path);
// The suites directory: $ATTNBENCH_SUITES_DIR, else the source tree's suites/ (compiled in).
std::string suites_directory();
// Name and description of every suite in the suites directory, sorted by name.
std::vector<std::pair<std::string, std::string>> list_suites();

}  // namespace attnbench
