// The conformance kernels on the GPU: device copies in, one launch, copies out.
#include <string>
#include <vector>

#include "tests/gpu/conformance/conformance.h"
#include "tests/gpu/conformance/conformance_kernels.cuh"

namespace attnbench::conformance {
namespace {

constexpr unsigned kBlocks = 264;  // two per SM of an H200
constexpr unsigned kThreads = 256;

// A device copy of a host vector, freed at scope end.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : bytes_(host.size() * sizeof(T)) {
    if (cudaMalloc(&data_, bytes_ == 0 ? 1 : bytes_) != cudaSuccess) data_ = nullptr;
    if (data_ != nullptr) cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice);
  }
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return data_; }
  void copy_to(std::vector<T>& host) const {
    cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost);
  }

 private:
  T* data_ = nullptr;
  size_t bytes_;
};

std::string finish() {
  cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) error = cudaDeviceSynchronize();
  return error == cudaSuccess
             ? ""
             : std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

std::string mma(bool bf16, const MmaCases& cases, std::vector<float>& d) {
  const DeviceVector<uint32_t> a(cases.a), b(cases.b);
  const DeviceVector<float> c(cases.c);
  DeviceVector<float> out(cases.c);
  if (bf16) {
    launch_kernel(mma_kernel<__nv_bfloat16>, kBlocks, kLanes, 0, nullptr, a.get(), b.get(), c.get(),
                  out.get(), cases.cases);
  } else {
    launch_kernel(mma_kernel<__half>, kBlocks, kLanes, 0, nullptr, a.get(), b.get(), c.get(),
                  out.get(), cases.cases);
  }
  const std::string error = finish();
  d.assign(cases.c.size(), 0.0f);
  out.copy_to(d);
  return error;
}

std::string ex2(const std::vector<float>& x, std::vector<float>& y) {
  const DeviceVector<float> in(x);
  DeviceVector<float> out(x);
  launch_kernel(ex2_kernel, kBlocks, kThreads, 0, nullptr, in.get(), out.get(),
                static_cast<int>(x.size()));
  const std::string error = finish();
  y.assign(x.size(), 0.0f);
  out.copy_to(y);
  return error;
}

std::string pack(bool bf16, const std::vector<float>& x, std::vector<uint32_t>& packed) {
  const int pairs = static_cast<int>(x.size() / 2);
  packed.assign(static_cast<size_t>(pairs), 0);
  const DeviceVector<float> in(x);
  DeviceVector<uint32_t> out(packed);
  if (bf16) {
    launch_kernel(pack_kernel<true>, kBlocks, kThreads, 0, nullptr, in.get(), out.get(), pairs);
  } else {
    launch_kernel(pack_kernel<false>, kBlocks, kThreads, 0, nullptr, in.get(), out.get(), pairs);
  }
  const std::string error = finish();
  out.copy_to(packed);
  return error;
}

std::string pack_e4m3(const std::vector<float>& x, std::vector<uint32_t>& packed) {
  const int quads = static_cast<int>(x.size() / 4);
  packed.assign(static_cast<size_t>(quads), 0);
  const DeviceVector<float> in(x);
  DeviceVector<uint32_t> out(packed);
  launch_kernel(pack_e4m3_kernel, kBlocks, kThreads, 0, nullptr, in.get(), out.get(), quads);
  const std::string error = finish();
  out.copy_to(packed);
  return error;
}

std::string ldmatrix(int form, const std::vector<uint16_t>& tiles,
                     const std::vector<uint32_t>& rows, std::vector<uint32_t>& out) {
  const int cases = static_cast<int>(rows.size() / kLanes);
  out.assign(rows.size() * 4, 0);
  const DeviceVector<uint16_t> in(tiles);
  const DeviceVector<uint32_t> lane_rows(rows);
  DeviceVector<uint32_t> fragments(out);
  launch_kernel(ldmatrix_kernel, kBlocks, kLanes, kTileRows * 16, nullptr, in.get(),
                lane_rows.get(), fragments.get(), form, cases);
  const std::string error = finish();
  fragments.copy_to(out);
  return error;
}

