// cpu.flash's backward — FlashAttention-2's algorithm (Dao 2023, algorithm 2) on BLAS tiles.
//
// What it computes: dQ, dK, dV of out = softmax(scale * Q K^T, masked) V from the upstream dO and
// the forward's own out and LSE, never holding more than a (block_q x block_k) tile of scores:
//   D = rowsum(dO * O)                                      per query row, first (phase "delta")
//   per work item (batch, kv head, block of keys), dK = dV = 0, for each query head of the kv
//   head's group and each block of query rows that sees any of the keys:
//     S  = scale * log2(e) * Q K^T;  P = 2^(S - LSE * log2(e)), 0 where masked   "recompute"
//     dV += P^T dO                                                               "dV"
//     dP  = dO V^T                                                               "dP"
//     dS  = P * (dP - D)                                                         "dS"
//     dK += dS^T Q                                                               "dK"
//     dQ_thread += dS K        the thread's own fp32 accumulator of all of dQ    "dQ"
//   dK = scale * dK and dV stored once per item (GQA: summed over the group's heads there);
//   dQ = scale * (sum of the threads' accumulators in thread order), rounded and stored.
// Work items go to threads statically (item i to thread i % threads), so each thread adds its
// items in one order and the final sum runs in thread order: reruns are bit for bit equal for a
// given thread count, which is how FlashAttention-2's deterministic mode trades memory for
// atomics (one dQ accumulator per split). Extra memory: threads x dQ in fp32, D, and per thread
// a few tiles.
// Limits: untuned tiles (128 query rows x 256 keys); fp16/bf16 tiles are widened to fp32 for BLAS
// as in the forward; the diagonal tiles of causal masks are computed whole and masked.
#include "kernels/cpu/flash_backward.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numbers>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/phases.h"

namespace attnbench::cpu {
namespace {

constexpr int64_t kBlockQ = 128;
constexpr int64_t kBlockK = 256;

}  // namespace

// One thread's tiles, carved out of the plan's scratch.
struct FlashBackward::ThreadTiles {
  float* p;       // (block_q, block_k): P
  float* ds;      // (block_q, block_k): dP, then dS in place
  float* q;       // (block_q, dqk) fp32 staging
  float* dout;    // (block_q, dv)
  float* k;       // (block_k, dqk)
  float* v;       // (block_k, dv)
  float* dk;      // (block_k, dqk) accumulator
  float* dv;      // (block_k, dv) accumulator
  float* dq_sum;  // (batch, seqlen_q, heads_q, dqk): this thread's dQ accumulator
};

FlashBackward::FlashBackward(const Problem& problem, FlashBackwardBug bug)
    : problem_(problem),
      bug_(bug),
      block_q_(std::min<int64_t>(kBlockQ, problem.seqlen_q)),
      block_k_(std::min<int64_t>(kBlockK, problem.seqlen_k)),
      key_blocks_((problem.seqlen_k + block_k_ - 1) / block_k_),
      threads_(plan_threads(problem.batch * problem.heads_kv * key_blocks_)) {}

int64_t FlashBackward::thread_floats() const {
  const int64_t dqk = problem_.head_dim_qk, dv = problem_.head_dim_v;
  return 2 * block_q_ * block_k_ + block_q_ * (dqk + dv) + 2 * block_k_ * (dqk + dv);
}

Status FlashBackward::allocate(ScratchAllocator& allocator) {
  const size_t threads = static_cast<size_t>(threads_);
  const size_t dq_elements = static_cast<size_t>(problem_.batch * problem_.seqlen_q *
                                                 problem_.heads_q * problem_.head_dim_qk);
  const size_t rows = static_cast<size_t>(problem_.batch * problem_.heads_q * problem_.seqlen_q);
  Status status = allocate_scratch(allocator, threads * thread_floats() * sizeof(float),
                                   "cpu.flash backward per-thread tiles", tiles_);
  if (status) {
    status = allocate_scratch(allocator, threads * dq_elements * sizeof(float),
                              "cpu.flash backward per-thread fp32 dQ accumulators", dq_sums_);
  }
  if (status) status = allocate_scratch(allocator, rows * sizeof(float), "cpu.flash D", deltas_);
  return status;
}

FlashBackward::ThreadTiles FlashBackward::thread_tiles(int thread) const {
  const int64_t dqk = problem_.head_dim_qk, dv = problem_.head_dim_v;
  ThreadTiles t{};
  t.p = tiles_.as<float>() + thread * thread_floats();
  t.ds = t.p + block_q_ * block_k_;
  t.q = t.ds + block_q_ * block_k_;
  t.dout = t.q + block_q_ * dqk;
  t.k = t.dout + block_q_ * dv;
  t.v = t.k + block_k_ * dqk;
  t.dk = t.v + block_k_ * dv;
  t.dv = t.dk + block_k_ * dqk;
  t.dq_sum =
      dq_sums_.as<float>() + thread * problem_.batch * problem_.seqlen_q * problem_.heads_q * dqk;
  return t;
}

Status FlashBackward::run(const AttentionParams& params) {
  if (Status status = check_params_match(problem_, params); !status) return status;
  if (params.lse == nullptr || params.dout == nullptr || params.dq == nullptr) {
    return Status::Error("cpu.flash backward: needs the forward's lse, dout and dq/dk/dv buffers");
  }
  const SingleThreadedBlas single_threaded_blas;
  {
    PhaseScope phase("delta");
    row_deltas(params, deltas_.as<float>());
  }
  const int64_t blocks =
      bug_ == FlashBackwardBug::last_key_block_skipped ? key_blocks_ - 1 : key_blocks_;
  const int64_t items = static_cast<int64_t>(params.batch) * params.heads_kv * blocks;
  // Every accumulator, also of a thread the runtime might not start: store_dq sums them all.
  std::memset(dq_sums_.data(), 0, dq_sums_.bytes());
#pragma omp parallel num_threads(threads_)
  {
    const ThreadTiles tiles = thread_tiles(omp_get_thread_num());
#pragma omp for schedule(static, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t block = item % blocks, group = item / blocks;
      run_key_block(params, group / params.heads_kv, group % params.heads_kv, block * block_k_,
                    tiles);
    }
  }
  PhaseScope phase("dQ");
  store_dq(params);
  return Status::Ok();
}

