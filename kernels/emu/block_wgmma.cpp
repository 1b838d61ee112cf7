// wgmma.mma_async for an emulated block (kernels/emu/wgmma.h): issue saves the operands the
// instruction takes from registers and poisons the accumulators; the wait that completes a group
// reads the shared-memory tiles through their descriptors and computes the products.
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/common/wgmma_descriptor.h"
#include "kernels/emu/block.h"
#include "kernels/emu/block_thread.h"
#include "kernels/emu/sanitizer.h"
#include "reference/formats.h"
#include "reference/tensor_core_sum.h"

namespace attnbench::emu {

namespace {

constexpr unsigned kWarpgroupThreads = 128;
constexpr unsigned kMaxN = 256;

// What every lane of a warp gives at issue: the descriptors must agree across the warp, and an A
// fragment from registers is gathered from the lanes of its rows.
struct IssuePayload {
  uint64_t a_descriptor;
  uint64_t b_descriptor;
  uint32_t a[4];
};
static_assert(sizeof(IssuePayload) <= kLanePayloadBytes);

unsigned element_bytes(MmaInput input) { return input == MmaInput::e4m3 ? 1 : 2; }

// An element's value from its bits (the low byte for e4m3).
float widen(MmaInput input, uint16_t bits) {
  switch (input) {
    case MmaInput::f16:
      return fp16_bits_to_float(bits);
    case MmaInput::bf16:
      return bf16_bits_to_float(bits);
    case MmaInput::e4m3:
      return e4m3_bits_to_float(static_cast<uint8_t>(bits));
  }
  return 0.0f;
}

// The values of a 16-byte core-matrix row's elements (8 16-bit or 16 e4m3), in order.
void widen_row(MmaInput input, const unsigned char* row, float* out) {
  uint16_t halves[8];
  switch (input) {
    case MmaInput::f16:
      std::memcpy(halves, row, sizeof halves);
      for (unsigned i = 0; i < 8; ++i) out[i] = fp16_bits_to_float(halves[i]);
      return;
    case MmaInput::bf16:
      std::memcpy(halves, row, sizeof halves);
      for (unsigned i = 0; i < 8; ++i) out[i] = bf16_bits_to_float(halves[i]);
      return;
    case MmaInput::e4m3:
      for (unsigned i = 0; i < 16; ++i) out[i] = e4m3_bits_to_float(row[i]);
      return;
  }
}

// Row g and g + 8's elements of this lane's A registers, at columns 2t (+ 8) of 16 for 16-bit
// inputs, 4t (+ 16) of 32 for e4m3 (wgmma.h).
void gather_a_fragment(MmaInput input, unsigned t, const uint32_t (&a)[4],
                       std::array<std::array<float, kMaxWgmmaDepth>, 2>& rows) {
  const unsigned bytes = element_bytes(input);
  const unsigned per_register = 4 / bytes;       // elements in one 32-bit register
  const unsigned half = wgmma_depth(input) / 2;  // registers 2 and 3: the upper half of K
  for (unsigned e = 0; e < per_register; ++e) {
    auto element = [&](uint32_t reg) {
      const uint32_t bits = reg >> (8 * bytes * e);
      return widen(input, static_cast<uint16_t>(bytes == 1 ? bits & 0xffu : bits & 0xffffu));
    };
    const unsigned k = per_register * t + e;
    rows[0][k] = element(a[0]);
    rows[1][k] = element(a[1]);
    rows[0][half + k] = element(a[2]);
    rows[1][half + k] = element(a[3]);
  }
}

Swizzle swizzle_of(uint32_t bytes) {
  return bytes == 128  ? Swizzle::bytes128
         : bytes == 64 ? Swizzle::bytes64
         : bytes == 32 ? Swizzle::bytes32
                       : Swizzle::none;
}

// The shared address of element (r, k) of an operand tile of `bytes`-byte elements
// (wgmma_descriptor.h's table, whose 16-byte core-matrix rows hold 16 / bytes elements), swizzled
// as the hardware does, from the address's absolute bits. MN-major tiles are 16-bit only.
uint32_t element_address(const gpu::WgmmaOperand& tile, bool mn_major, unsigned r, unsigned k,
                         unsigned bytes) {
  const uint32_t width = tile.swizzle_bytes == 0 ? 16 : tile.swizzle_bytes;
  const unsigned per_row = 16 / bytes;  // elements in a core matrix's 16-byte row
  uint32_t offset;
  if (!mn_major) {
    offset = tile.swizzle_bytes == 0
                 ? (r / 8) * tile.stride_bytes + (k / per_row) * tile.leading_bytes + (r % 8) * 16 +
                       bytes * (k % per_row)
                 : (r / 8) * tile.stride_bytes + (r % 8) * width + bytes * k;
  } else if (tile.swizzle_bytes == 0) {
    offset =
        (r / 8) * tile.stride_bytes + 2 * (r % 8) + (k / 8) * tile.leading_bytes + (k % 8) * 16;
  } else {
    const uint32_t run = width / 2;  // elements contiguous along N
    offset = (r / run) * tile.leading_bytes + 2 * (r % run) + (k / 8) * tile.stride_bytes +
             (k % 8) * width;
  }
  return swizzled_address(tile.start + offset, swizzle_of(tile.swizzle_bytes));
}

std::string where(const char* file, int line) { return Site{file, line}.text(); }

}  // namespace

void Block::wgmma_fence(Site) { threads_[running_].wgmma.fenced = true; }

void Block::wgmma_issue(const WgmmaOp& op, Site site) {
  Thread& self = threads_[running_];
  const std::string at = "wgmma.mma_async at " + site.text() + ": ";
  if (threads_.size() % kWarpgroupThreads != 0) {
    throw EmuError(at + "the block's " + std::to_string(threads_.size()) +
                   " threads are not whole warpgroups of 128");
  }
  if (op.n == 0 || op.n % 8 != 0 || op.n > kMaxN) {
    throw EmuError(at + "N = " + std::to_string(op.n) + "; m64nNk16/k32 takes N = 8, 16, ..., 256");
  }
  if (op.input == MmaInput::e4m3 && op.b_mn_major) {
    throw EmuError(at +
                   "an e4m3 wgmma takes B K-major only (FP8 has no imm-trans-b): store V as "
                   "[d][key]");
  }
  if (!self.wgmma.fenced) {
    throw EmuError(at + "thread " + std::to_string(running_) +
                   " issues without wgmma.fence since its last commit_group (its register "
                   "operands may not be visible to the tensor cores)");
  }
  IssuePayload mine{op.a_descriptor, op.b_descriptor, {}};
  if (op.a_registers != nullptr) std::memcpy(mine.a, op.a_registers, sizeof mine.a);
  const WarpPayloads& lanes = exchange("wgmma.mma_async", &mine, sizeof mine, site);
  PendingWgmma pending;
  pending.op = op;
  pending.file = site.file;
  pending.line = site.line;
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    IssuePayload theirs;
    std::memcpy(&theirs, lanes[lane].data(), sizeof theirs);
    if (theirs.b_descriptor != mine.b_descriptor ||
        (op.a_registers == nullptr && theirs.a_descriptor != mine.a_descriptor)) {
      throw EmuError(at + "lanes " + std::to_string(this->lane()) + " and " + std::to_string(lane) +
                     " of a warp give different matrix descriptors");
    }
    // Rows g and g + 8 of the warp's A fragment come from lanes 4g .. 4g + 3.
    if (op.a_registers != nullptr && lane / 4 == this->lane() / 4) {
      gather_a_fragment(op.input, lane % 4, theirs.a, pending.a_rows);
    }
  }
  if (op.a_registers != nullptr) std::memcpy(pending.a_at_issue.data(), mine.a, sizeof mine.a);
  // Accumulating into the accumulators of a wgmma still pending chains onto its result.
  const auto same_accumulators = [&](const PendingWgmma& other) { return other.op.d == op.d; };
  pending.chained = std::any_of(self.wgmma.open.begin(), self.wgmma.open.end(), same_accumulators);
  for (const auto& group : self.wgmma.committed) {
    pending.chained = pending.chained || std::any_of(group.begin(), group.end(), same_accumulators);
  }
  if (op.accumulate && !pending.chained) pending.c.assign(op.d, op.d + op.n / 2);
  const float in_flight = std::bit_cast<float>(kWgmmaInFlightBits);
  std::fill(op.d, op.d + op.n / 2, in_flight);
  self.wgmma.open.push_back(std::move(pending));
}

