// `attnbench export`: a stored run as Google Benchmark JSON (for its tools/compare.py) or CSV.
#include "harness/cli/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/analysis/alert_wording.h"
#include "harness/cli/ci_reports.h"
#include "harness/cli/command_support.h"
#include "harness/cli/runner.h"
#include "harness/core/progress.h"
#include "harness/core/series_key.h"
#include "harness/core/statistics.h"
#include "harness/measure/devices.h"
#include "harness/measure/timing.h"
#include "harness/suite/case_matrix.h"

namespace attnbench {

int export_command(const std::string& db_path, const std::string& run_text,
                   const std::string& format, const std::string& output, std::ostream& out,
                   std::ostream& err) {
  if (format != "gbench-json" && format != "csv") {
    err << "error: export --format '" << format << "': accepted: gbench-json, csv\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const std::optional<int64_t> run_id = resolve_run(*store, run_text, "export --run", err);
  if (!run_id) return kExitUsage;
  const Result<StoredRun> run = store->load_run(*run_id);
  if (!run) {
    err << "error: " << run.status().message << "\n";
    return kExitUsage;
  }
  std::ostringstream text;
  if (format == "gbench-json") {
    // The benchmark names are the runner's case names, kernel/shape/distribution.
    std::vector<benchmark::BenchmarkReporter::Run> runs;
    for (size_t i = 0; i < run->results.size(); ++i) {
      const ResultRecord& r = run->results[i];
      const std::string name = r.kernel + "/" + shape_string(r.problem) + "/" + r.distribution;
      auto repetitions = gbench_runs_from_samples(name, static_cast<int64_t>(i), r.samples);
      // The iteration count is chosen per run to fill the repetition time; left in the name,
      // it would keep tools/compare.py from matching the same case across two runs.
      for (benchmark::BenchmarkReporter::Run& repetition : repetitions) {
        repetition.run_name.iterations.clear();
      }
      runs.insert(runs.end(), repetitions.begin(), repetitions.end());
    }
    write_gbench_json(text, runs);
  } else {
    auto csv = [](const std::string& field) {
      if (field.find_first_of(",\"\n") == std::string::npos) return field;
      std::string quoted = "\"";
      for (char c : field) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      return quoted + "\"";
    };
    auto number = [](double v) {
      if (!std::isfinite(v)) return std::string();
      std::ostringstream digits;
      digits.precision(9);
      digits << v;
      return digits.str();
    };
    text << "run_id,kernel,shape,distribution,device,status,repetitions,median_s,mean_s,min_s,"
            "max_s,stddev_s,cv,flops_per_s,bytes_per_s,max_abs_error,bound,series_key\n";
    for (const ResultRecord& r : run->results) {
      text << *run_id << "," << csv(r.kernel) << "," << csv(shape_string(r.problem)) << ","
           << csv(r.distribution) << "," << csv(r.device_name) << "," << result_status_name(r.status)
           << "," << r.timing.repetitions << "," << number(r.timing.median_s) << ","
           << number(r.timing.mean_s) << "," << number(r.timing.min_s) << ","
           << number(r.timing.max_s) << "," << number(r.timing.stddev_s) << ","
           << number(r.timing.cv) << "," << number(r.flops_per_s) << "," << number(r.bytes_per_s)
           << "," << number(r.check.max_abs_error) << "," << number(r.check.bound) << ","
           << csv(r.series_key) << "\n";
    }
  }
  if (output.empty() || output == "-") {
    out << text.str();
    return kExitClean;
  }
  if (Status written = write_text_file(output, text.str()); !written) {
    err << "error: export: " << written.message << "\n";
    return kExitUsage;
  }
  err << "exported run " << *run_id << " (" << run->results.size() << " results) as " << format
      << " to " << output << "\n";
  return kExitClean;
}

}  // namespace attnbench
