// The conformance kernels: each runs one wrapper of kernels/cuda/common/ptx.cuh over many test
// vectors. One source for both sides: nvcc compiles it with the wrappers' device bodies
// (conformance_device.cu), the host compiler with their emulated bodies (conformance_emu.cpp,
// ATTNBENCH_EMU), so the test compares the instruction and nothing else.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/tma_map.h"
#include "kernels/cuda/common/wgmma_descriptor.h"
#include "tests/gpu/conformance/conformance.h"

namespace attnbench::conformance {
inline namespace ATTNBENCH_TARGET {

constexpr int kLanes = 32;
constexpr int kTileRows = 32;  // ldmatrix: 4 matrices x 8 rows of 16 bytes

// One warp per block, looping over cases: case k, lane l reads a[(32 k + l) * 4 + i], b[.. * 2 +
// i], c[.. * 4 + i] and writes D where C was read from.
template <typename Element>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d,
                           int cases) {
  const int lane = static_cast<int>(threadIdx.x);
  for (int k = static_cast<int>(blockIdx.x); k < cases; k += static_cast<int>(gridDim.x)) {
    const int at = k * kLanes + lane;
    const uint32_t fragment[4] = {a[4 * at], a[4 * at + 1], a[4 * at + 2], a[4 * at + 3]};
    float acc[4] = {c[4 * at], c[4 * at + 1], c[4 * at + 2], c[4 * at + 3]};
    ptx::mma_16x8x16<Element>(acc, fragment, b[2 * at], b[2 * at + 1]);
    for (int i = 0; i < 4; ++i) d[4 * at + i] = acc[i];
  }
}

__global__ void ex2_kernel(const float* x, float* y, int n) {
  const int stride = static_cast<int>(blockDim.x * gridDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride) {
    y[i] = ptx::exp2_approx(x[i]);
  }
}

// atomicAdd on fp32 into global and into shared memory, one block: element i of `values` goes to
// slot i % kAtomicSlots of each (global_sums zeroed by the caller); the shared sums are copied
// out. atom.add.f32 flushes subnormals on global memory and keeps them on shared memory.
__global__ void atomic_add_kernel(const float* values, int n, float* global_sums,
                                  float* shared_sums) {
  using Slots = float[kAtomicSlots];
  ATTNBENCH_SHARED(Slots, slots, 16);
  const int t = static_cast<int>(threadIdx.x);
  if (t < kAtomicSlots) slots[t] = 0.0f;
  __syncthreads();
  for (int i = t; i < n; i += static_cast<int>(blockDim.x)) {
    atomicAdd(&global_sums[i % kAtomicSlots], values[i]);
    atomicAdd(&slots[i % kAtomicSlots], values[i]);
  }
  __syncthreads();
  if (t < kAtomicSlots) shared_sums[t] = slots[t];
}

// ptx::pack_e4m3x4 of x[4i .. 4i + 3]: P's e4m3 A fragment in cuda.flash3_fp8. sm_90a only, as
// wgmma_kernel (the e4m3 cvt needs sm_89; the sm_80 build holds an empty body).
__global__ void pack_e4m3_kernel(const float* x, uint32_t* packed, int quads) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int stride = static_cast<int>(blockDim.x * gridDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < quads; i += stride) {
    packed[i] = ptx::pack_e4m3x4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]);
  }
#endif
}

// __floats2half2_rn / __floats2bfloat162_rn of (x[2i], x[2i + 1]), as the packed 32 bits.
template <bool kBf16>
__global__ void pack_kernel(const float* x, uint32_t* packed, int pairs) {
  const int stride = static_cast<int>(blockDim.x * gridDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < pairs; i += stride) {
    uint32_t bits;
    if constexpr (kBf16) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
      memcpy(&bits, &pair, sizeof bits);
    } else {
      const __half2 pair = __floats2half2_rn(x[2 * i], x[2 * i + 1]);
      memcpy(&bits, &pair, sizeof bits);
    }
    packed[i] = bits;
  }
}