void Block::wgmma_commit(Site) {
  WgmmaState& state = threads_[running_].wgmma;
  state.committed.push_back(std::move(state.open));
  state.open.clear();
  state.fenced = false;
}

const std::vector<const unsigned char*>& Block::wgmma_wait(unsigned pending_groups, Site site) {
  // The tensor cores finish a batch at some point before its wait returns, and other warps run
  // meanwhile: a stage another warp refills once this thread has released it (too early) is
  // read refilled, on the schedules where that warp runs first.
  if (threads_[running_].wgmma.committed.size() > pending_groups) let_others_run();
  WgmmaState& state = threads_[running_].wgmma;
  wgmma_chunks_read_.clear();
  const auto targets = [](const std::vector<PendingWgmma>& group, size_t from, const float* d) {
    return std::any_of(group.begin() + static_cast<ptrdiff_t>(from), group.end(),
                       [&](const PendingWgmma& other) { return other.op.d == d; });
  };
  while (state.committed.size() > pending_groups) {
    const std::vector<PendingWgmma> group = std::move(state.committed.front());
    state.committed.erase(state.committed.begin());
    for (size_t i = 0; i < group.size(); ++i) {
      float* d = group[i].op.d;
      std::vector<float> result = complete_wgmma(group[i], site);
      // Accumulators a later wgmma of this thread still owns stay in flight; its C is this D.
      const bool owned_later =
          targets(group, i + 1, d) || targets(state.open, 0, d) ||
          std::any_of(state.committed.begin(), state.committed.end(),
                      [&](const std::vector<PendingWgmma>& later) { return targets(later, 0, d); });
      if (owned_later) {
        state.chained_results[d] = std::move(result);
      } else {
        std::copy(result.begin(), result.end(), d);
        state.chained_results.erase(d);
      }
    }
  }
  std::sort(wgmma_chunks_read_.begin(), wgmma_chunks_read_.end());
  wgmma_chunks_read_.erase(std::unique(wgmma_chunks_read_.begin(), wgmma_chunks_read_.end()),
                           wgmma_chunks_read_.end());
  return wgmma_chunks_read_;
}

