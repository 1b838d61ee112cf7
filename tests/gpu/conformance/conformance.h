// The hardware conformance test's two sides (issue 14, item 7): the same conformance kernels
// (conformance_kernels.cuh) run on the GPU (conformance_device.cu) and on the emulated device
// (conformance_emu.cpp). Host vectors in, host vectors out; each returns an error text, empty
// when it ran.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnbench::conformance {

struct MmaCases {
  int cases = 0;
  std::vector<uint32_t> a;  // (cases, 32 lanes, 4)
  std::vector<uint32_t> b;  // (cases, 32 lanes, 2)
  std::vector<float> c;     // (cases, 32 lanes, 4)
};

struct Side {
  std::string (*mma)(bool bf16, const MmaCases& cases, std::vector<float>& d);
  std::string (*ex2)(const std::vector<float>& x, std::vector<float>& y);
  std::string (*pack)(bool bf16, const std::vector<float>& x, std::vector<uint32_t>& packed);
  std::string (*ldmatrix)(int form, const std::vector<uint16_t>& tiles,
                          const std::vector<uint32_t>& rows, std::vector<uint32_t>& out);
};

Side device_side();    // the GPU (CUDA builds only)
Side emulated_side();  // kernels/emu/

}  // namespace attnbench::conformance
