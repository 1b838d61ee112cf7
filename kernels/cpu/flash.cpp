// cpu.flash — tiled attention with an online softmax (FlashAttention-2 style), on the host.
//
// What it computes: out = softmax(scale * Q K^T, masked) V per (batch, query head), never
// holding more than one (block_q x block_k) tile of scores. For each block of query rows:
//   O = 0, m = -inf, l = 0                                       per row: running max and sum
//   for each block of keys inside the block's visible key range:
//     S = scale * log2(e) * Q K^T          cblas_sgemm   (rows x cols; log2 units)
//     per row: m' = max(m, max S over its visible keys); P = 2^(S - m'), 0 where masked;
//              l = l * 2^(m - m') + sum P; O *= 2^(m - m') when the max grew
//     O += P V                              cblas_sgemm   (rows x head_dim_v)
//   out = O / l rounded to the output dtype; LSE = (m + log2 l) * ln 2
// Against cpu.masked_fused: key tiles replace the whole score row, so scratch no longer grows
// with seqlen_k (nor seqlen_q); tiles wholly outside a block's visible keys are skipped, so
// causal and window masks cost about their share of the work; the query blocks of one head
// spread over the threads (the masked kernels give each head to one thread).
// Tiling: work items are (batch, head, query block), handed out statically round-robin (causal
// blocks differ in cost, so neighbours go to different threads); every item is computed alone,
// so the result does not depend on the thread count or order: deterministic bit for bit.
// fp16/bf16 tiles are widened to fp32 per tile into per-thread buffers; fp32 inputs go to BLAS
// in place with their row strides as leading dimensions. BLAS runs single-threaded inside the
// parallel region (OpenBLAS's OpenMP build).
// Figure (2026-12-02, the 2-core CI host: Xeon Sapphire Rapids under KVM, both cores):
// b=1, hq=16, s=2048, d=128, no mask: fp32 220-245 GFLOP/s, 70-72 % of a 4096^3 cblas_sgemm
// measured alongside (314-341 GFLOP/s); bf16 234, fp16 194; causal fp32 184 (FLOPs counted
// over visible pairs only).
// The backward: FlashAttention-2's algorithm, deterministic (kernels/cpu/flash_backward.cpp).
// Varlen batches (layout thd): a sequence's rows and keys are found through cu_seqlens and masked
// with its own lengths (cpu_common.h); the work items of its missing query blocks return at once.
// A paged cache: each K/V tile is gathered page by page through the page table into the fp32
// staging tile (fp32 inputs too), so BLAS sees one contiguous tile whatever the page size.
// Limits: the softmax bookkeeping is host code (AVX-512 / AVX2 clones on x86-64,
// see cpu_common.h); the diagonal tiles of causal masks are computed whole and masked, so
// causal cases run at ~3/4 of the unmasked rate.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/flash_backward.h"
#include "kernels/cpu/phases.h"

namespace attnbench {

namespace {

using cpu::kNegInf;

// Tile sizes. block_q rows of Q share each K/V tile, so BLAS's packing of K and V (and for
// fp16/bf16 their widening to fp32) is amortized over block_q rows; block_k keys per tile
// amortize the packing of the Q block and the per-row softmax bookkeeping (max, rescale of O)
// over block_k columns. Per thread: scores 256 x 512 fp32 = 512 KiB, O 128 KiB at d=128, and for
// fp16/bf16 the fp32 tiles of q, k, v (640 KiB): together inside a core's 2 MiB L2 on the CI
// host. Swept on the CI host (b=1, hq=16, s=2048, d=128, fp32, both cores, GFLOP/s):
// 64x256 176, 128x128 201, 128x256 205, 128x512 214, 256x256 227, 192x384 223, 256x512 234-245,
// 256x1024 238, 512x512 248 (but causal drops from 184 to 162: more of each diagonal tile is
// masked). 256x512 is the best all-rounder: the one row of the table cpu.flash owns
// (default_tiles), the sweep's other points its variants, for `attnbench tune` to time on the
// host at hand.
struct Tiles {
  int64_t block_q;
  int64_t block_k;
};
Tiles default_tiles(const Problem&) { return {256, 512}; }
constexpr Tiles kVariantTiles[] = {{128, 256}, {256, 256}, {512, 512}, {256, 1024}};

std::string tile_parameters(const Tiles& tiles) {
  return "block_q=" + std::to_string(tiles.block_q) + ",block_k=" + std::to_string(tiles.block_k);
}

// 3e11 FLOP (counted over every query-key pair): cpu.flash runs at 160-260 GFLOP/s on the
// 2-core CI host for d=32..256 with enough (batch, head, query block) items to share, so a case
// at the limit takes 1.2-2 s; masked tiles are skipped, so causal cases take about half that.
constexpr double kMaxFlops = 3e11;

class FlashPlan final : public Plan {
 public:
  FlashPlan(const Problem& problem, const Tiles& tiles, cpu::FlashBackwardBug bug)
      : problem_(problem),
        backward_(problem, bug),
        block_q_(std::min<int64_t>(tiles.block_q, problem.seqlen_q)),
        block_k_(std::min<int64_t>(tiles.block_k, problem.seqlen_k)),
        query_blocks_((problem.seqlen_q + block_q_ - 1) / block_q_),
        threads_(cpu::plan_threads(problem.batch * problem.heads_q * query_blocks_)) {}