void FlashBackward::run_key_block(const AttentionParams& p, int64_t b, int64_t kv_head,
                                  int64_t first_key, const ThreadTiles& tiles) const {
  const int64_t keys = std::min(block_k_, static_cast<int64_t>(p.seqlen_k) - first_key);
  const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
  PhaseScope phase("convert");
  load_block(p.input_dtype, p.k, k_offset(p, b, kv_head, first_key), p.k_row_stride, keys, dqk,
             tiles.k, dqk);
  load_block(p.input_dtype, p.v, v_offset(p, b, kv_head, first_key), p.v_row_stride, keys, dv,
             tiles.v, dv);
  fill_row(tiles.dk, 0, keys * dqk, 0.0f);
  fill_row(tiles.dv, 0, keys * dv, 0.0f);
  for (int64_t g = 0; g < p.heads_per_kv; ++g) {
    if (bug_ == FlashBackwardBug::gqa_not_summed) {
      fill_row(tiles.dk, 0, keys * dqk, 0.0f);
      fill_row(tiles.dv, 0, keys * dv, 0.0f);
    }
    const int64_t h = kv_head * p.heads_per_kv + g;
    for (int64_t first_row = 0; first_row < p.seqlen_q; first_row += block_q_) {
      query_block(p, b, h, first_row, first_key, keys, tiles);
    }
  }
  phase.next("dK");
  const float scale = bug_ == FlashBackwardBug::no_softmax_scale ? 1.0f : p.scale;
  scale_row(tiles.dk, keys * dqk, scale);
  for (int64_t j = 0; j < keys; ++j) {
    store_row(p.grad_dtype, p.dk, dk_offset(p, b, kv_head, first_key + j), tiles.dk + j * dqk, dqk);
    store_row(p.grad_dtype, p.dv, dv_offset(p, b, kv_head, first_key + j), tiles.dv + j * dv, dv);
  }
}

