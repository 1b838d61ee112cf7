// Minimal .npy writer (format version 1.0, little-endian, C order): what a failing case dumps
// so it can be opened with numpy.load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/status.h"

namespace attnbench {

Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data);
Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const double* data);
Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const int64_t* data);

}  // namespace attnbench