  Status allocate(ScratchAllocator& allocator) {
    const size_t threads = static_cast<size_t>(threads_);
    Status status = cpu::allocate_scratch(allocator, threads * thread_floats() * sizeof(float),
                                          "cpu.flash per-thread tiles", tiles_);
    // fp32 K and V are read in place, but for a paged cache's pages, gathered like the others.
    if (status && (problem_.input_dtype != DType::f32 || problem_.is_paged())) {
      status = cpu::allocate_scratch(allocator, threads * staging_floats() * sizeof(float),
                                     "cpu.flash per-thread fp32 tiles of q, k, v", staging_);
    }
    if (status && problem_.has_backward()) status = backward_.allocate(allocator);
    return status;
  }

  Status run_backward(const AttentionParams& params) override { return backward_.run(params); }

  Status run(const AttentionParams& params) override {
    if (Status status = cpu::check_params_match(problem_, params); !status) return status;
    const cpu::SingleThreadedBlas single_threaded_blas;
    const int64_t items = static_cast<int64_t>(params.batch) * params.heads_q * query_blocks_;
#pragma omp parallel num_threads(threads_)
    {
      const int thread = omp_get_thread_num();
      ThreadTiles tiles = thread_tiles(thread);
#pragma omp for schedule(static, 1)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t query_block = item % query_blocks_;
        const int64_t head_pair = item / query_blocks_;
        run_block(params, head_pair / params.heads_q, head_pair % params.heads_q,
                  query_block * block_q_, tiles);
      }
    }
    return Status::Ok();
  }

 private:
  // One thread's buffers, carved out of the plan's scratch.
  struct ThreadTiles {
    float* scores;     // (block_q, block_k)
    float* out;        // (block_q, dv) unnormalized O
    float* row_max;    // (block_q,) running max, log2 units
    float* row_sum;    // (block_q,) running sum of 2^(s - max)
    float* q_staging;  // (block_q, dqk), fp16/bf16 inputs only
    float* k_staging;  // (block_k, dqk), fp16/bf16 inputs only
    float* v_staging;  // (block_k, dv), fp16/bf16 inputs only
  };

  int64_t thread_floats() const {
    return block_q_ * block_k_ + block_q_ * problem_.head_dim_v + 2 * block_q_;
  }
  int64_t staging_floats() const {
    return block_q_ * problem_.head_dim_qk +
           block_k_ * (problem_.head_dim_qk + problem_.head_dim_v);
  }

  ThreadTiles thread_tiles(int thread) const {
    ThreadTiles tiles{};
    tiles.scores = tiles_.as<float>() + thread * thread_floats();
    tiles.out = tiles.scores + block_q_ * block_k_;
    tiles.row_max = tiles.out + block_q_ * problem_.head_dim_v;
    tiles.row_sum = tiles.row_max + block_q_;
    if (staging_) {
      tiles.q_staging = staging_.as<float>() + thread * staging_floats();
      tiles.k_staging = tiles.q_staging + block_q_ * problem_.head_dim_qk;
      tiles.v_staging = tiles.k_staging + block_k_ * problem_.head_dim_qk;
    }
    return tiles;
  }