// Case k: a 512-byte tile (tiles + 256 k, b16), lane l gives the address of row rows[32 k + l];
// the fragments land in out[(32 k + l) * 4 + i]. `form`: 0-2 x1/x2/x4, 3-5 the same .trans.
__global__ void ldmatrix_kernel(const uint16_t* tiles, const uint32_t* rows, uint32_t* out,
                                int form, int cases) {
  ATTNBENCH_DYNAMIC_SHARED(shared, 16);
  auto* tile = reinterpret_cast<uint16_t*>(shared);
  const int lane = static_cast<int>(threadIdx.x);
  for (int k = static_cast<int>(blockIdx.x); k < cases; k += static_cast<int>(gridDim.x)) {
    for (int i = lane; i < kTileRows * 8; i += kLanes) tile[i] = tiles[k * kTileRows * 8 + i];
    __syncwarp();
    const uint32_t address = ptx::shared_address(tile + rows[k * kLanes + lane] * 8);
    uint32_t fragment[4] = {0, 0, 0, 0};
    switch (form) {
      case 0:
        ptx::load_matrix_x1(reinterpret_cast<uint32_t(&)[1]>(fragment), address);
        break;
      case 1:
        ptx::load_matrix_x2(reinterpret_cast<uint32_t(&)[2]>(fragment), address);
        break;
      case 2:
        ptx::load_matrix_x4(fragment, address);
        break;
      case 3:
        ptx::load_matrix_x1_transposed(reinterpret_cast<uint32_t(&)[1]>(fragment), address);
        break;
      case 4:
        ptx::load_matrix_x2_transposed(reinterpret_cast<uint32_t(&)[2]>(fragment), address);
        break;
      default:
        ptx::load_matrix_x4_transposed(fragment, address);
        break;
    }
    for (int i = 0; i < 4; ++i) out[(k * kLanes + lane) * 4 + i] = fragment[i];
    __syncwarp();
  }
}

// One warpgroup per block, looping over cases: case k's image is copied into shared memory
// (1024-aligned, so each swizzle pattern starts where its period does), published to the async
// proxy, and D = A B + C computed by one wgmma of the form's shape; thread t writes its n / 2
// accumulators where C was read from. sm_90a only (the sm_80 build of this test holds an empty
// body: wgmma has no sm_80 form).
template <int kN, typename Element, bool kNMajorB, bool kARegisters>
__global__ void wgmma_kernel(const uint16_t* images, int image_elements, const uint32_t* layouts,
                             const uint32_t* a, const float* c, float* d, int cases) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  ATTNBENCH_DYNAMIC_SHARED(shared, 16);
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(shared) + 1023) & ~uintptr_t{1023};
  auto* image = reinterpret_cast<uint16_t*>(aligned);
  const uint32_t base = ptx::shared_address(image);
  const int t = static_cast<int>(threadIdx.x);
  for (int k = static_cast<int>(blockIdx.x); k < cases; k += static_cast<int>(gridDim.x)) {
    for (int i = t; i < image_elements; i += kWgmmaThreads) {
      image[i] = images[static_cast<int64_t>(k) * image_elements + i];
    }
    ptx::fence_proxy_async();  // this thread's stores, to the tensor cores' proxy
    __syncthreads();
    const uint32_t* layout = layouts + k * kWgmmaLayoutWords;
    const auto descriptor = [&](const uint32_t* fields) {
      return gpu::encode_wgmma_descriptor({base + fields[0], fields[1], fields[2], fields[3], 0});
    };
    float acc[kN / 2];
    const int64_t at = static_cast<int64_t>(k) * kWgmmaThreads + t;
    for (int i = 0; i < kN / 2; ++i) acc[i] = c[at * (kN / 2) + i];
    ptx::wgmma_fence();
    ptx::wgmma_fence_operand(acc);
    if constexpr (kARegisters) {
      const uint32_t fragment[4] = {a[4 * at], a[4 * at + 1], a[4 * at + 2], a[4 * at + 3]};
      ptx::wgmma_rs<kN, Element, kNMajorB>(acc, fragment, descriptor(layout + 4), true);
    } else {
      ptx::wgmma_ss<kN, Element, kNMajorB>(acc, descriptor(layout), descriptor(layout + 4), true);
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(acc);
    for (int i = 0; i < kN / 2; ++i) d[at * (kN / 2) + i] = acc[i];
    __syncthreads();  // every wgmma has read the image before the next case overwrites it
  }
#endif
}

