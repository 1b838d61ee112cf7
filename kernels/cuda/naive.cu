// cuda.naive — attention in three plain CUDA kernels, the score matrix in device memory.
//
// What it computes, for every (batch, query head) pair:
//   1. scores   S = scale * Q K^T, fp32 accumulation over the head dim, masked keys (the same
//               visible_keys as the reference) written as -inf          (sq x sk fp32)
//   2. softmax  one block per row: max, exp, sum, P = exp(S - max) / sum written over S; the
//               natural-log LSE from the same pass                      (sq x sk fp32)
//   3. output   O = P V, fp32 accumulation over every key, rounded once to the output dtype
// No cuBLAS: both products are shared-memory tiled loops on the CUDA cores (64 x 64 tile per
// block, a 4 x 4 micro-tile per thread). P stays fp32, so the only rounding after the inputs is
// the output's: exactly the precision the checker's low-precision reference models.
// The same scores and output kernels serve the cuda.masked_* variants (masked.cu), which differ
// only in where the mask is applied: launch_scores(mask_keys = false) and a mask step between
// (naive_steps.h). naive_family.cpp chains the steps into plans.
// Against the previous version: cuda.naive_cublas does both products with cuBLAS; this is the
// same algorithm with nothing borrowed.
// Scratch: one (batch, heads_q, seqlen_q, seqlen_k) fp32 matrix (S, then P over it): it grows with
// the square of the sequence length.
// Performance: not yet measured on a GPU.
// Limits: fp16/bf16 in, the same dtype out; any even head dim up to 256, head_dim_v its own
// (element pairs; a tile's columns past the head dim are zeros, never stored); masked scores are
// computed anyway, as eager code does; every row reads every key in the
// output product. A row with no visible key gets P = 0, so O = 0 and LSE -inf.
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/naive_steps.h"
#include "reference/mask.h"

