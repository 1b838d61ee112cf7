// cuda.naive with a planted backward bug (issue 37, item 5's value bugs), emulated-device kernels
// named test.cuda_naive_bwd_<bug>, listed with the other planted variants (planted_bugs.cmake).
// The bugs change the steps' operands on the host (naive_family.h, NaiveBackwardBug): the
// softmax scale left out of dS, D taken from dO instead of O, a GQA group's dK and dV not summed.
// tests/emu/test_emu_planted.cpp requires each to fail naming the gradient it breaks.
#include <string>

#include "kernels/cuda/naive_family.h"

namespace attnbench {
namespace {

Kernel planted(gpu::NaiveBackwardBug bug, const char* name, const char* summary) {
  Kernel kernel = gpu::naive_family_kernel(gpu::MaskStep::in_scores, bug);
  kernel.name = name;
  kernel.summary = std::string("cuda.naive with a planted backward bug: ") + summary;
  return kernel;
}

}  // namespace

Kernel planted_cuda_naive_bwd_no_softmax_scale_kernel() {
  return planted(gpu::NaiveBackwardBug::no_softmax_scale, "test.cuda_naive_bwd_no_softmax_scale",
                 "dS without the softmax scale");
}
Kernel planted_cuda_naive_bwd_delta_from_dout_kernel() {
  return planted(gpu::NaiveBackwardBug::delta_from_dout, "test.cuda_naive_bwd_delta_from_dout",
                 "D = dO . dO instead of dO . O");
}
Kernel planted_cuda_naive_bwd_gqa_not_summed_kernel() {
  return planted(gpu::NaiveBackwardBug::gqa_not_summed, "test.cuda_naive_bwd_gqa_not_summed",
                 "dK and dV from one query head per kv head");
}

}  // namespace attnbench