// Calls launch(kernel) with the wgmma_kernel instantiation of `form`.
template <typename Element, bool kNMajorB, bool kARegisters, typename Launch>
void with_wgmma_n(int n, Launch& launch) {
  if (n == 64) {
    launch(wgmma_kernel<64, Element, kNMajorB, kARegisters>);
  } else if (n == 128) {
    launch(wgmma_kernel<128, Element, kNMajorB, kARegisters>);
  } else {
    launch(wgmma_kernel<256, Element, kNMajorB, kARegisters>);
  }
}
template <typename Element, typename Launch>
void with_wgmma_operands(const WgmmaForm& form, Launch& launch) {
  if (form.b_n_major && form.a_registers) with_wgmma_n<Element, true, true>(form.n, launch);
  if (form.b_n_major && !form.a_registers) with_wgmma_n<Element, true, false>(form.n, launch);
  if (!form.b_n_major && form.a_registers) with_wgmma_n<Element, false, true>(form.n, launch);
  if (!form.b_n_major && !form.a_registers) with_wgmma_n<Element, false, false>(form.n, launch);
}
template <typename Launch>
void with_wgmma_kernel(const WgmmaForm& form, Launch&& launch) {
  if (form.input == WgmmaInput::bf16) {
    with_wgmma_operands<__nv_bfloat16>(form, launch);
  } else if (form.input == WgmmaInput::f16) {
    with_wgmma_operands<__half>(form, launch);
  } else if (form.a_registers) {  // e4m3: B K-major only
    with_wgmma_n<ptx::E4m3, false, true>(form.n, launch);
  } else {
    with_wgmma_n<ptx::E4m3, false, false>(form.n, launch);
  }
}

// One case per launch, one block of 128 threads: warp 0's elected lane expects the box's bytes on
// the mbarrier and issues the TMA load through `load_map`; every thread waits for the phase, then
// copies the box's shared-memory image (swizzled as it landed) to `box_out`, with the number of
// lanes elected; thread 0 stores the box back through `store_map` and waits for the store to have
// read it (unless `store_back` is false: the GPU side runs every load alone first, so that a case
// the hardware refuses is named with its direction). The maps are __grid_constant__ parameters, as the kernels pass theirs: a map the TMA
// unit reads from global memory needs a tensormap-proxy fence after it is written (the first GPU
// run, 2026-12-04, stopped on an illegal instruction with the maps in a global array).
// sm_90a only, as wgmma_kernel.
constexpr uint16_t kBoxFill = 0x5a5a;  // shared memory under a box before its load