namespace attnbench::gpu::naive_steps {
inline namespace ATTNBENCH_TARGET {
namespace {

// ---- traits -------------------------------------------------------------------------------------

// Matrix-product tiles (scores and output): a kTile x kTile tile of the result per block, its
// 256 threads a 16 x 16 grid, thread (ty, tx) owning rows ty + 16 a and columns tx + 16 c
// (a, c < 4). Each inner step loads 4 + 4 values from shared memory for 16 FMAs; a warp is two
// rows of the thread grid, which the bank layouts below rely on.
constexpr int kTile = 64;
constexpr int kThreadsPerSide = 16;
constexpr int kTileThreads = kThreadsPerSide * kThreadsPerSide;
constexpr int kPerThread = kTile / kThreadsPerSide;
static_assert(kTile % kThreadsPerSide == 0, "each thread owns whole rows and columns of the tile");
static_assert(2 * kThreadsPerSide == kWarpSize, "a warp must be two rows of the thread grid");

// Shared-memory stage depth: the head dim (scores) or the keys (output) pass through the tile in
// chunks of 32, so both operands of a stage take 2 x 64 x 33 x 4 = 17 KB of static shared memory.
constexpr int kChunk = 32;
// One float of padding: a row stride of 33 words puts 16 threads reading 16 rows at one column
// on 16 different banks.
constexpr int kChunkStride = kChunk + 1;
static_assert(kChunk % kHeadDimMultiple == 0 && kTile % kHeadDimMultiple == 0,
              "a pair of head-dim elements lies inside one chunk and one tile");

// Softmax: one block per row. 8 warps keep a 16k-key row at 64 scores per thread and enough
// loads in flight to stream S; the block reduction is one shuffle tree plus 8 shared values.
constexpr int kSoftmaxThreads = 256;
constexpr int kSoftmaxWarps = kSoftmaxThreads / kWarpSize;
static_assert(kSoftmaxThreads % kWarpSize == 0, "the softmax reduction works in whole warps");

constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();  // gridDim.x

// ---- device helpers -----------------------------------------------------------------------------

// Where one (batch, query head) pair's matrices start, and which kv head it reads (GQA/MQA).
// Block indices are decoded in 32 bits (every launch checks its grid fits an int): a 64-bit
// division is a subroutine call that costs a stack frame on sm_90a.
struct PairIndex {
  int batch, head, kv_head;
};
__device__ PairIndex pair_index(const AttentionParams& p, int pair) {
  const int head = pair % p.heads_q;
  return {pair / p.heads_q, head, head / p.heads_per_kv};
}

__device__ int64_t key_length_of(const AttentionParams& p, int64_t batch) {
  return p.key_lengths != nullptr ? p.key_lengths[batch] : p.seqlen_k;
}

// ---- kernels ------------------------------------------------------------------------------------

// Block = (pair, query tile, key tile), key tile fastest. Writes S[pair][row][key] =
// scale * q_row . k_key, or -inf for a masked key when mask_keys is set.
template <typename Element>
__global__ void __launch_bounds__(kTileThreads)
    scores_kernel(const __grid_constant__ AttentionParams p, float* __restrict__ scores,
                  bool mask_keys) {
  using Chunk = float[kTile][kChunkStride];
  ATTNBENCH_SHARED(Chunk, q_chunk, alignof(float));  // (query rows, head-dim chunk)
  ATTNBENCH_SHARED(Chunk, k_chunk, alignof(float));  // (keys, head-dim chunk)

  const int64_t sq = p.seqlen_q;
  const int64_t sk = p.seqlen_k;
  const int key_tiles = static_cast<int>(tile_count(sk, kTile));
  const int query_tiles = static_cast<int>(tile_count(sq, kTile));
  const int block = static_cast<int>(blockIdx.x);
  const int64_t key0 = static_cast<int64_t>(block % key_tiles) * kTile;
  const int64_t row0 = static_cast<int64_t>(block / key_tiles % query_tiles) * kTile;
  const int pair = block / key_tiles / query_tiles;
  const PairIndex at = pair_index(p, pair);
  // (seqlen_q, head_dim_qk) and (seqlen_k, head_dim_qk) of this pair, rows via the row strides.
  const Element* q =
      static_cast<const Element*>(p.q) + at.batch * p.q_batch_stride + at.head * p.q_head_stride;
  const Element* k =
      static_cast<const Element*>(p.k) + at.batch * p.k_batch_stride + at.kv_head * p.k_head_stride;
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerSide;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerSide;

  float acc[kPerThread][kPerThread] = {};
  for (int d0 = 0; d0 < p.head_dim_qk; d0 += kChunk) {
    // Rows past the end and columns past the head dim are zeros: they add nothing, and the
    // rows' scores are computed and never written.
    for (int item = static_cast<int>(threadIdx.x); item < kTile * kChunk / 2;
         item += kTileThreads) {
      const int r = item / (kChunk / 2);
      const int c = (item % (kChunk / 2)) * 2;
      const bool column = d0 + c < p.head_dim_qk;  // the pair's second element too: d is even
      float2 q_pair = {0.0f, 0.0f};
      float2 k_pair = {0.0f, 0.0f};
      if (column && row0 + r < sq) q_pair = load_pair(q + (row0 + r) * p.q_row_stride + d0 + c);
      if (column && key0 + r < sk) k_pair = load_pair(k + (key0 + r) * p.k_row_stride + d0 + c);
      q_chunk[r][c] = q_pair.x;
      q_chunk[r][c + 1] = q_pair.y;
      k_chunk[r][c] = k_pair.x;
      k_chunk[r][c + 1] = k_pair.y;
    }
    __syncthreads();
#pragma unroll 8
    for (int d = 0; d < kChunk; ++d) {
      float q_values[kPerThread];
      float k_values[kPerThread];
#pragma unroll
      for (int a = 0; a < kPerThread; ++a) q_values[a] = q_chunk[ty + kThreadsPerSide * a][d];
#pragma unroll
      for (int c = 0; c < kPerThread; ++c) k_values[c] = k_chunk[tx + kThreadsPerSide * c][d];
#pragma unroll
      for (int a = 0; a < kPerThread; ++a) {
#pragma unroll
        for (int c = 0; c < kPerThread; ++c) acc[a][c] = fmaf(q_values[a], k_values[c], acc[a][c]);
      }
    }
    __syncthreads();
  }

  // The rows' visible keys first, then the stores: one copy of the mask logic per row, not one
  // per stored element after unrolling.
  const int64_t key_length = key_length_of(p, at.batch);
  KeyRange keys[kPerThread];
#pragma unroll
  for (int a = 0; a < kPerThread; ++a) {
    keys[a] = mask_keys ? visible_keys(p.mask, p.window_left, p.window_right,
                                       row0 + ty + kThreadsPerSide * a, sq, sk, key_length)
                        : KeyRange{0, sk};
  }
  float* s = scores + static_cast<int64_t>(pair) * sq * sk;  // (seqlen_q, seqlen_k)
#pragma unroll
  for (int a = 0; a < kPerThread; ++a) {
    const int64_t row = row0 + ty + kThreadsPerSide * a;
    if (row >= sq) continue;
#pragma unroll
    for (int c = 0; c < kPerThread; ++c) {
      const int64_t key = key0 + tx + kThreadsPerSide * c;
      if (key >= sk) continue;
      const bool visible = key >= keys[a].begin && key < keys[a].end;
      s[row * sk + key] = visible ? acc[a][c] * p.scale : kNegInf;
    }
  }
}

// One block per row r = pair * seqlen_q + query. P overwrites S in place: in the second pass each
// element is read and written by the same thread, after the whole block has finished the first.
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_kernel(const __grid_constant__ AttentionParams p, float* scores, bool mask_inside) {
  const int64_t sq = p.seqlen_q;
  const int64_t sk = p.seqlen_k;
  const int row = static_cast<int>(blockIdx.x);
  const int query = row % p.seqlen_q;
  const int batch = row / (p.seqlen_q * p.heads_q);    // fits: the grid has pairs * sq blocks
  float* s = scores + static_cast<int64_t>(row) * sk;  // (seqlen_k,): S in, P out
  // Without mask_inside the masked keys are already -inf in S and the whole row is read.
  const KeyRange keys = mask_inside ? visible_keys(p.mask, p.window_left, p.window_right, query, sq,
                                                   sk, key_length_of(p, batch))
                                    : KeyRange{0, sk};

  RowStats local{kNegInf, 0.0f};
  for (int64_t j = keys.begin + threadIdx.x; j < keys.end; j += blockDim.x) {
    local = add_score(local, s[j]);
  }
  const RowStats stats = block_row_stats<kSoftmaxWarps>(local);
  const bool empty = stats.max == kNegInf;  // no visible key: P = 0, LSE -inf, never NaN
  const float inverse_sum = inverse_row_sum(stats.sum);
  for (int64_t j = threadIdx.x; j < sk; j += blockDim.x) {
    float probability = 0.0f;
    if (!empty && j >= keys.begin && j < keys.end) {
      probability = expf(s[j] - stats.max) * inverse_sum;
    }
    s[j] = probability;
  }
  if (p.lse != nullptr && threadIdx.x == 0) {
    p.lse[row] = row_lse(stats.max, stats.sum);
  }
}

// Block = (pair, query tile, column tile), column tile fastest: out[rows, columns] = P V.
template <typename Element>
__global__ void __launch_bounds__(kTileThreads)
    output_kernel(const __grid_constant__ AttentionParams p,
                  const float* __restrict__ probabilities) {
  using ProbabilityChunk = float[kTile][kChunkStride];
  using ValueChunk = float[kChunk][kTile];
  ATTNBENCH_SHARED(ProbabilityChunk, p_chunk, alignof(float));  // (query rows, key chunk)
  ATTNBENCH_SHARED(ValueChunk, v_chunk, 16);                    // (key chunk, output columns)

  const int64_t sq = p.seqlen_q;
  const int64_t sk = p.seqlen_k;
  const int column_tiles = static_cast<int>(tile_count(p.head_dim_v, kTile));
  const int query_tiles = static_cast<int>(tile_count(sq, kTile));
  const int block = static_cast<int>(blockIdx.x);
  const int64_t column0 = static_cast<int64_t>(block % column_tiles) * kTile;
  const int64_t row0 = static_cast<int64_t>(block / column_tiles % query_tiles) * kTile;
  const int pair = block / column_tiles / query_tiles;
  const PairIndex at = pair_index(p, pair);
  const float* prob = probabilities + static_cast<int64_t>(pair) * sq * sk;  // (seqlen_q, seqlen_k)
  // (seqlen_k, head_dim_v) of the pair's kv head, rows via v_row_stride.
  const Element* v =
      static_cast<const Element*>(p.v) + at.batch * p.v_batch_stride + at.kv_head * p.v_head_stride;
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerSide;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerSide;

  float acc[kPerThread][kPerThread] = {};
  for (int64_t key0 = 0; key0 < sk; key0 += kChunk) {
    // Past the last key, P and V are both zero: V past the end is never read, so garbage cannot
    // turn 0 * V into NaN.
    for (int item = static_cast<int>(threadIdx.x); item < kTile * kChunk; item += kTileThreads) {
      const int r = item / kChunk;
      const int c = item % kChunk;
      const bool inside = row0 + r < sq && key0 + c < sk;
      p_chunk[r][c] = inside ? prob[(row0 + r) * sk + key0 + c] : 0.0f;
    }
    for (int item = static_cast<int>(threadIdx.x); item < kChunk * kTile / 2;
         item += kTileThreads) {
      const int r = item / (kTile / 2);
      const int c = (item % (kTile / 2)) * 2;
      float2 v_pair = {0.0f, 0.0f};
      if (key0 + r < sk && column0 + c < p.head_dim_v) {
        v_pair = load_pair(v + (key0 + r) * p.v_row_stride + column0 + c);
      }
      *reinterpret_cast<float2*>(&v_chunk[r][c]) = v_pair;
    }
    __syncthreads();
#pragma unroll 8
    for (int j = 0; j < kChunk; ++j) {
      float p_values[kPerThread];
      float v_values[kPerThread];
#pragma unroll
      for (int a = 0; a < kPerThread; ++a) p_values[a] = p_chunk[ty + kThreadsPerSide * a][j];
#pragma unroll
      for (int c = 0; c < kPerThread; ++c) v_values[c] = v_chunk[j][tx + kThreadsPerSide * c];
#pragma unroll
      for (int a = 0; a < kPerThread; ++a) {
#pragma unroll
        for (int c = 0; c < kPerThread; ++c) acc[a][c] = fmaf(p_values[a], v_values[c], acc[a][c]);
      }
    }
    __syncthreads();
  }

  Element* out = static_cast<Element*>(p.out) + at.batch * p.out_batch_stride +
                 at.head * p.out_head_stride + column0;  // (seqlen_q, kTile columns)
#pragma unroll
  for (int a = 0; a < kPerThread; ++a) {
    const int64_t row = row0 + ty + kThreadsPerSide * a;
    if (row >= sq) continue;
#pragma unroll
    for (int c = 0; c < kPerThread; ++c) {
      const int column = tx + kThreadsPerSide * c;
      if (column0 + column < p.head_dim_v) {
        out[row * p.out_row_stride + column] = from_float<Element>(acc[a][c]);
      }
    }
  }
}

// ---- the backward's own kernels -----------------------------------------------------------------

// One block per row r = pair * seqlen_q + query: D = dO . O, then dS = P (dP - D) scale over dP.
template <typename Element>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_backward_kernel(const __grid_constant__ AttentionParams p,
                            const float* __restrict__ probabilities, float* __restrict__ gradients) {
  const int row = static_cast<int>(blockIdx.x);
  const int query = row % p.seqlen_q;
  const PairIndex at = pair_index(p, row / p.seqlen_q);
  const Element* dout = static_cast<const Element*>(p.dout) + at.batch * p.dout_batch_stride +
                        query * p.dout_row_stride + at.head * p.dout_head_stride;
  const Element* out = static_cast<const Element*>(p.out) + at.batch * p.out_batch_stride +
                       query * p.out_row_stride + at.head * p.out_head_stride;
  float partial = 0.0f;
  for (int d = static_cast<int>(threadIdx.x); d < p.head_dim_v; d += kSoftmaxThreads) {
    partial = fmaf(to_float(dout[d]), to_float(out[d]), partial);
  }
  const float delta = block_sum<kSoftmaxWarps>(partial);
  const int64_t sk = p.seqlen_k;
  const float* prob = probabilities + static_cast<int64_t>(row) * sk;
  float* grad = gradients + static_cast<int64_t>(row) * sk;  // dP in, dS out
  for (int64_t j = threadIdx.x; j < sk; j += kSoftmaxThreads) {
    grad[j] = prob[j] * (grad[j] - delta) * p.scale;  // P = 0 at a masked key: dS = 0 there
  }
}

// Block = (batch and kv head, key tile, column tile), column tile fastest:
// out[keys, columns] = sum over the group's heads and the queries of matrix^T x.
template <typename Element>
__global__ void __launch_bounds__(kTileThreads)
    transposed_product_kernel(const __grid_constant__ TransposedProduct t) {
  using MatrixChunk = float[kChunk][kTile];  // (query chunk, keys)
  using XChunk = float[kChunk][kTile];       // (query chunk, columns)
  ATTNBENCH_SHARED(MatrixChunk, m_chunk, 16);
  ATTNBENCH_SHARED(XChunk, x_chunk, 16);

  const int64_t sq = t.seqlen_q;
  const int64_t sk = t.seqlen_k;
  const int column_tiles = static_cast<int>(tile_count(t.dim, kTile));
  const int key_tiles = static_cast<int>(tile_count(sk, kTile));
  const int block = static_cast<int>(blockIdx.x);
  const int64_t column0 = static_cast<int64_t>(block % column_tiles) * kTile;
  const int64_t key0 = static_cast<int64_t>(block / column_tiles % key_tiles) * kTile;
  const int group = block / column_tiles / key_tiles;  // batch * heads_kv + kv head
  const int batch = group / t.heads_kv;
  const int kv_head = group % t.heads_kv;
  const int heads_per_kv = t.heads_per_kv;
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerSide;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerSide;

  float acc[kPerThread][kPerThread] = {};
  for (int h = kv_head * heads_per_kv; h < (kv_head + 1) * heads_per_kv; ++h) {
    const float* m = t.matrix + (static_cast<int64_t>(batch) * t.heads_q + h) * sq * sk;
    const Element* x = static_cast<const Element*>(t.x) + batch * t.x_batch_stride +
                       h * t.x_head_stride + column0;
    for (int64_t q0 = 0; q0 < sq; q0 += kChunk) {
      // Past the last query or key both chunks are zero.
      for (int item = static_cast<int>(threadIdx.x); item < kChunk * kTile; item += kTileThreads) {
        const int r = item / kTile;
        const int c = item % kTile;
        m_chunk[r][c] = q0 + r < sq && key0 + c < sk ? m[(q0 + r) * sk + key0 + c] : 0.0f;
      }
      for (int item = static_cast<int>(threadIdx.x); item < kChunk * kTile / 2;
           item += kTileThreads) {
        const int r = item / (kTile / 2);
        const int c = (item % (kTile / 2)) * 2;
        float2 pair = {0.0f, 0.0f};
        if (q0 + r < sq && column0 + c < t.dim) pair = load_pair(x + (q0 + r) * t.x_row_stride + c);
        *reinterpret_cast<float2*>(&x_chunk[r][c]) = pair;
      }
      __syncthreads();
#pragma unroll 8
      for (int j = 0; j < kChunk; ++j) {
        float m_values[kPerThread];
        float x_values[kPerThread];
#pragma unroll
        for (int a = 0; a < kPerThread; ++a) m_values[a] = m_chunk[j][ty + kThreadsPerSide * a];
#pragma unroll
        for (int c = 0; c < kPerThread; ++c) x_values[c] = x_chunk[j][tx + kThreadsPerSide * c];
#pragma unroll
        for (int a = 0; a < kPerThread; ++a) {
#pragma unroll
          for (int c = 0; c < kPerThread; ++c) acc[a][c] = fmaf(m_values[a], x_values[c], acc[a][c]);
        }
      }
      __syncthreads();
    }
  }

  Element* out = static_cast<Element*>(t.out) + batch * t.out_batch_stride +
                 kv_head * t.out_head_stride + column0;  // (seqlen_k, kTile columns)
#pragma unroll
  for (int a = 0; a < kPerThread; ++a) {
    const int64_t key = key0 + ty + kThreadsPerSide * a;
    if (key >= sk) continue;
#pragma unroll
    for (int c = 0; c < kPerThread; ++c) {
      const int column = tx + kThreadsPerSide * c;
      if (column0 + column < t.dim) {
        out[key * t.out_row_stride + column] = from_float<Element>(acc[a][c]);
      }
    }
  }
}

// ---- launch -------------------------------------------------------------------------------------

Status check_grid(int64_t blocks, const char* step) {
  if (blocks <= kMaxGridBlocks) return Status::Ok();
  return Status::Error(std::string("cuda.naive ") + step + ": " + std::to_string(blocks) +
                       " blocks exceed one launch's grid");
}

int64_t pair_count(const AttentionParams& params) {
  return static_cast<int64_t>(params.batch) * params.heads_q;
}

}  // namespace

Status launch_scores(const AttentionParams& params, bool mask_keys, float* scores,
                     cudaStream_t stream) {
  const int64_t blocks =
      pair_count(params) * tile_count(params.seqlen_q, kTile) * tile_count(params.seqlen_k, kTile);
  if (Status status = check_grid(blocks, "scores"); !status) return status;
  const auto grid = static_cast<unsigned>(blocks);
  if (params.input_dtype == DType::bf16) {
    launch_kernel(scores_kernel<__nv_bfloat16>, grid, kTileThreads, 0, stream, params, scores,
                  mask_keys);
  } else {
    launch_kernel(scores_kernel<__half>, grid, kTileThreads, 0, stream, params, scores, mask_keys);
  }
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

Status launch_softmax(const AttentionParams& params, bool mask_inside, float* scores,
                      cudaStream_t stream) {
  const int64_t rows = pair_count(params) * params.seqlen_q;
  if (Status status = check_grid(rows, "softmax"); !status) return status;
  launch_kernel(softmax_kernel, static_cast<unsigned>(rows), kSoftmaxThreads, 0, stream, params,
                scores, mask_inside);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

Status launch_output(const AttentionParams& params, const float* probabilities,
                     cudaStream_t stream) {
  const int64_t blocks = pair_count(params) * tile_count(params.seqlen_q, kTile) *
                         tile_count(params.head_dim_v, kTile);
  if (Status status = check_grid(blocks, "output"); !status) return status;
  const auto grid = static_cast<unsigned>(blocks);
  if (params.input_dtype == DType::bf16) {
    launch_kernel(output_kernel<__nv_bfloat16>, grid, kTileThreads, 0, stream, params,
                  probabilities);
  } else {
    launch_kernel(output_kernel<__half>, grid, kTileThreads, 0, stream, params, probabilities);
  }
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

Status launch_softmax_backward(const AttentionParams& params, const float* probabilities,
                               float* gradients, cudaStream_t stream) {
  const int64_t rows = pair_count(params) * params.seqlen_q;
  if (Status status = check_grid(rows, "softmax backward"); !status) return status;
  const auto grid = static_cast<unsigned>(rows);
  if (params.grad_dtype == DType::bf16) {
    launch_kernel(softmax_backward_kernel<__nv_bfloat16>, grid, kSoftmaxThreads, 0, stream, params,
                  probabilities, gradients);
  } else {
    launch_kernel(softmax_backward_kernel<__half>, grid, kSoftmaxThreads, 0, stream, params,
                  probabilities, gradients);
  }
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

Status launch_transposed_product(const TransposedProduct& product, DType dtype,
                                 cudaStream_t stream) {
  const int64_t blocks = static_cast<int64_t>(product.batch) * product.heads_kv *
                         tile_count(product.seqlen_k, kTile) * tile_count(product.dim, kTile);
  if (Status status = check_grid(blocks, "transposed product"); !status) return status;
  const auto grid = static_cast<unsigned>(blocks);
  if (dtype == DType::bf16) {
    launch_kernel(transposed_product_kernel<__nv_bfloat16>, grid, kTileThreads, 0, stream,
                  product);
  } else {
    launch_kernel(transposed_product_kernel<__half>, grid, kTileThreads, 0, stream, product);
  }
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu::naive_steps
