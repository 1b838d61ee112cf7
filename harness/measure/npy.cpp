#include "harness/measure/npy.h"

#include <fstream>
#include <numeric>

namespace attnbench {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// Header length (magic + version + length field + dict + newline) is padded to a multiple of
// 64 bytes, as numpy itself writes it.
constexpr size_t kHeaderAlignment = 64;
constexpr size_t kPreambleBytes = kMagicBytes + 2 + 2;

Status write_array(const std::string& path, const std::vector<int64_t>& shape, const char* descr,
                   const void* data, size_t element_bytes) {
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]);
    shape_text += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) shape_text += " ";
  }
  shape_text += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  const size_t unpadded = kPreambleBytes + header.size() + 1;
  header.append((kHeaderAlignment - unpadded % kHeaderAlignment) % kHeaderAlignment, ' ');
  header += '\n';

  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::Error("cannot write '" + path + "'");
  out.write(kMagic, kMagicBytes);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const uint16_t header_length = static_cast<uint16_t>(header.size());
  const char length_bytes[2] = {static_cast<char>(header_length & 0xFF),
                                static_cast<char>(header_length >> 8)};
  out.write(length_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  const int64_t count =
      std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  out.write(static_cast<const char*>(data),
            static_cast<std::streamsize>(count * static_cast<int64_t>(element_bytes)));
  return out ? Status::Ok() : Status::Error("error writing '" + path + "'");
}

}  // namespace

Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  return write_array(path, shape, "<f4", data, sizeof(float));
}
Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const double* data) {
  return write_array(path, shape, "<f8", data, sizeof(double));
}
Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const int64_t* data) {
  return write_array(path, shape, "<i8", data, sizeof(int64_t));
}

}  // namespace attnbench
