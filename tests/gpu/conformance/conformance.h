// The hardware conformance test's two sides (issue 14, item 7): the same conformance kernels
// (conformance_kernels.cuh) run on the GPU (conformance_device.cu) and on the emulated device
// (conformance_emu.cpp). Host vectors in, host vectors out; each returns an error text, empty
// when it ran.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/mask.h"  // ATTNBENCH_HOST_DEVICE

namespace attnbench::conformance {

struct MmaCases {
  int cases = 0;
  std::vector<uint32_t> a;  // (cases, 32 lanes, 4)
  std::vector<uint32_t> b;  // (cases, 32 lanes, 2)
  std::vector<float> c;     // (cases, 32 lanes, 4)
};

// wgmma.mma_async m64nNk16 (issue 15) and m64nNk32 for e4m3 (issue 16): one compiled form per
// case list, its operand layouts drawn per case. A case is a shared-memory image of 16-bit words
// (two e4m3 bytes each for e4m3; A's tile at byte 0, B's at kWgmmaBOffset), each operand's
// descriptor fields (byte offset of its start in the image, LBO, SBO, swizzle bytes), A's
// registers for the register form, and C. A k-step is 32 bytes of a row for every input.
enum class WgmmaInput { f16, bf16, e4m3 };
struct WgmmaForm {
  int n = 64;  // 64, 128, 256
  WgmmaInput input = WgmmaInput::f16;
  bool b_n_major = false;    // B read N-major (V as the flash3 kernels read it), else K-major
  bool a_registers = false;  // A from registers (wgmma RS), else from shared memory (SS)
};
constexpr int kWgmmaThreads = 128;
constexpr uint32_t kWgmmaBOffset = 8192;  // A's tile: 64 rows of at most 128 bytes
constexpr int kWgmmaLayoutWords = 8;      // A: offset, LBO, SBO, swizzle; then B's four
struct WgmmaCases {
  WgmmaForm form;
  int cases = 0;
  int exact_cases = 0;            // the first cases: small integers, whose sums every model keeps
  int image_elements = 0;         // 16-bit values per case's image
  std::vector<uint16_t> images;   // (cases, image_elements)
  std::vector<uint32_t> layouts;  // (cases, kWgmmaLayoutWords)
  std::vector<uint32_t> a;        // (cases, 128 threads, 4): the register form's A fragments
  std::vector<float> c;           // (cases, 128 threads, n / 2)
};

// cp.async.bulk.tensor (TMA) loads completing on an mbarrier, issued by the lane elect.sync
// picks (issue 15). One bf16 tensor of random bits serves every case; case k views it as a
// packed `rank`-dimensional tensor of `dims` and loads the box at `coordinates` (partly outside
// the tensor as often as not) with its swizzle and out-of-bounds fill.
struct TmaCase {  // plain arrays: the kernel reads it from device memory
  int rank = 2;
  int64_t dims[4] = {1, 1, 1, 1};  // elements, innermost first; dims[0] a multiple of 8
  int box[4] = {1, 1, 1, 1};       // elements per dimension
  int swizzle_bytes = 0;           // 0, 32, 64, 128
  bool fill_nan = false;
  int32_t coordinates[4] = {0, 0, 0, 0};
  // The store back (cp.async.bulk.tensor's store, through a 4D map): the box as it landed, to
  // out_coordinates of the case's own output tensor (out_dims, packed, from element out_offset of
  // the output), which it overhangs as the load overhangs its tensor.
  int64_t out_dims[4] = {1, 1, 1, 1};
  int32_t out_coordinates[4] = {0, 0, 0, 0};
  int64_t out_offset = 0;
  ATTNBENCH_HOST_DEVICE uint32_t box_bytes() const {
    uint32_t bytes = 2;
    for (int d = 0; d < rank; ++d) bytes *= static_cast<uint32_t>(box[d]);
    return bytes;
  }
};
constexpr uint32_t kTmaMaxBoxBytes = 16384;
struct TmaCases {
  std::vector<uint16_t> tensor;  // bf16 bits, at least every case's product of dims
  std::vector<TmaCase> cases;
  std::vector<uint16_t> output;  // the stores' tensors, before them (a fixed pattern)
};

// atomicAdd's slots (atomic_add_kernel): values i go to slot i % kAtomicSlots.
constexpr int kAtomicSlots = 4;

struct Side {
  std::string (*mma)(bool bf16, const MmaCases& cases, std::vector<float>& d);
  std::string (*ex2)(const std::vector<float>& x, std::vector<float>& y);
  std::string (*pack)(bool bf16, const std::vector<float>& x, std::vector<uint32_t>& packed);
  // ptx::pack_e4m3x4 of x[4i .. 4i + 3] into packed[i] (cvt.rn.satfinite.e4m3x2.f32, issue 16).
  std::string (*pack_e4m3)(const std::vector<float>& x, std::vector<uint32_t>& packed);
  std::string (*ldmatrix)(int form, const std::vector<uint16_t>& tiles,
                          const std::vector<uint32_t>& rows, std::vector<uint32_t>& out);
  std::string (*wgmma)(const WgmmaCases& cases, std::vector<float>& d);
  // boxes: (cases, kTmaMaxBoxBytes / 2) shared-memory images; elected: lanes elect.sync picked;
  // stored: the output after every case's store.
  std::string (*tma)(const TmaCases& cases, std::vector<uint16_t>& boxes,
                     std::vector<uint32_t>& elected, std::vector<uint16_t>& stored);
  // atomicAdd (atom.add.f32) of `values` into kAtomicSlots slots of global and of shared memory.
  std::string (*atomic_add)(const std::vector<float>& values, std::vector<float>& global_sums,
                            std::vector<float>& shared_sums);
};

Side device_side();    // the GPU (CUDA builds only)
Side emulated_side();  // kernels/emu/

}  // namespace attnbench::conformance
