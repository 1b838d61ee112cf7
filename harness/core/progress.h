// Progress for long work: cases done / total, the current case, elapsed time and ETA. On a
// terminal the current case shows while it runs; in a CI log each finished case is one line.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include "harness/core/records.h"

namespace attnbench {

class Progress {
 public:
  Progress(int total, std::ostream& out, bool interactive);
  void start_case(const std::string& label);
  void finish_case(const std::string& label, const ResultRecord& result);
  int done() const { return done_; }

 private:
  std::string counter() const;
  std::string timing() const;
  int total_;
  int done_ = 0;
  std::ostream& out_;
  bool interactive_;
  std::chrono::steady_clock::time_point start_;
};

std::string format_seconds(double seconds);         // "0.123 ms", "1.20 s"
std::string format_duration(double seconds);        // "1:05", "1:02:03"
std::string format_throughput(double flops_per_s);  // "12.3 GFLOP/s", "312 TFLOP/s"
std::string format_bytes(double bytes);             // "1.5 MiB"

}  // namespace attnbench
