#include "harness/core/progress.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace attnbench {

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  char text[32];
  if (seconds < 1e-3)
    std::snprintf(text, sizeof text, "%.2f us", seconds * 1e6);
  else if (seconds < 1)
    std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

std::string format_duration(double seconds) {
  const long total = std::lround(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, (total / 60) % 60,
                  total % 60);
  else
    std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
  return text;
}

std::string format_throughput(double flops_per_s) {
  if (!std::isfinite(flops_per_s)) return "-";
  char text[32];
  if (flops_per_s >= 1e12)
    std::snprintf(text, sizeof text, "%.1f TFLOP/s", flops_per_s / 1e12);
  else
    std::snprintf(text, sizeof text, "%.2f GFLOP/s", flops_per_s / 1e9);
  return text;
}

std::string format_bytes(double bytes) {
  char text[32];
  if (bytes >= double(1 << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(1 << 30));
  else if (bytes >= double(1 << 20))
    std::snprintf(text, sizeof text, "%.2f MiB", bytes / double(1 << 20));
  else if (bytes >= 1024)
    std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024);
  else
    std::snprintf(text, sizeof text, "%.0f B", bytes);
  return text;
}

Progress::Progress(int total, std::ostream& out, bool interactive)
    : total_(total),
      out_(out),
      interactive_(interactive),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::counter() const {
  const int width = static_cast<int>(std::to_string(total_).size());
  char text[48];
  std::snprintf(text, sizeof text, "[%*d/%d]", width, done_ + 1, total_);
  return text;
}

std::string Progress::timing() const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string text = "elapsed " + format_duration(elapsed);
  if (done_ > 0 && done_ < total_)
    text += ", ETA " + format_duration(elapsed / done_ * (total_ - done_));
  return text;
}

void Progress::start_case(const std::string& label) {
  if (!interactive_) return;
  out_ << "\r\033[K" << counter() << " " << label << " ... (" << timing() << ")" << std::flush;
}

void Progress::finish_case(const std::string& label, const ResultRecord& result) {
  std::ostringstream line;
  line << counter() << " " << label << "  " << result_status_name(result.status);
  if (result.timing.timed) {
    line << "  " << format_seconds(result.timing.median_s) << "  "
         << format_throughput(result.flops_per_s);
  }
  if (!result.message.empty() && result.status != ResultStatus::passed)
    line << "  (" << result.message << ")";
  ++done_;
  line << "  | " << timing();
  if (interactive_) out_ << "\r\033[K";
  out_ << line.str() << "\n" << std::flush;
}

}  // namespace attnbench
