// Problems for the tests (reference/problem.h): one of a given shape, one from --shape text, or a
// random valid one.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

#include "reference/problem.h"

namespace attnbench {

// A problem of this shape whose output and P dtypes follow from the input dtype as a suite
// file's do (default_output_dtype, default_p_dtype); the default softmax scale, no FP8 scaling.
inline Problem make_problem(int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seqlen_q,
                            int64_t seqlen_k, int64_t head_dim_qk, int64_t head_dim_v, Mask mask,
                            DType dtype = DType::f32, Layout layout = Layout::bshd) {
  Problem problem;
  problem.batch = batch;
  problem.heads_q = heads_q;
  problem.heads_kv = heads_kv;
  problem.seqlen_q = seqlen_q;
  problem.seqlen_k = seqlen_k;
  problem.head_dim_qk = head_dim_qk;
  problem.head_dim_v = head_dim_v;
  problem.mask = mask;
  problem.layout = layout;
  problem.input_dtype = dtype;
  problem.output_dtype = default_output_dtype(dtype);
  problem.p_dtype = default_p_dtype(dtype);
  return problem;
}

// The problem a --shape text describes; a text that does not parse fails the test.
inline Problem parsed_shape(const std::string& text) {
  Problem problem;
  const Status status = parse_shape(text, problem);
  EXPECT_TRUE(status.ok) << text << ": " << status.message;
  return problem;
}

// One of `choices`, uniformly.
template <typename T, size_t N>
T pick(std::mt19937_64& rng, const std::array<T, N>& choices) {
  return choices[std::uniform_int_distribution<size_t>(0, N - 1)(rng)];
}

// A whole number in [low, high], uniformly.
inline int64_t random_in(std::mt19937_64& rng, int64_t low, int64_t high) {
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

constexpr std::array<DType, 5> kAllDTypes = {DType::f32, DType::f16, DType::bf16, DType::e4m3,
                                             DType::e5m2};
// The dense layouts; thd goes with a varlen batch (random_varlen).
constexpr std::array<Layout, 3> kDenseLayouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
constexpr std::array<Fp8Scaling, 4> kAllFp8Scalings = {Fp8Scaling::none, Fp8Scaling::per_tensor,
                                                       Fp8Scaling::per_head, Fp8Scaling::per_block};

// Any mask; windows of up to 300 keys a side, or unbounded.
inline Mask random_mask(std::mt19937_64& rng) {
  switch (random_in(rng, 0, 4)) {
    case 0:
      return {MaskKind::none};
    case 1:
      return {MaskKind::causal};
    case 2:
      return {MaskKind::causal_br};
    case 3:
      return {MaskKind::window, random_in(rng, -1, 300), random_in(rng, -1, 300)};
    default:
      return {MaskKind::padding};
  }
}

// Varlen lengths for `problem` (reference/varlen.h), made valid for it: layout thd, no padding
// mask; uniform, or a list of lengths 0 .. seqlen_q and 0 .. seqlen_k.
inline Varlen random_varlen(std::mt19937_64& rng, Problem& problem) {
  problem.layout = Layout::thd;
  if (problem.mask.kind == MaskKind::padding) problem.mask = {MaskKind::causal_br};
  Varlen varlen;
  varlen.kind = random_in(rng, 0, 1) ? VarlenKind::uniform : VarlenKind::list;
  if (varlen.kind == VarlenKind::list) {
    for (int64_t b = 0; b < problem.batch; ++b) {
      varlen.query_lengths.push_back(random_in(rng, 0, problem.seqlen_q));
      varlen.key_lengths.push_back(random_in(rng, 0, 1)
                                       ? std::min(varlen.query_lengths.back(), problem.seqlen_k)
                                       : random_in(rng, 0, problem.seqlen_k));
    }
  }
  return varlen;
}

// A valid problem with every field random, including values equal to their defaults (so the
// omitted fields of shape_string get exercised) and scales that need all 17 digits.
inline Problem random_problem(std::mt19937_64& rng) {
  Problem problem;
  problem.batch = random_in(rng, 1, 64);
  problem.heads_kv = random_in(rng, 1, 8);
  problem.heads_q = problem.heads_kv * random_in(rng, 1, 8);
  problem.seqlen_q = random_in(rng, 1, 5000);
  problem.seqlen_k = random_in(rng, 0, 1) ? problem.seqlen_q : random_in(rng, 1, 5000);
  problem.head_dim_qk = random_in(rng, 1, 256);
  problem.head_dim_v = random_in(rng, 0, 1) ? problem.head_dim_qk : random_in(rng, 1, 256);
  problem.input_dtype = pick(rng, kAllDTypes);
  problem.output_dtype =
      random_in(rng, 0, 1) ? default_output_dtype(problem.input_dtype) : pick(rng, kAllDTypes);
  problem.p_dtype =
      random_in(rng, 0, 1) ? default_p_dtype(problem.input_dtype) : pick(rng, kAllDTypes);
  problem.fp8_scaling = is_fp8(problem.input_dtype) ? pick(rng, kAllFp8Scalings) : Fp8Scaling::none;
  problem.mask = random_mask(rng);
  problem.layout = pick(rng, kDenseLayouts);
  if (problem.layout == Layout::qkv_packed) {
    problem.seqlen_k = problem.seqlen_q;
    problem.heads_q = problem.heads_kv;
    problem.head_dim_v = problem.head_dim_qk;
  }
  const bool varlen = random_in(rng, 0, 3) == 0;  // a varlen batch: layout thd, forward only
  if (varlen) problem.varlen = random_varlen(rng, problem);
  // A paged cache (forward only; K and V in their own pages: bshd or thd).
  const bool paged = problem.layout != Layout::bhsd && problem.layout != Layout::qkv_packed &&
                     random_in(rng, 0, 3) == 0;
  if (paged) problem.page_size = random_in(rng, 1, 300);
  switch (random_in(rng, 0, 2)) {
    case 0:
      problem.scale = 0;
      break;
    case 1:
      problem.scale = std::uniform_real_distribution<double>(1e-3, 10)(rng);
      break;
    default:
      problem.scale = 0.125;
      break;
  }
  problem.dout = pick(rng, std::array<UpstreamGradient, 3>{
                                UpstreamGradient::normal, UpstreamGradient::small,
                                UpstreamGradient::outliers});
  if (varlen || paged) return in_pass(problem, Pass::fwd);
  return in_pass(problem, pick(rng, std::array<Pass, 3>{Pass::fwd, Pass::bwd, Pass::fwd_bwd}));
}

}  // namespace attnbench
