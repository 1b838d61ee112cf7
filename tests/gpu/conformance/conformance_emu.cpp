// The conformance kernels on the emulated device, on host memory.
#include "tests/gpu/conformance/conformance.h"
#include "tests/gpu/conformance/conformance_kernels.cuh"

namespace attnbench::conformance {
namespace {

constexpr unsigned kBlocks = 64;
constexpr unsigned kThreads = 256;

std::string last_error() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

std::string mma(bool bf16, const MmaCases& cases, std::vector<float>& d) {
  emu::Stream stream;
  d.assign(cases.c.size(), 0.0f);
  if (bf16) {
    launch_kernel(mma_kernel<__nv_bfloat16>, kBlocks, kLanes, 0, &stream, cases.a.data(),
                  cases.b.data(), cases.c.data(), d.data(), cases.cases);
  } else {
    launch_kernel(mma_kernel<__half>, kBlocks, kLanes, 0, &stream, cases.a.data(), cases.b.data(),
                  cases.c.data(), d.data(), cases.cases);
  }
  return last_error();
}

std::string ex2(const std::vector<float>& x, std::vector<float>& y) {
  emu::Stream stream;
  y.assign(x.size(), 0.0f);
  launch_kernel(ex2_kernel, kBlocks, kThreads, 0, &stream, x.data(), y.data(),
                static_cast<int>(x.size()));
  return last_error();
}

std::string pack(bool bf16, const std::vector<float>& x, std::vector<uint32_t>& packed) {
  emu::Stream stream;
  const int pairs = static_cast<int>(x.size() / 2);
  packed.assign(static_cast<size_t>(pairs), 0);
  if (bf16) {
    launch_kernel(pack_kernel<true>, kBlocks, kThreads, 0, &stream, x.data(), packed.data(), pairs);
  } else {
    launch_kernel(pack_kernel<false>, kBlocks, kThreads, 0, &stream, x.data(), packed.data(),
                  pairs);
  }
  return last_error();
}

std::string pack_e4m3(const std::vector<float>& x, std::vector<uint32_t>& packed) {
  emu::Stream stream;
  const int quads = static_cast<int>(x.size() / 4);
  packed.assign(static_cast<size_t>(quads), 0);
  launch_kernel(pack_e4m3_kernel, kBlocks, kThreads, 0, &stream, x.data(), packed.data(), quads);
  return last_error();
}

std::string ldmatrix(int form, const std::vector<uint16_t>& tiles,
                     const std::vector<uint32_t>& rows, std::vector<uint32_t>& out) {
  emu::Stream stream;
  const int cases = static_cast<int>(rows.size() / kLanes);
  out.assign(rows.size() * 4, 0);
  launch_kernel(ldmatrix_kernel, kBlocks, kLanes, kTileRows * 16, &stream, tiles.data(),
                rows.data(), out.data(), form, cases);
  return last_error();
}

std::string wgmma(const WgmmaCases& cases, std::vector<float>& d) {
  emu::Stream stream;
  d.assign(cases.c.size(), 0.0f);
  with_wgmma_kernel(cases.form, [&](auto kernel) {
    launch_kernel(kernel, kBlocks, kWgmmaThreads, wgmma_shared_bytes(cases), &stream,
                  cases.images.data(), cases.image_elements, cases.layouts.data(), cases.a.data(),
                  cases.c.data(), d.data(), cases.cases);
  });
  return last_error();
}

std::string tma(const TmaCases& cases, std::vector<uint16_t>& boxes, std::vector<uint32_t>& elected,
                std::vector<uint16_t>& stored) {
  stored = cases.output;
  std::vector<CUtensorMap> maps;
  if (std::string error = encode_case_maps(cases, cases.tensor.data(), stored.data(), maps);
      !error.empty()) {
    return error;
  }
  emu::Stream stream;
  boxes.assign(cases.cases.size() * (kTmaMaxBoxBytes / 2), 0);
  elected.assign(cases.cases.size(), 0);
  for (size_t k = 0; k < cases.cases.size(); ++k) {
    launch_kernel(tma_kernel, 1, kWgmmaThreads, kTmaSharedBytes, &stream, maps[2 * k],
                  maps[2 * k + 1], cases.cases[k], true, boxes.data() + k * (kTmaMaxBoxBytes / 2),
                  elected.data() + k);
  }
  return last_error();
}

std::string atomic_add(const std::vector<float>& values, std::vector<float>& global_sums,
                       std::vector<float>& shared_sums) {
  emu::Stream stream;
  global_sums.assign(kAtomicSlots, 0.0f);
  shared_sums.assign(kAtomicSlots, 0.0f);
  launch_kernel(atomic_add_kernel, 1, kThreads, 0, &stream, values.data(),
                static_cast<int>(values.size()), global_sums.data(), shared_sums.data());
  return last_error();
}

}  // namespace

Side emulated_side() {
  return {&mma, &ex2, &pack, &pack_e4m3, &ldmatrix, &wgmma, &tma, &atomic_add};
}

}  // namespace attnbench::conformance