std::string wgmma(const WgmmaCases& cases, std::vector<float>& d) {
  const DeviceVector<uint16_t> images(cases.images);
  const DeviceVector<uint32_t> layouts(cases.layouts), a(cases.a);
  const DeviceVector<float> c(cases.c);
  DeviceVector<float> out(cases.c);
  with_wgmma_kernel(cases.form, [&](auto kernel) {
    launch_kernel(kernel, kBlocks, kWgmmaThreads, wgmma_shared_bytes(cases), nullptr, images.get(),
                  cases.image_elements, layouts.get(), a.get(), c.get(), out.get(), cases.cases);
  });
  const std::string error = finish();
  d.assign(cases.c.size(), 0.0f);
  out.copy_to(d);
  return error;
}

std::string describe_tma_case(int k, const TmaCase& c) {
  auto list = [](const auto* values, int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += (i ? "," : "") + std::to_string(values[i]);
    return "(" + text + ")";
  };
  return "case " + std::to_string(k) + " (rank " + std::to_string(c.rank) + ", dims " +
         list(c.dims, c.rank) + ", box " + list(c.box, c.rank) + ", swizzle " +
         std::to_string(c.swizzle_bytes) + (c.fill_nan ? ", NaN fill" : ", zero fill") +
         ", at " + list(c.coordinates, c.rank) + ", store to " + list(c.out_coordinates, 4) +
         " of " + list(c.out_dims, 4) + ")";
}

std::string tma(const TmaCases& cases, std::vector<uint16_t>& boxes, std::vector<uint32_t>& elected,
                std::vector<uint16_t>& stored) {
  const DeviceVector<uint16_t> tensor(cases.tensor);
  DeviceVector<uint16_t> output(cases.output);
  std::vector<CUtensorMap> maps;
  if (std::string error = encode_case_maps(cases, tensor.get(), output.get(), maps);
      !error.empty()) {
    return error;
  }
  const int count = static_cast<int>(cases.cases.size());
  boxes.assign(cases.cases.size() * (kTmaMaxBoxBytes / 2), 0);
  elected.assign(cases.cases.size(), 0);
  stored.assign(cases.output.size(), 0);
  DeviceVector<uint16_t> out(boxes);
  DeviceVector<uint32_t> lanes(elected);
  // Every load alone, then every load with its store, each case synchronized: an error stops the
  // context, so the first case the hardware refuses is named with what it was doing.
  for (const bool store_back : {false, true}) {
    for (int k = 0; k < count; ++k) {
      launch_kernel(tma_kernel, 1, kWgmmaThreads, kTmaSharedBytes, nullptr, maps[2 * k],
                    maps[2 * k + 1], cases.cases[k], store_back,
                    out.get() + k * (kTmaMaxBoxBytes / 2), lanes.get() + k);
      if (std::string error = finish(); !error.empty()) {
        return describe_tma_case(k, cases.cases[k]) + (store_back ? ", load and store: " : ", load: ") +
               error;
      }
    }
  }
  const std::string error = finish();
  out.copy_to(boxes);
  lanes.copy_to(elected);
  output.copy_to(stored);
  return error;
}

std::string atomic_add(const std::vector<float>& values, std::vector<float>& global_sums,
                       std::vector<float>& shared_sums) {
  const DeviceVector<float> in(values);
  DeviceVector<float> global(std::vector<float>(kAtomicSlots, 0.0f));
  DeviceVector<float> shared(std::vector<float>(kAtomicSlots, 0.0f));
  launch_kernel(atomic_add_kernel, 1, kThreads, 0, nullptr, in.get(),
                static_cast<int>(values.size()), global.get(), shared.get());
  const std::string error = finish();
  global_sums.assign(kAtomicSlots, 0.0f);
  shared_sums.assign(kAtomicSlots, 0.0f);
  global.copy_to(global_sums);
  shared.copy_to(shared_sums);
  return error;
}

}  // namespace

Side device_side() {
  return {&mma, &ex2, &pack, &pack_e4m3, &ldmatrix, &wgmma, &tma, &atomic_add};
}

}  // namespace attnbench::conformance
