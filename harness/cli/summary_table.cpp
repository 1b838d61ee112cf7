#include "harness/cli/summary_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "harness/core/progress.h"

namespace attnbench {
namespace {

std::string shape_key(const ResultRecord& r) {
  return shape_string(r.problem) + (r.distribution == "normal" ? "" : " dist=" + r.distribution);
}

std::string scientific(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "-" : "inf";
  char text[16];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

// A result's message under its row: every line indented, control characters (a terminal would
// act on them) shown as spaces.
std::string indented_message(const std::string& message) {
  std::string text = "    ";
  for (size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    if (c == '\r' && i + 1 < message.size() && message[i + 1] == '\n') continue;
    if (c == '\n' || c == '\r') {
      text += "\n    ";
    } else {
      text += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;
    }
  }
  return text + "\n";
}

}  // namespace

std::string status_counts(const std::vector<ResultRecord>& results) {
  std::map<std::string, int> counts;
  for (const ResultRecord& r : results) ++counts[std::string(result_status_name(r.status))];
  std::string text;
  for (const char* name : {"passed", "failed", "skipped", "crashed", "timeout", "error"}) {
    if (counts.count(name))
      text += (text.empty() ? "" : ", ") + std::to_string(counts[name]) + " " + name;
  }
  return text.empty() ? "no results" : text;
}

void print_summary_table(const std::vector<ResultRecord>& results, std::ostream& out) {
  // Fastest median per (device, shape), for the "vs best" column.
  std::map<std::string, double> fastest;
  for (const ResultRecord& r : results) {
    if (!r.timing.timed) continue;
    const std::string key = r.device_name + "|" + shape_key(r);
    auto it = fastest.find(key);
    if (it == fastest.end() || r.timing.median_s < it->second) fastest[key] = r.timing.median_s;
  }
  size_t kernel_width = 6, shape_width = 5;
  for (const ResultRecord& r : results) {
    kernel_width = std::max(kernel_width, r.kernel.size());
    shape_width = std::max(shape_width, shape_key(r).size());
  }
  char line[1024];
  const int kw = static_cast<int>(kernel_width), sw = static_cast<int>(shape_width);
  std::snprintf(line, sizeof line, "%-*s  %-*s  %-7s  %-17s  %12s  %15s  %8s\n", kw, "kernel", sw,
                "shape", "status", "error / bound", "median", "throughput", "vs best");
  out << line;
  out << std::string(kernel_width + shape_width + 7 + 17 + 12 + 15 + 8 + 12, '-') << "\n";
  for (const ResultRecord& r : results) {
    std::string error = r.check.checked
                            ? scientific(r.check.max_abs_error) + " / " + scientific(r.check.bound)
                            : "-";
    std::string ratio = "-";
    if (r.timing.timed) {
      const double best = fastest[r.device_name + "|" + shape_key(r)];
      char text[16];
      std::snprintf(text, sizeof text, "%.2fx", r.timing.median_s / best);
      ratio = text;
    }
    std::snprintf(line, sizeof line, "%-*s  %-*s  %-7s  %-17s  %12s  %15s  %8s\n", kw,
                  r.kernel.c_str(), sw, shape_key(r).c_str(),
                  std::string(result_status_name(r.status)).c_str(), error.c_str(),
                  r.timing.timed ? format_seconds(r.timing.median_s).c_str() : "-",
                  format_throughput(r.flops_per_s).c_str(), ratio.c_str());
    out << line;
    if (!r.message.empty() && r.status != ResultStatus::passed) out << indented_message(r.message);
  }
  out << status_counts(results) << "\n";
}

}  // namespace attnbench