  // Rows [first_row, first_row + block_q) of head h of batch b.
  void run_block(const AttentionParams& p, int64_t b, int64_t h, int64_t first_row,
                 const ThreadTiles& tiles) const {
    // A varlen sequence shorter than the longest has fewer blocks: the rest are empty items.
    const int64_t rows = std::min(block_q_, cpu::query_rows(p, b) - first_row);
    if (rows <= 0) return;
    const int64_t h_kv = h / p.heads_per_kv;
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;

    // The block's keys: the union of its rows' visible ranges (one contiguous range per row).
    int64_t keys_begin = p.seqlen_k, keys_end = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const KeyRange keys = cpu::row_keys(p, b, first_row + r);
      if (keys.size() == 0) continue;
      keys_begin = std::min(keys_begin, keys.begin);
      keys_end = std::max(keys_end, keys.end);
    }

    cpu::fill_row(tiles.row_max, 0, rows, kNegInf);
    cpu::fill_row(tiles.row_sum, 0, rows, 0.0f);
    cpu::fill_row(tiles.out, 0, rows * dv, 0.0f);
    PhaseScope phase("convert");  // fp16/bf16 blocks widened to fp32 for BLAS
    if (keys_begin < keys_end) {
      const cpu::BlockView q =
          cpu::view_block(p.input_dtype, p.q, cpu::q_offset(p, b, h, first_row), p.q_row_stride,
                          rows, dqk, tiles.q_staging);
      for (int64_t first_key = keys_begin; first_key < keys_end; first_key += block_k_) {
        const int64_t cols = std::min(block_k_, keys_end - first_key);
        phase.next("convert");
        const cpu::BlockView k = key_block(p, Tensor::k, b, h_kv, first_key, cols, tiles.k_staging);
        const cpu::BlockView v = key_block(p, Tensor::v, b, h_kv, first_key, cols, tiles.v_staging);
        phase.next("scores");
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, dqk, p.scale_log2, q.data,
                    q.ld, k.data, k.ld, 0.0f, tiles.scores, block_k_);
        phase.next("softmax");  // the mask too: masked keys get P = 0 in the same row pass
        online_softmax(p, b, first_row, rows, first_key, cols, tiles);
        phase.next("output");
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dv, cols, 1.0f, tiles.scores,
                    block_k_, v.data, v.ld, 1.0f, tiles.out, dv);
      }
    }

    phase.next("output");
    for (int64_t r = 0; r < rows; ++r) {
      const float sum = tiles.row_sum[r];
      float* out_row = tiles.out + r * dv;
      // A row with no visible key has sum 0 and O = 0: it writes zeros, never 0/0.
      cpu::scale_row(out_row, dv, sum > 0 ? 1.0f / sum : 0.0f);
      cpu::store_row(p.output_dtype, p.out, cpu::out_offset(p, b, h, first_row + r), out_row, dv);
      if (p.lse != nullptr) {
        p.lse[cpu::lse_offset(p, b, h, first_row + r)] = cpu::natural_lse(tiles.row_max[r], sum);
      }
    }
  }

  enum class Tensor { k, v };
  // Key rows [first_key, first_key + cols) of K or V for BLAS: in place or widened (view_block),
  // or in a paged cache gathered page by page into the staging tile.
  cpu::BlockView key_block(const AttentionParams& p, Tensor tensor, int64_t b, int64_t h_kv,
                           int64_t first_key, int64_t cols, float* staging) const {
    const bool is_k = tensor == Tensor::k;
    const void* base = is_k ? p.k : p.v;
    const int64_t dim = is_k ? p.head_dim_qk : p.head_dim_v;
    const int64_t row_stride = is_k ? p.k_row_stride : p.v_row_stride;
    const auto offset = [&](int64_t row) {
      return is_k ? cpu::k_offset(p, b, h_kv, row) : cpu::v_offset(p, b, h_kv, row);
    };
    if (p.page_table == nullptr) {
      return cpu::view_block(p.input_dtype, base, offset(first_key), row_stride, cols, dim,
                             staging);
    }
    for (int64_t row = first_key; row < first_key + cols;) {
      const int64_t end = cpu::contiguous_key_rows_end(p, row, first_key + cols);
      cpu::load_block(p.input_dtype, base, offset(row), row_stride, end - row, dim,
                      staging + (row - first_key) * dim, dim);
      row = end;
    }
    return {staging, dim};
  }

  // Turns the score tile into P (0 where masked) and updates each row's max, sum and O scale.
  ATTNBENCH_CPU_CLONES void online_softmax(const AttentionParams& p, int64_t b, int64_t first_row,
                                           int64_t rows, int64_t first_key, int64_t cols,
                                           const ThreadTiles& tiles) const {
    for (int64_t r = 0; r < rows; ++r) {
      float* s_row = tiles.scores + r * block_k_;
      const KeyRange keys = cpu::row_keys(p, b, first_row + r);
      const int64_t begin = std::clamp<int64_t>(keys.begin - first_key, 0, cols);
      const int64_t end = std::clamp<int64_t>(keys.end - first_key, 0, cols);
      if (begin >= end) {
        cpu::fill_row(s_row, 0, cols, 0.0f);
        continue;
      }
      cpu::fill_row(s_row, 0, begin, 0.0f);
      cpu::fill_row(s_row, end, cols, 0.0f);
      const float old_max = tiles.row_max[r];
      const float new_max = std::max(old_max, cpu::row_max(s_row, begin, end));
      const float tile_sum = cpu::exp2_and_sum(s_row, begin, end, new_max);
      if (new_max > old_max) {
        // 2^(-inf) = 0 on the first visible tile: O and the sum are still 0 then anyway.
        const float correction = cpu::fast_exp2(old_max - new_max);
        tiles.row_sum[r] *= correction;
        cpu::scale_row(tiles.out + r * p.head_dim_v, p.head_dim_v, correction);
        tiles.row_max[r] = new_max;
      }
      tiles.row_sum[r] += tile_sum;
    }
  }

  Problem problem_;
  cpu::FlashBackward backward_;  // allocated for problems with a backward only
  int64_t block_q_;
  int64_t block_k_;
  int64_t query_blocks_;
  int threads_;
  ScratchBuffer tiles_;    // per thread: scores, O, row max, row sum (thread_floats())
  ScratchBuffer
      staging_;  // per thread: fp32 tiles of q, k, v (staging_floats()); fp16/bf16 or paged
};

