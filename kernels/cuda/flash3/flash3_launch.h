// The launch functions of cuda.flash3's stages, one explicit instantiation per (stage, head dim,
// dtype) in its own translation unit (flash3_<stage>_hdim<D>_<dtype>.cu). Host code (the plan in
// flash3.cpp) includes this header without any device code.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/flash3/flash3_probe.h"
#include "kernels/cuda/flash3/flash3_time_model.h"
#include "kernels/kernel.h"
#include "kernels/params.h"
#include "reference/status.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

// How a kernel's grid covers its blocks (query block, query head, batch): one CTA per block, or a
// persistent grid of one CTA per SM where there are more blocks, each CTA running its share in
// turn (flash3_scheduler.cuh), so that a block's first K and Q load while the previous block's
// output is stored and no CTA pays a launch and a prologue per block.
enum class Grid { one_cta_per_block, persistent };
inline int64_t grid_ctas(int64_t blocks, Grid grid, int sm_count) {
  return grid == Grid::persistent ? std::min<int64_t>(blocks, sm_count) : blocks;
}

// What a flash3 kernel takes: the problem's params and the TMA maps of Q, K, V and the output,
// each a 4D view (d, sequence, head, batch) of its tensor with boxes of 64 elements x kBlockQ (Q),
// kBlockK (K, V) or 64 (the output: one consumer warpgroup's rows) rows and the 128-byte
// swizzle (out_map only where stores_output_with_tma). Passed as a __grid_constant__ parameter,
// as cp.async.bulk.tensor needs its map in parameter, constant or global memory.
struct Flash3Params {
  AttentionParams attention;
  CUtensorMap q_map;
  CUtensorMap k_map;
  CUtensorMap v_map;
  CUtensorMap out_map;
  // cuda.flash3[probe=clock64]: one ProbeRecord per consumer warpgroup (flash3_probe.h), two per
  // CTA; null for every other kernel.
  ProbeRecord* probe;
  // The device's SMs, read when the plan is built: a persistent grid's size (host side only).
  int sm_count;
};

// One forward on `stream` with maps already encoded (flash3.cpp).
using LaunchFunction = Status (*)(const Flash3Params&, cudaStream_t);

template <int HeadDim, DType kDtype>
Status launch_flash3_wg1(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_wg1<128, DType::bf16>(const Flash3Params&, cudaStream_t);
template <int HeadDim, DType kDtype>
Status launch_flash3_ws(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_ws<128, DType::bf16>(const Flash3Params&, cudaStream_t);
template <int HeadDim, DType kDtype>
Status launch_flash3_pingpong(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_pingpong<128, DType::bf16>(const Flash3Params&, cudaStream_t);
// cuda.flash3 at head dims (HeadDim, HeadDimV): d_qk and d_v, equal except DeepSeek's 192/128.
template <int HeadDim, DType kDtype, int HeadDimV = HeadDim>
Status launch_flash3(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3<64, DType::f16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<64, DType::bf16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<80, DType::f16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<80, DType::bf16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<96, DType::f16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<96, DType::bf16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<128, DType::f16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<128, DType::bf16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<192, DType::f16, 128>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<192, DType::bf16, 128>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<256, DType::f16>(const Flash3Params&, cudaStream_t);
extern template Status launch_flash3<256, DType::bf16>(const Flash3Params&, cudaStream_t);
// cuda.flash3's variants: its K and V rings of kStages stages ...
template <int HeadDim, DType kDtype, int kStages>
Status launch_flash3_stages(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_stages<128, DType::bf16, 2>(const Flash3Params&, cudaStream_t);
// ... key tiles of kBlockK keys (block_n=176); O rescaled after the P V wait (rescale=after_pv);
// no turns between the consumers (pingpong=off); its waits timed by clock64 (probe=clock64).
template <int HeadDim, DType kDtype, int kBlockK>
Status launch_flash3_block_k(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_block_k<128, DType::bf16, 176>(const Flash3Params&,
                                                                    cudaStream_t);
template <int HeadDim, DType kDtype>
Status launch_flash3_rescale_after_pv(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_rescale_after_pv<128, DType::bf16>(const Flash3Params&,
                                                                        cudaStream_t);
template <int HeadDim, DType kDtype>
Status launch_flash3_without_turns(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_without_turns<128, DType::bf16>(const Flash3Params&,
                                                                     cudaStream_t);
template <int HeadDim, DType kDtype>
Status launch_flash3_clock_probe(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_clock_probe<128, DType::bf16>(const Flash3Params&,
                                                                   cudaStream_t);
// ... and a persistent grid, one CTA per SM (persistent=on).
template <int HeadDim, DType kDtype>
Status launch_flash3_persistent(const Flash3Params& params, cudaStream_t stream);
extern template Status launch_flash3_persistent<128, DType::bf16>(const Flash3Params&,
                                                                  cudaStream_t);

// One compiled (head dims, dtype) of a stage, as the plan dispatches to it: its tile rows (for the
// maps' boxes) and shared memory.
struct Instantiation {
  int64_t head_dim;
  int64_t head_dim_v;
  DType dtype;
  LaunchFunction launch;
  size_t shared_bytes;
  int block_q;
  int block_k;
  bool clock_probe = false;  // its launches write ProbeRecords (cuda.flash3[probe=clock64])
  Grid grid = Grid::one_cta_per_block;
};

// The gate every flash3 plan passes when built: an sm_90 device (the kernels are sm_90a code)
// offering `shared_bytes` of shared memory per block; `name` names the kernel in the refusal.
Status check_hopper_device(int device, size_t shared_bytes, const std::string& name);

// What every flash3 kernel's support table holds beside its dtypes and head dims: every mask and
// layout, GQA, head_dim_v == head_dim_qk, sm_90.
SupportTable flash3_common_support();

// The Kernel entry of a flash3 stage over `instantiations`, timed by the stage's time model.
Kernel flash3_kernel_entry(std::string name, std::string summary, Stage stage,
                           std::vector<Instantiation> instantiations);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