// Checks that the registers the wgmma owned were left alone, then computes this thread's part of
// D = A B (+ C) from the tiles in shared memory now.
std::vector<float> Block::complete_wgmma(const PendingWgmma& pending, Site wait_site) {
  const WgmmaOp& op = pending.op;
  const std::string issued = "the wgmma.mma_async issued at " + where(pending.file, pending.line);
  for (unsigned i = 0; i < op.n / 2; ++i) {
    if (std::bit_cast<uint32_t>(op.d[i]) != kWgmmaInFlightBits) {
      throw EmuError("wgmma.wait_group at " + wait_site.text() + ": thread " +
                     std::to_string(running_) + " wrote accumulator " + std::to_string(i) + " of " +
                     issued + " before the wait completed it");
    }
  }
  if (op.a_registers != nullptr &&
      std::memcmp(op.a_registers, pending.a_at_issue.data(), sizeof pending.a_at_issue) != 0) {
    throw EmuError("wgmma.wait_group at " + wait_site.text() + ": thread " +
                   std::to_string(running_) + " wrote the A registers of " + issued +
                   " before the wait completed it");
  }
  const gpu::WgmmaOperand a_tile = gpu::decode_wgmma_descriptor(op.a_descriptor);
  const gpu::WgmmaOperand b_tile = gpu::decode_wgmma_descriptor(op.b_descriptor);
  if ((op.a_registers == nullptr && a_tile.base_offset != 0) || b_tile.base_offset != 0) {
    throw EmuError(issued +
                   ": a descriptor's base offset is not 0 (the emulator swizzles from "
                   "absolute addresses, which makes it unnecessary; it does not model it)");
  }
  const unsigned bytes = element_bytes(op.input);
  const unsigned depth = wgmma_depth(op.input);
  // The shared window's bounds and the async proxy's view, looked up once: every thread reads
  // about n / 4 x depth elements per wgmma (the emulated FP8 forward's hottest loop).
  const unsigned char* const shared_end = static_begin_ + static_used_;
  const auto* const dynamic_begin = static_cast<const unsigned char*>(dynamic_shared_);
  const unsigned char* const dynamic_end = dynamic_begin + dynamic_bytes_;
  auto read = [&](const gpu::WgmmaOperand& tile, bool mn_major, unsigned r, unsigned k) {
    const uint32_t address = element_address(tile, mn_major, r, k, bytes);
    const unsigned char* pointer = shared_window_ + address;
    if (pointer < dynamic_begin || pointer + bytes > shared_end) {
      shared_pointer(address, bytes, {pending.file, pending.line});  // throws, naming the address
    }
    if constexpr (kSanitizer == Sanitizer::thread) {
      wgmma_chunks_read_.push_back(pointer - (address % 16));  // noted as read, race build only
    }
    if (pointer + bytes <= dynamic_end) {
      const unsigned char* seen = async_view_.data() + (pointer - dynamic_begin);
      for (unsigned b = 0; b < bytes; ++b) {
        if (seen[b] != pointer[b]) {
          throw EmuError(issued + " reads shared address " + std::to_string(address + b) +
                         ", written by an ordinary store with no fence.proxy.async since (the "
                         "tensor cores read through the async proxy)");
        }
      }
    }
    uint16_t bits = 0;
    std::memcpy(&bits, pointer, bytes);  // little-endian: a byte lands in the low bits
    return widen(op.input, bits);
  };
  // The `depth` elements of row r of a K-major tile into `out`, a 16-byte core-matrix row at a
  // time: the swizzle moves whole 16-byte rows, so each one's elements lie side by side and one
  // address, one bounds check and one comparison with the async view serve them all (per
  // element, they were most of the emulated FP8 forward's time). A row that leaves the dynamic
  // shared memory takes `read`, element by element, which names what is wrong.
  const unsigned per_row = 16 / bytes;
  auto read_k_major = [&](const gpu::WgmmaOperand& tile, unsigned r, float* out) {
    for (unsigned k0 = 0; k0 < depth; k0 += per_row) {
      const uint32_t address = element_address(tile, false, r, k0, bytes);
      const unsigned char* pointer = shared_window_ + address;
      const bool whole_row = address % 16 == 0 && pointer >= dynamic_begin &&
                             pointer + 16 <= dynamic_end &&
                             std::memcmp(pointer, async_view_.data() + (pointer - dynamic_begin),
                                         16) == 0;
      if (!whole_row) {
        for (unsigned k = k0; k < k0 + per_row; ++k) out[k] = read(tile, false, r, k);
        continue;
      }
      if constexpr (kSanitizer == Sanitizer::thread) wgmma_chunks_read_.push_back(pointer);
      widen_row(op.input, pointer, out + k0);
    }
  };
  const unsigned warp = (running_ / kWarpSize) % (kWarpgroupThreads / kWarpSize);
  const unsigned g = lane() / 4;
  const unsigned t = lane() % 4;
  std::array<std::array<float, kMaxWgmmaDepth>, 2> a = pending.a_rows;
  if (op.a_registers == nullptr) {
    for (unsigned i = 0; i < 2; ++i) {
      read_k_major(a_tile, 16 * warp + g + 8 * i, a[i].data());
    }
  }
  const TensorCoreOperand a_rows[2] = {tensor_core_operand(a[0].data(), depth),
                                       tensor_core_operand(a[1].data(), depth)};
  const int kept_bits = op.input == MmaInput::e4m3 ? kFp8TensorCoreBits : kHalfTensorCoreBits;
  std::vector<float> c(op.n / 2, 0.0f);
  if (op.accumulate) {
    c = pending.chained ? threads_[running_].wgmma.chained_results.at(op.d) : pending.c;
  }
  std::vector<float> d(op.n / 2);
  for (unsigned j = 0; j < op.n / 8; ++j) {
    for (unsigned e = 0; e < 2; ++e) {
      const unsigned column = 8 * j + 2 * t + e;
      std::array<float, kMaxWgmmaDepth> b;
      if (op.b_mn_major) {
        for (unsigned k = 0; k < depth; ++k) b[k] = read(b_tile, true, column, k);
      } else {
        read_k_major(b_tile, column, b.data());
      }
      const TensorCoreOperand b_column = tensor_core_operand(b.data(), depth);
      for (unsigned i = 0; i < 2; ++i) {
        const unsigned index = 4 * j + 2 * i + e;
        d[index] = tensor_core_sum(c[index], a_rows[i], b_column, kept_bits);
      }
    }
  }
  return d;
}

}  // namespace attnbench::emu