// One (query block, key block) tile of head h: the five products, accumulated.
void FlashBackward::query_block(const AttentionParams& p, int64_t b, int64_t h, int64_t first_row,
                                int64_t first_key, int64_t keys, const ThreadTiles& tiles) const {
  const int64_t rows = std::min(block_q_, static_cast<int64_t>(p.seqlen_q) - first_row);
  const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
  // Skip the tile when none of its rows sees any of its keys (causal, window, padding).
  bool any_visible = false;
  for (int64_t r = 0; r < rows && !any_visible; ++r) {
    const KeyRange visible = row_keys(p, b, first_row + r);
    any_visible = visible.begin < first_key + keys && visible.end > first_key && visible.size() > 0;
  }
  if (!any_visible) return;

  PhaseScope phase("convert");
  load_block(p.input_dtype, p.q, q_offset(p, b, h, first_row), p.q_row_stride, rows, dqk, tiles.q,
             dqk);
  load_block(p.grad_dtype, p.dout, dout_offset(p, b, h, first_row), p.dout_row_stride, rows, dv,
             tiles.dout, dv);
  phase.next("recompute");
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, dqk, p.scale_log2, tiles.q, dqk,
              tiles.k, dqk, 0.0f, tiles.p, block_k_);
  const float* deltas = deltas_.as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* p_row = tiles.p + r * block_k_;
    const KeyRange visible = row_keys(p, b, first_row + r);
    const int64_t begin = std::clamp<int64_t>(visible.begin - first_key, 0, keys);
    const int64_t end = std::clamp<int64_t>(visible.end - first_key, 0, keys);
    const float lse_log2 =
        p.lse[lse_offset(p, b, h, first_row + r)] * static_cast<float>(std::numbers::log2e);
    fill_row(p_row, 0, begin < end ? begin : keys, 0.0f);
    if (begin >= end) continue;
    fill_row(p_row, end, keys, 0.0f);
    for (int64_t j = begin; j < end; ++j) p_row[j] = fast_exp2(p_row[j] - lse_log2);
  }
  phase.next("dV");
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, dv, rows, 1.0f, tiles.p, block_k_,
              tiles.dout, dv, 1.0f, tiles.dv, dv);
  phase.next("dP");
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, dv, 1.0f, tiles.dout, dv,
              tiles.v, dv, 0.0f, tiles.ds, block_k_);
  phase.next("dS");
  const bool with_delta = bug_ != FlashBackwardBug::no_delta;
  for (int64_t r = 0; r < rows; ++r) {
    const float delta = with_delta ? deltas[lse_offset(p, b, h, first_row + r)] : 0.0f;
    const float* p_row = tiles.p + r * block_k_;
    float* ds_row = tiles.ds + r * block_k_;
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) ds_row[j] = p_row[j] * (ds_row[j] - delta);
  }
  phase.next("dK");
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, dqk, rows, 1.0f, tiles.ds, block_k_,
              tiles.q, dqk, 1.0f, tiles.dk, dqk);
  phase.next("dQ");
  const int64_t dq_row_stride = static_cast<int64_t>(p.heads_q) * dqk;
  float* dq_rows = tiles.dq_sum + ((b * p.seqlen_q + first_row) * p.heads_q + h) * dqk;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dqk, keys, 1.0f, tiles.ds, block_k_,
              tiles.k, dqk, 1.0f, dq_rows, dq_row_stride);
}

// dQ = scale * the threads' accumulators summed in thread order, rounded once.
void FlashBackward::store_dq(const AttentionParams& p) const {
  const int64_t dqk = p.head_dim_qk;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.seqlen_q * p.heads_q;
  const int64_t per_thread = rows * dqk;
  const float scale = bug_ == FlashBackwardBug::no_softmax_scale ? 1.0f : p.scale;
  const float* sums = dq_sums_.as<float>();
#pragma omp parallel num_threads(threads_)
  {
    std::vector<float> row(static_cast<size_t>(dqk));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(row.begin(), row.end(), 0.0f);
      for (int t = 0; t < threads_; ++t) {
        const float* partial = sums + t * per_thread + r * dqk;
        for (int64_t d = 0; d < dqk; ++d) row[static_cast<size_t>(d)] += partial[d];
      }
      scale_row(row.data(), dqk, scale);
      const int64_t h = r % p.heads_q, i = (r / p.heads_q) % p.seqlen_q;
      const int64_t b = r / (static_cast<int64_t>(p.heads_q) * p.seqlen_q);
      store_row(p.grad_dtype, p.dq, dq_offset(p, b, h, i), row.data(), dqk);
    }
  }
}

}  // namespace attnbench::cpu
