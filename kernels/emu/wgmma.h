// The emulated wgmma.mma_async (Hopper's warpgroup matrix product, issue 15): what one thread
// issues, and what the block keeps of it until the wait that completes it.
//
// The instruction is asynchronous, and the emulation keeps it so: at issue the thread's
// accumulators are saved and filled with NaN, and the product is computed only at the
// wgmma.wait_group that completes its group, from the shared-memory tiles as they are then. So a
// kernel that reads its accumulators before the wait reads NaN, and one that overwrites a stage
// before the wait gets a wrong product (and a race report in the race build). Reported in one
// line, as the ISA leaves them undefined: a wgmma with no wgmma.fence since the thread's last
// commit_group (register operands may still be in flight; CUTLASS and FlashAttention-3 fence at
// the start of every batch, and so must a kernel here), accumulator or A registers written
// between issue and wait, lanes of a warp that disagree on a descriptor, a block whose threads are
// not whole warpgroups, a thread that ends with groups in flight.
//
// Layouts (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma): warp w of
// the warpgroup owns rows 16w..16w+15 of the 64; lane l (g = l / 4, t = l % 4) holds accumulator
// 4j + 2i + e at row 16w + g + 8i, column 8j + 2t + e; an A fragment in registers is mma.sync
// m16n8k16's (register 0: row g, k 2t + e; 1: row g + 8; 2: row g, k 2t + 8 + e; 3: row g + 8,
// k 2t + 8 + e). The shared-memory tiles follow kernels/cuda/common/wgmma_descriptor.h.
// Accumulation as for mma.sync: reference/tensor_core_sum.h, the model fitted on an H200.
// e4m3 inputs (m64nNk32): 32 deep, one byte an element (a K-major k32 step is 32 bytes, as a
// 16-bit k16 step); both operands K-major (the ISA has no transpose for FP8: V must be stored
// [d][key]); an A fragment in registers is mma.sync m16n8k32's for 8-bit types (register 0: row g,
// k 4t + e for byte e; 1: row g + 8; 2: row g, k 16 + 4t + e; 3: row g + 8, k 16 + 4t + e); the
// sums follow tensor_core_sum's FP8 model, which is not yet measured.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

namespace attnbench::emu {

enum class MmaInput : uint8_t { f16, bf16, e4m3 };

// K of one instruction: m64nNk16 for 16-bit inputs, m64nNk32 for e4m3.
constexpr unsigned wgmma_depth(MmaInput input) { return input == MmaInput::e4m3 ? 32 : 16; }
constexpr unsigned kMaxWgmmaDepth = 32;

struct WgmmaOp {
  MmaInput input = MmaInput::bf16;
  unsigned n = 0;                         // m64nNkK: N, a multiple of 8 up to 256
  uint64_t a_descriptor = 0;              // A from shared memory (K-major) when no registers
  const uint32_t* a_registers = nullptr;  // A from registers: this thread's 4
  uint64_t b_descriptor = 0;
  bool b_mn_major = false;  // imm-trans-b: B stored N-contiguous (V as [key][d]); 16-bit only
  bool accumulate = true;   // scale-d: D = A B + D, else D = A B
  float* d = nullptr;       // this thread's n / 2 accumulators
};

// One issued wgmma, kept until its group completes.
struct PendingWgmma {
  WgmmaOp op;
  std::array<std::array<float, kMaxWgmmaDepth>, 2> a_rows{};  // A from registers: rows g, g + 8
  std::array<uint32_t, 4> a_at_issue{};           // to tell a write to them before the wait
  std::vector<float> c;                           // D at issue (empty: chained or not accumulating)
  bool chained = false;                           // C is the previous pending wgmma's D
  const char* file = "";
  int line = 0;
};

struct WgmmaState {
  bool fenced = false;                              // wgmma.fence since the last commit_group
  std::vector<PendingWgmma> open;                   // issued since the last commit_group
  // Groups in flight, oldest first: a vector, not a deque, as block_thread.h's FIFOs.
  std::vector<std::vector<PendingWgmma>> committed;
  std::map<const float*, std::vector<float>> chained_results;  // D a pending wgmma adds to
};

// The accumulators' value from issue to wait: a quiet NaN with a payload a kernel does not make.
constexpr uint32_t kWgmmaInFlightBits = 0x7fc0dead;

}  // namespace attnbench::emu