__global__ void tma_kernel(const __grid_constant__ CUtensorMap load_map,
                           const __grid_constant__ CUtensorMap store_map, const TmaCase c,
                           bool store_back, uint16_t* box_out, uint32_t* elected) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  ATTNBENCH_DYNAMIC_SHARED(shared, 16);
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(shared) + 1023) & ~uintptr_t{1023};
  auto* box = reinterpret_cast<uint16_t*>(aligned);
  ATTNBENCH_SHARED(uint64_t, barrier, 8);
  ATTNBENCH_SHARED(unsigned, lanes_elected, 4);
  const int t = static_cast<int>(threadIdx.x);
  const uint32_t barrier_address = ptx::shared_address(&barrier);
  if (t == 0) {
    ptx::mbarrier_init(barrier_address, 1);
    ptx::fence_mbarrier_init();
    lanes_elected = 0;
  }
  // A fixed pattern under the box on both sides: the image copied out spans whole 128-byte
  // rows, whose bytes past the box no load writes.
  for (int i = t; i < static_cast<int>(kTmaMaxBoxBytes / 2); i += kWgmmaThreads)
    box[i] = kBoxFill;
  ptx::fence_proxy_async();
  __syncthreads();
  if (t < 32 && ptx::elect_one()) {
    atomicAdd(&lanes_elected, 1u);
    const uint32_t destination = ptx::shared_address(box);
    ptx::mbarrier_arrive_expect_tx(barrier_address, c.box_bytes());
    const int32_t* at = c.coordinates;
    if (c.rank == 2) {
      ptx::tma_load_2d(destination, &load_map, barrier_address, at[0], at[1]);
    } else if (c.rank == 3) {
      ptx::tma_load_3d(destination, &load_map, barrier_address, at[0], at[1], at[2]);
    } else {
      ptx::tma_load_4d(destination, &load_map, barrier_address, at[0], at[1], at[2], at[3]);
    }
  }
  ptx::mbarrier_wait(barrier_address, 0);
  // The whole 128-byte rows the box touches: a swizzle moves chunks within its row.
  const int image_elements = static_cast<int>((c.box_bytes() + 127) / 128 * 128 / 2);
  for (int i = t; i < image_elements; i += kWgmmaThreads) box_out[i] = box[i];
  __syncthreads();  // every thread has read the box, and the count
  if (t == 0) *elected = lanes_elected;
  if (t == 0 && store_back) {
    const int32_t* to = c.out_coordinates;
    ptx::tma_store_4d(&store_map, ptx::shared_address(box), to[0], to[1], to[2], to[3]);
    ptx::bulk_commit();
    ptx::bulk_wait_read<0>();
  }
#endif
}

// A map over the packed bf16 `tensor` of `dims` (device memory on the GPU, host memory
// emulated) with case `c`'s box, swizzle and fill.
inline Status encode_case_map(const TmaCase& c, int rank, const int64_t* dims, const void* tensor,
                              CUtensorMap& map) {
  gpu::TensorMapSpec spec;
  spec.element = DType::bf16;
  spec.rank = rank;
  spec.base = tensor;
  int64_t stride = 2;
  for (int d = 0; d < rank; ++d) {
    spec.dims[static_cast<size_t>(d)] = dims[d];
    spec.stride_bytes[static_cast<size_t>(d)] = stride;
    spec.box[static_cast<size_t>(d)] = c.box[d];
    stride *= dims[d];
  }
  spec.swizzle_bytes = c.swizzle_bytes;
  spec.fill_nan = c.fill_nan;
  return gpu::encode_tensor_map(spec, map);
}

// Each case's two maps: its load's over `tensor` (maps[2 k]) and its store's, 4D, over its part
// of `output` (maps[2 k + 1]); or the first case's error.
inline std::string encode_case_maps(const TmaCases& cases, const void* tensor, uint16_t* output,
                                    std::vector<CUtensorMap>& maps) {
  maps.assign(2 * cases.cases.size(), CUtensorMap{});
  for (size_t k = 0; k < cases.cases.size(); ++k) {
    const TmaCase& c = cases.cases[k];
    const Status load = encode_case_map(c, c.rank, c.dims, tensor, maps[2 * k]);
    const Status status =
        !load ? load : encode_case_map(c, 4, c.out_dims, output + c.out_offset, maps[2 * k + 1]);
    if (!status) return "case " + std::to_string(k) + ": " + status.message;
  }
  return "";
}

// The dynamic shared memory of a TMA case: the largest box and the slack to align it to 1024.
constexpr size_t kTmaSharedBytes = kTmaMaxBoxBytes + 1024;

// The dynamic shared memory of a wgmma case: its image and the slack to align it to 1024.
inline size_t wgmma_shared_bytes(const WgmmaCases& cases) {
  return static_cast<size_t>(cases.image_elements) * 2 + 1024;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::conformance