// cpu.flash with its tiles from default_tiles, or fixed (a variant, named by the caller).
Kernel flash_kernel(cpu::FlashBackwardBug bug, std::optional<Tiles> fixed_tiles) {
  Kernel kernel;
  kernel.name = "cpu.flash";
  kernel.summary =
      "tiled online softmax (FlashAttention-2 style) on BLAS tiles, masked tiles skipped; "
      "FlashAttention-2's backward";
  kernel.backend = Backend::cpu;
  kernel.deterministic = true;
  kernel.backward_deterministic = true;
  kernel.returns_lse = true;
  kernel.support = cpu::cpu_support_table(
      kMaxFlops,
      "scratch per thread is a few tiles, independent of the sequence lengths; the "
      "backward adds an fp32 dQ accumulator per thread");
  kernel.support.passes = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
  kernel.support.layouts.push_back(Layout::thd);  // varlen batches (their forward: validate)
  kernel.support.paged_kv = true;
  if (fixed_tiles) {
    kernel.variant_of = kernel.name;
    kernel.name = variant_name(kernel.name, tile_parameters(*fixed_tiles));
    kernel.summary = "cpu.flash with " + tile_parameters(*fixed_tiles) + " tiles";
  } else {
    kernel.default_variant = [](const Problem& problem) {
      return tile_parameters(default_tiles(problem));
    };
  }
  kernel.make_plan = [table = kernel.support, bug, fixed_tiles](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (Status status = cpu::check_problem_for_plan(table, problem); !status) return status;
    auto plan = std::make_unique<FlashPlan>(
        problem, fixed_tiles ? *fixed_tiles : default_tiles(problem), bug);
    if (Status status = plan->allocate(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace

Kernel cpu_flash_kernel() {
  return cpu_flash_kernel_with_backward_bug(cpu::FlashBackwardBug::none);
}

Kernel cpu_flash_kernel_with_backward_bug(cpu::FlashBackwardBug bug) {
  return flash_kernel(bug, std::nullopt);
}

std::vector<Kernel> cpu_flash_variant_kernels() {
  std::vector<Kernel> variants;
  for (const Tiles& tiles : kVariantTiles) {
    variants.push_back(flash_kernel(cpu::FlashBackwardBug::none, tiles));
  }
  return variants;
}

}  // namespace attnbench
