// Every PTX instruction an in-house kernel uses, each with its device body (inline PTX) and its
// emulated body (kernels/emu/ptx.h, block.h). A kernel never writes asm itself
// (tests/kernels/test_kernel_sources.cpp), so under `emu` it runs the code it runs on the GPU.
//   shared_address       cvta.to.shared: a 32-bit shared-state-space address
//   copy_async_16        cp.async.cg.shared.global, 16 bytes, zero-fill when not valid
//   commit_copies        cp.async.commit_group
//   wait_copies<N>       cp.async.wait_group N
//   load_matrix_x{1,2,4}[_transposed]   ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16
//   mma_16x8x16<Element> mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
//   exp2_approx          ex2.approx.ftz.f32
//   named_barrier_sync / named_barrier_arrive   bar.sync / bar.arrive id, count
//   Hopper (sm_90): mbarrier_init, fence_mbarrier_init, mbarrier_arrive[_expect_tx],
//   mbarrier_expect_tx, mbarrier_wait (try_wait.parity until done), elect_one (elect.sync),
//   tma_load_{2,3,4}d (cp.async.bulk.tensor on an mbarrier), tma_store_4d, bulk_commit,
//   bulk_wait_read<N> (cp.async.bulk.tensor's store, commit_group, wait_group.read),
//   fence_proxy_async, setmaxnreg_inc / setmaxnreg_dec, wgmma_ss / wgmma_rs (wgmma.mma_async
//   m64nNk16 for f16/bf16, m64nNk32 for e4m3), wgmma_fence, wgmma_commit, wgmma_wait<N>,
//   wgmma_fence_operand, pack_e4m3x4 (two cvt.rn.satfinite.e4m3x2.f32)
//   clock64              mov.u64 %clock64 (the SM's cycle counter; under emu the host's
//                        nanoseconds: a probe's structure is checked there, not its figures)
// Conversions with their rounding (__floats2half2_rn, ...) are CUDA's intrinsics on the GPU and
// bit-exact copies of them under emu (kernels/emu/cuda_subset.h).
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>
#if defined(ATTNBENCH_EMU)
#include <chrono>  // clock64's host clock; emu only: <chrono> costs an nvcc unit ~1.5 s
#endif

#include "kernels/cuda/common/cuda_api.h"
#if defined(ATTNBENCH_EMU)
#include "kernels/emu/ptx.h"
#define ATTNBENCH_PTX_SITE \
  ::attnbench::emu::Site { file, line }
// Emulated wrappers take the caller's line, so a report names the kernel's source line.
#define ATTNBENCH_PTX_CALLER const char *file = __builtin_FILE(), int line = __builtin_LINE()
#endif

namespace attnbench::ptx {
inline namespace ATTNBENCH_TARGET {

constexpr int kCopyBytes = 16;
// The Element of an FP8 wgmma: e4m3 bytes (kernels hold them as uint8_t / packed uint32_t).
struct E4m3 {};
// The wgmma.mma_async shapes and inputs wrapped here: N = 64, 128, 256 of every input, and N = 176
// (FlashAttention-3's key tile at d 128) of 16-bit inputs for S = Q K^T (wgmma_ss) only.
template <typename Element>
constexpr bool kSixteenBit =
    std::is_same_v<Element, __half> || std::is_same_v<Element, __nv_bfloat16>;
template <int kN, typename Element>
constexpr bool kWgmmaWrapped = ((kN == 64 || kN == 128 || kN == 256) &&
                                (kSixteenBit<Element> || std::is_same_v<Element, E4m3>)) ||
                               (kN == 176 && kSixteenBit<Element>);
constexpr int kWgmmaSsOnlyN = 176;
// K of one wgmma: 32 bytes of each row, 16 elements of 16 bits or 32 of e4m3.
template <typename Element>
constexpr int kWgmmaDepth = std::is_same_v<Element, E4m3> ? 32 : 16;

#if !defined(ATTNBENCH_EMU)

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes global -> shared, asynchronously, bypassing L1 (.cg). With `valid` false no byte is
// read and the 16 bytes are zero-filled (src-size 0): a tail's predicated load.
__device__ __forceinline__ void copy_async_16(uint32_t shared, const void* global, bool valid) {
  const int source_bytes = valid ? kCopyBytes : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared), "l"(global),
               "n"(kCopyBytes), "r"(source_bytes)
               : "memory");
}

__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void load_matrix_x1(uint32_t (&fragment)[1], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(fragment[0])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void load_matrix_x2(uint32_t (&fragment)[2], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(fragment[0]), "=r"(fragment[1])
               : "r"(address)
               : "memory");
}
// Four 8x8 b16 matrices; lane l gives the row address of matrix l / 8, row l % 8, and receives
// from matrix i, in register i, row lane / 4, elements 2 * (lane % 4) and + 1.
__device__ __forceinline__ void load_matrix_x4(uint32_t (&fragment)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void load_matrix_x1_transposed(uint32_t (&fragment)[1],
                                                          uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(fragment[0])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void load_matrix_x2_transposed(uint32_t (&fragment)[2],
                                                          uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(fragment[0]), "=r"(fragment[1])
               : "r"(address)
               : "memory");
}
// The same, transposed: lane receives column lane / 4, rows 2 * (lane % 4) and + 1.
__device__ __forceinline__ void load_matrix_x4_transposed(uint32_t (&fragment)[4],
                                                          uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address)
               : "memory");
}

// D += A B for one 16x8x16 tile; A row-major (4 registers), B column-major (2), D fp32 (4).
template <typename Element>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1);
template <>
__device__ __forceinline__ void mma_16x8x16<__half>(float (&d)[4], const uint32_t (&a)[4],
                                                    uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16x8x16<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                           uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x on the special-function unit; exp2(-inf) = +0, which is what masked scores need.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Named barrier `id` (0-15; 0 is __syncthreads') over `count` threads, a multiple of 32: sync
// waits until `count` threads have reached it, arrive counts the caller in and goes on (a
// producer signalling its consumers).
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// ---- Hopper (sm_90) ------------------------------------------------------------------------
// mbarrier: an 8-byte barrier in shared memory whose phase completes when `count` arrivals and
// every expected transaction byte (a TMA copy's, counted down as it lands) are in.
__device__ __forceinline__ void mbarrier_init(uint32_t barrier, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(count) : "memory");
}
// Makes the initialized barriers visible to the async proxy (TMA) and the other threads.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}
// Adds `bytes` to the phase's expected transaction count, then arrives.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarrier_expect_tx(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(bytes)
               : "memory");
}
// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t barrier, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred complete;\n"
      "retry:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 complete, [%0], %1;\n"
      "@!complete bra retry;\n"
      "}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}
// True in one lane of the (converged, full) warp.
__device__ __forceinline__ bool elect_one() {
  uint32_t elected = 0;
  asm volatile(
      "{\n"
      ".reg .pred chosen;\n"
      "elect.sync _|chosen, %1;\n"
      "selp.u32 %0, 1, 0, chosen;\n"
      "}\n"
      : "=r"(elected)
      : "r"(0xffffffffu));
  return elected != 0;
}
// cp.async.bulk.tensor: the box of `map` at the coordinates (innermost first) to the shared
// address `destination`, completing on the mbarrier at `barrier` by the box's bytes. `map` is the
// kernel's __grid_constant__ CUtensorMap parameter (kernels/cuda/common/tma_map.h).
__device__ __forceinline__ void tma_load_2d(uint32_t destination, const CUtensorMap* map,
                                            uint32_t barrier, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%3, %4}], [%2];\n" ::"r"(destination),
      "l"(map), "r"(barrier), "r"(x), "r"(y)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t destination, const CUtensorMap* map,
                                            uint32_t barrier, int x, int y, int z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%3, %4, %5}], [%2];\n" ::"r"(destination),
      "l"(map), "r"(barrier), "r"(x), "r"(y), "r"(z)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t destination, const CUtensorMap* map,
                                            uint32_t barrier, int x, int y, int z, int w) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%3, %4, %5, %6}], [%2];\n" ::"r"(destination),
      "l"(map), "r"(barrier), "r"(x), "r"(y), "r"(z), "r"(w)
      : "memory");
}
// cp.async.bulk.tensor's store: the box at the shared address `source` (laid out with the map's
// swizzle) to the coordinates of `map`'s tensor, elements outside it skipped; completes through
// the bulk group: bulk_commit closes the group, bulk_wait_read<N> waits until at most N groups
// still read their shared memory (which may then be reused or released).
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t source, int x, int y,
                                             int z, int w) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          map),
      "r"(source), "r"(x), "r"(y), "r"(z), "r"(w)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// Orders this thread's ordinary shared-memory stores before the async proxy's reads (TMA store,
// wgmma operands).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Moves registers between warpgroups: producers give theirs up, consumers take them.
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// wgmma.mma_async m64nNk16 with fp32 accumulators (N = 64, 128, 256, and 176 for wgmma_ss; f16 or
// bf16), or m64nNk32 for e4m3 (Element E4m3), issued by the four warps of a warpgroup together:
// D = A B + D (D = A B when `accumulate` is false). B comes from shared memory through a
// descriptor (kernels/cuda/common/wgmma_descriptor.h), K-major or, with kTransposeB (16-bit only:
// FP8 has no transpose), N-major (V stored [key][d]); A from shared memory (K-major) or from
// registers (mma.sync's A fragment, rows 16 w.. of warp w: m16n8k16's for 16-bit inputs,
// m16n8k32's for e4m3, four bytes a register). Asynchronous: `d` belongs to the tensor cores from
// issue to the wgmma_wait that completes its group; wgmma_fence before the first wgmma of a batch,
// wgmma_fence_operand around issue and wait so the compiler keeps the accumulators in place.
#define ATTNBENCH_R0_9 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
#define ATTNBENCH_R10(p)                                                                 \
  "%" #p "0, %" #p "1, %" #p "2, %" #p "3, %" #p "4, %" #p "5, %" #p "6, %" #p "7, %" #p \
  "8, "                                                                                  \
  "%" #p "9, "
#define ATTNBENCH_REGS_32 ATTNBENCH_R0_9 ATTNBENCH_R10(1) ATTNBENCH_R10(2) "%30, %31"
#define ATTNBENCH_REGS_64                                                            \
  ATTNBENCH_R0_9 ATTNBENCH_R10(1) ATTNBENCH_R10(2) ATTNBENCH_R10(3) ATTNBENCH_R10(4) \
      ATTNBENCH_R10(5) "%60, %61, %62, %63"
#define ATTNBENCH_REGS_88                                                            \
  ATTNBENCH_R0_9 ATTNBENCH_R10(1) ATTNBENCH_R10(2) ATTNBENCH_R10(3) ATTNBENCH_R10(4) \
      ATTNBENCH_R10(5) ATTNBENCH_R10(6) ATTNBENCH_R10(7) "%80, %81, %82, %83, %84, %85, %86, %87"
#define ATTNBENCH_REGS_128                                                                 \
  ATTNBENCH_R0_9 ATTNBENCH_R10(1) ATTNBENCH_R10(2) ATTNBENCH_R10(3) ATTNBENCH_R10(4)       \
      ATTNBENCH_R10(5) ATTNBENCH_R10(6) ATTNBENCH_R10(7) ATTNBENCH_R10(8) ATTNBENCH_R10(9) \
          ATTNBENCH_R10(10) ATTNBENCH_R10(11) "%120, %121, %122, %123, %124, %125, %126, %127"
#define ATTNBENCH_F4(i) "+f"(d[i]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
#define ATTNBENCH_F16(i) \
  ATTNBENCH_F4(i), ATTNBENCH_F4((i) + 4), ATTNBENCH_F4((i) + 8), ATTNBENCH_F4((i) + 12)
#define ATTNBENCH_F32(i) ATTNBENCH_F16(i), ATTNBENCH_F16((i) + 16)
#define ATTNBENCH_F64(i) ATTNBENCH_F32(i), ATTNBENCH_F32((i) + 32)
#define ATTNBENCH_F88 ATTNBENCH_F64(0), ATTNBENCH_F16(64), ATTNBENCH_F4(80), ATTNBENCH_F4(84)
#define ATTNBENCH_F128 ATTNBENCH_F64(0), ATTNBENCH_F64(64)
// One issue: the shape, the input type, the accumulator list, the operand numbers of A, B, the
// scale-d flag and the transpose immediate, then the accumulator constraints.
#define ATTNBENCH_WGMMA_SS(N, TYPE, REGS, A, B, S, T, ...)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S                                             \
               ", 0;\n"                                                                          \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" REGS "}, " A \
               ", " B ", p, 1, 1, 0, " T ";\n}\n"                                                \
               : __VA_ARGS__                                                                     \
               : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)), "n"(kTransposeB ? 1 : 0))
#define ATTNBENCH_WGMMA_RS(N, TYPE, REGS, A, B, S, T, ...)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S                                             \
               ", 0;\n"                                                                          \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" REGS "}, " A \
               ", " B ", p, 1, 1, " T ";\n}\n"                                                   \
               : __VA_ARGS__                                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b),                             \
                 "r"(static_cast<int>(accumulate)), "n"(kTransposeB ? 1 : 0))

// e4m3 (m64nNk32): no transpose operands, both A and B K-major.
#define ATTNBENCH_WGMMA_SS_E4M3(N, REGS, A, B, S, ...)                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S                                            \
               ", 0;\n"                                                                         \
               "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {" REGS "}, " A ", " B \
               ", p, 1, 1;\n}\n"                                                                \
               : __VA_ARGS__                                                                    \
               : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)))
#define ATTNBENCH_WGMMA_RS_E4M3(N, REGS, A, B, S, ...)                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S                                            \
               ", 0;\n"                                                                         \
               "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {" REGS "}, " A ", " B \
               ", p, 1, 1;\n}\n"                                                                \
               : __VA_ARGS__                                                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b),                            \
                 "r"(static_cast<int>(accumulate)))

template <int kN>
__device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[kN / 2], uint64_t a, uint64_t b,
                                              bool accumulate) {
  if constexpr (kN == 64) {
    ATTNBENCH_WGMMA_SS_E4M3(64, ATTNBENCH_REGS_32, "%32", "%33", "%34", ATTNBENCH_F32(0));
  } else if constexpr (kN == 128) {
    ATTNBENCH_WGMMA_SS_E4M3(128, ATTNBENCH_REGS_64, "%64", "%65", "%66", ATTNBENCH_F64(0));
  } else {
    ATTNBENCH_WGMMA_SS_E4M3(256, ATTNBENCH_REGS_128, "%128", "%129", "%130", ATTNBENCH_F128);
  }
}
template <int kN>
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[kN / 2], const uint32_t (&a)[4],
                                              uint64_t b, bool accumulate) {
  if constexpr (kN == 64) {
    ATTNBENCH_WGMMA_RS_E4M3(64, ATTNBENCH_REGS_32, "{%32, %33, %34, %35}", "%36", "%37",
                            ATTNBENCH_F32(0));
  } else if constexpr (kN == 128) {
    ATTNBENCH_WGMMA_RS_E4M3(128, ATTNBENCH_REGS_64, "{%64, %65, %66, %67}", "%68", "%69",
                            ATTNBENCH_F64(0));
  } else {
    ATTNBENCH_WGMMA_RS_E4M3(256, ATTNBENCH_REGS_128, "{%128, %129, %130, %131}", "%132", "%133",
                            ATTNBENCH_F128);
  }
}

template <int kN, typename Element, bool kTransposeB>
__device__ __forceinline__ void wgmma_ss(float (&d)[kN / 2], uint64_t a, uint64_t b,
                                         bool accumulate) {
  static_assert(kWgmmaWrapped<kN, Element>,
                "wrapped: N = 64, 128, 256 (f16, bf16, e4m3) or 176 (f16, bf16)");
  static_assert(!(std::is_same_v<Element, E4m3> && kTransposeB), "FP8 wgmma reads B K-major only");
  constexpr bool kBf16 = std::is_same_v<Element, __nv_bfloat16>;
  if constexpr (std::is_same_v<Element, E4m3>) {
    wgmma_ss_e4m3<kN>(d, a, b, accumulate);
  } else if constexpr (kN == 64 && kBf16) {
    ATTNBENCH_WGMMA_SS(64, "bf16", ATTNBENCH_REGS_32, "%32", "%33", "%34", "%35", ATTNBENCH_F32(0));
  } else if constexpr (kN == 64) {
    ATTNBENCH_WGMMA_SS(64, "f16", ATTNBENCH_REGS_32, "%32", "%33", "%34", "%35", ATTNBENCH_F32(0));
  } else if constexpr (kN == 128 && kBf16) {
    ATTNBENCH_WGMMA_SS(128, "bf16", ATTNBENCH_REGS_64, "%64", "%65", "%66", "%67",
                       ATTNBENCH_F64(0));
  } else if constexpr (kN == 128) {
    ATTNBENCH_WGMMA_SS(128, "f16", ATTNBENCH_REGS_64, "%64", "%65", "%66", "%67", ATTNBENCH_F64(0));
  } else if constexpr (kN == 176 && kBf16) {
    ATTNBENCH_WGMMA_SS(176, "bf16", ATTNBENCH_REGS_88, "%88", "%89", "%90", "%91", ATTNBENCH_F88);
  } else if constexpr (kN == 176) {
    ATTNBENCH_WGMMA_SS(176, "f16", ATTNBENCH_REGS_88, "%88", "%89", "%90", "%91", ATTNBENCH_F88);
  } else if constexpr (kBf16) {
    ATTNBENCH_WGMMA_SS(256, "bf16", ATTNBENCH_REGS_128, "%128", "%129", "%130", "%131",
                       ATTNBENCH_F128);
  } else {
    ATTNBENCH_WGMMA_SS(256, "f16", ATTNBENCH_REGS_128, "%128", "%129", "%130", "%131",
                       ATTNBENCH_F128);
  }
}

template <int kN, typename Element, bool kTransposeB>
__device__ __forceinline__ void wgmma_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t b,
                                         bool accumulate) {
  static_assert(kWgmmaWrapped<kN, Element>,
                "wrapped: N = 64, 128, 256 (f16, bf16, e4m3) or 176 (f16, bf16)");
  static_assert(kN != kWgmmaSsOnlyN, "N = 176 is wrapped for wgmma_ss (S = Q K^T) only");
  static_assert(!(std::is_same_v<Element, E4m3> && kTransposeB), "FP8 wgmma reads B K-major only");
  constexpr bool kBf16 = std::is_same_v<Element, __nv_bfloat16>;
  if constexpr (std::is_same_v<Element, E4m3>) {
    wgmma_rs_e4m3<kN>(d, a, b, accumulate);
  } else if constexpr (kN == 64 && kBf16) {
    ATTNBENCH_WGMMA_RS(64, "bf16", ATTNBENCH_REGS_32, "{%32, %33, %34, %35}", "%36", "%37", "%38",
                       ATTNBENCH_F32(0));
  } else if constexpr (kN == 64) {
    ATTNBENCH_WGMMA_RS(64, "f16", ATTNBENCH_REGS_32, "{%32, %33, %34, %35}", "%36", "%37", "%38",
                       ATTNBENCH_F32(0));
  } else if constexpr (kN == 128 && kBf16) {
    ATTNBENCH_WGMMA_RS(128, "bf16", ATTNBENCH_REGS_64, "{%64, %65, %66, %67}", "%68", "%69", "%70",
                       ATTNBENCH_F64(0));
  } else if constexpr (kN == 128) {
    ATTNBENCH_WGMMA_RS(128, "f16", ATTNBENCH_REGS_64, "{%64, %65, %66, %67}", "%68", "%69", "%70",
                       ATTNBENCH_F64(0));
  } else if constexpr (kBf16) {
    ATTNBENCH_WGMMA_RS(256, "bf16", ATTNBENCH_REGS_128, "{%128, %129, %130, %131}", "%132", "%133",
                       "%134", ATTNBENCH_F128);
  } else {
    ATTNBENCH_WGMMA_RS(256, "f16", ATTNBENCH_REGS_128, "{%128, %129, %130, %131}", "%132", "%133",
                       "%134", ATTNBENCH_F128);
  }
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

// Four floats rounded to e4m3 (to nearest, saturating to +-448, NaN kept) in one register, x0 in
// the low byte: the A fragment of an e4m3 wgmma from fp32 values.
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  uint16_t low, high;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(low) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(high) : "f"(x3), "f"(x2));
  return uint32_t{low} | (uint32_t{high} << 16);
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most `kPending` of the warpgroup's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving reads or writes of these registers across an issue or a wait.
template <int kCount>
__device__ __forceinline__ void wgmma_fence_operand(float (&registers)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(registers[i])::"memory");
}
template <int kCount>
__device__ __forceinline__ void wgmma_fence_operand(uint32_t (&registers)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(registers[i])::"memory");
}

// The SM's 64-bit cycle counter (cuda.flash3[probe=clock64]); volatile, so it stays where it is
// among the other volatile asm (waits, barriers, wgmma).
__device__ __forceinline__ uint64_t clock64() {
  uint64_t clocks;
  asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(clocks)::"memory");
  return clocks;
}

#else  // ATTNBENCH_EMU: the same instructions, emulated

inline uint32_t shared_address(const void* pointer, ATTNBENCH_PTX_CALLER) {
  return emu::Block::current().shared_address(pointer, ATTNBENCH_PTX_SITE);
}

// The race build is told of the memory the emulator touches for the kernel here, in the kernel's
// own translation unit, so its reports name the kernel's line (kernels/emu/sanitizer.h).
inline void copy_async_16(uint32_t shared, const void* global, bool valid, ATTNBENCH_PTX_CALLER) {
  const unsigned char* destination =
      emu::Block::current().async_copy(shared, global, kCopyBytes, valid, ATTNBENCH_PTX_SITE);
  if (valid) emu::sanitizer::note_read(global, kCopyBytes);
  emu::sanitizer::note_write(destination, kCopyBytes);  // in flight from issue (NaN)
}

inline void commit_copies() { emu::Block::current().async_commit(); }

template <int kPending>
inline void wait_copies() {
  for (const auto& copy : emu::Block::current().async_wait(kPending)) {
    emu::sanitizer::note_write(copy.destination, copy.bytes);  // and written until it completes
  }
}

inline void note_rows_read(const emu::RowsRead& read) {
  for (unsigned i = 0; i < read.count; ++i)
    emu::sanitizer::note_read(read.rows[i], emu::RowsRead::kRowBytes);
}

inline void load_matrix_x1(uint32_t (&fragment)[1], uint32_t address, ATTNBENCH_PTX_CALLER) {
  note_rows_read(emu::ldmatrix(1, false, address, fragment, ATTNBENCH_PTX_SITE));
}
inline void load_matrix_x2(uint32_t (&fragment)[2], uint32_t address, ATTNBENCH_PTX_CALLER) {
  note_rows_read(emu::ldmatrix(2, false, address, fragment, ATTNBENCH_PTX_SITE));
}
inline void load_matrix_x4(uint32_t (&fragment)[4], uint32_t address, ATTNBENCH_PTX_CALLER) {
  note_rows_read(emu::ldmatrix(4, false, address, fragment, ATTNBENCH_PTX_SITE));
}
inline void load_matrix_x1_transposed(uint32_t (&fragment)[1], uint32_t address,
                                      ATTNBENCH_PTX_CALLER) {
  note_rows_read(emu::ldmatrix(1, true, address, fragment, ATTNBENCH_PTX_SITE));
}
inline void load_matrix_x2_transposed(uint32_t (&fragment)[2], uint32_t address,
                                      ATTNBENCH_PTX_CALLER) {
  note_rows_read(emu::ldmatrix(2, true, address, fragment, ATTNBENCH_PTX_SITE));
}
inline void load_matrix_x4_transposed(uint32_t (&fragment)[4], uint32_t address,
                                      ATTNBENCH_PTX_CALLER) {
  note_rows_read(emu::ldmatrix(4, true, address, fragment, ATTNBENCH_PTX_SITE));
}

template <typename Element>
void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                 ATTNBENCH_PTX_CALLER) {
  static_assert(std::is_same_v<Element, __half> || std::is_same_v<Element, __nv_bfloat16>,
                "mma.sync m16n8k16 takes f16 or bf16");
  emu::mma_m16n8k16(std::is_same_v<Element, __half> ? emu::MmaInput::f16 : emu::MmaInput::bf16, d,
                    a, b0, b1, ATTNBENCH_PTX_SITE);
}

inline float exp2_approx(float x) { return emu::ex2_approx_ftz(x); }

inline void named_barrier_sync(unsigned id, unsigned count, ATTNBENCH_PTX_CALLER) {
  emu::Block::current().named_barrier_sync(id, count, ATTNBENCH_PTX_SITE);
}
inline void named_barrier_arrive(unsigned id, unsigned count, ATTNBENCH_PTX_CALLER) {
  emu::Block::current().named_barrier_arrive(id, count, ATTNBENCH_PTX_SITE);
}

inline void mbarrier_init(uint32_t barrier, unsigned count, ATTNBENCH_PTX_CALLER) {
  emu::Block::current().mbarrier_init(barrier, count, ATTNBENCH_PTX_SITE);
}
inline void fence_mbarrier_init() {}  // emulated barriers are visible once made
inline void mbarrier_arrive(uint32_t barrier, ATTNBENCH_PTX_CALLER) {
  emu::Block::current().mbarrier_arrive(barrier, 0, ATTNBENCH_PTX_SITE);
}
inline void mbarrier_arrive_expect_tx(uint32_t barrier, uint32_t bytes, ATTNBENCH_PTX_CALLER) {
  emu::Block::current().mbarrier_arrive(barrier, bytes, ATTNBENCH_PTX_SITE);
}
inline void mbarrier_expect_tx(uint32_t barrier, uint32_t bytes, ATTNBENCH_PTX_CALLER) {
  emu::Block::current().mbarrier_expect_tx(barrier, bytes, ATTNBENCH_PTX_SITE);
}
inline void mbarrier_wait(uint32_t barrier, unsigned parity, ATTNBENCH_PTX_CALLER) {
  emu::Block::current().mbarrier_wait_parity(barrier, parity, ATTNBENCH_PTX_SITE);
}
inline bool elect_one(ATTNBENCH_PTX_CALLER) {
  return emu::Block::current().elect_one(0xffffffffu, ATTNBENCH_PTX_SITE);
}
// A TMA box is written from its issue (NaN in flight) until it lands: noted at the issuing line,
// before the issue (the landing is ordered after it).
inline void tma_load(const CUtensorMap* map, const std::array<int32_t, 4>& coordinates,
                     uint32_t destination, uint32_t barrier, emu::Site site) {
  emu::Block& block = emu::Block::current();
  const auto& emulated = *reinterpret_cast<const emu::TensorMap*>(map);
  const size_t bytes = emulated.box_bytes();
  emu::sanitizer::note_write(block.shared_pointer(destination, bytes, site), bytes);
  block.tma_load(emulated, coordinates, destination, barrier, site);
}
inline void tma_load_2d(uint32_t destination, const CUtensorMap* map, uint32_t barrier, int x,
                        int y, ATTNBENCH_PTX_CALLER) {
  tma_load(map, {x, y, 0, 0}, destination, barrier, ATTNBENCH_PTX_SITE);
}
inline void tma_load_3d(uint32_t destination, const CUtensorMap* map, uint32_t barrier, int x,
                        int y, int z, ATTNBENCH_PTX_CALLER) {
  tma_load(map, {x, y, z, 0}, destination, barrier, ATTNBENCH_PTX_SITE);
}
inline void tma_load_4d(uint32_t destination, const CUtensorMap* map, uint32_t barrier, int x,
                        int y, int z, int w, ATTNBENCH_PTX_CALLER) {
  tma_load(map, {x, y, z, w}, destination, barrier, ATTNBENCH_PTX_SITE);
}
inline void tma_store_4d(const CUtensorMap* map, uint32_t source, int x, int y, int z, int w,
                         ATTNBENCH_PTX_CALLER) {
  emu::Block::current().tma_store(*reinterpret_cast<const emu::TensorMap*>(map), {x, y, z, w},
                                  source, ATTNBENCH_PTX_SITE);
}
inline void bulk_commit() { emu::Block::current().bulk_commit(); }
template <int kPending>
inline void bulk_wait_read(ATTNBENCH_PTX_CALLER) {
  emu::Block::current().bulk_wait(kPending, ATTNBENCH_PTX_SITE);
}
inline void fence_proxy_async(ATTNBENCH_PTX_CALLER) {
  emu::Block::current().fence_proxy_async(ATTNBENCH_PTX_SITE);
}
template <int kRegisters>
inline void setmaxnreg_inc() {}  // registers are not modeled; the SASS check covers it
template <int kRegisters>
inline void setmaxnreg_dec() {}

template <int kN, typename Element>
constexpr emu::WgmmaOp wgmma_op(float (&d)[kN / 2], bool transpose_b, bool accumulate) {
  static_assert(kWgmmaWrapped<kN, Element>,
                "wrapped: N = 64, 128, 256 (f16, bf16, e4m3) or 176 (f16, bf16)");
  emu::WgmmaOp op;
  op.input = std::is_same_v<Element, __half>          ? emu::MmaInput::f16
             : std::is_same_v<Element, __nv_bfloat16> ? emu::MmaInput::bf16
                                                      : emu::MmaInput::e4m3;
  op.n = kN;
  op.b_mn_major = transpose_b;
  op.accumulate = accumulate;
  op.d = d;
  return op;
}
template <int kN, typename Element, bool kTransposeB>
inline void wgmma_ss(float (&d)[kN / 2], uint64_t a, uint64_t b, bool accumulate,
                     ATTNBENCH_PTX_CALLER) {
  emu::WgmmaOp op = wgmma_op<kN, Element>(d, kTransposeB, accumulate);
  op.a_descriptor = a;
  op.b_descriptor = b;
  emu::Block::current().wgmma_issue(op, ATTNBENCH_PTX_SITE);
}
template <int kN, typename Element, bool kTransposeB>
inline void wgmma_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t b, bool accumulate,
                     ATTNBENCH_PTX_CALLER) {
  static_assert(kN != kWgmmaSsOnlyN, "N = 176 is wrapped for wgmma_ss (S = Q K^T) only");
  emu::WgmmaOp op = wgmma_op<kN, Element>(d, kTransposeB, accumulate);
  op.a_registers = a;
  op.b_descriptor = b;
  emu::Block::current().wgmma_issue(op, ATTNBENCH_PTX_SITE);
}
inline void wgmma_fence(ATTNBENCH_PTX_CALLER) {
  emu::Block::current().wgmma_fence(ATTNBENCH_PTX_SITE);
}
inline uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  return emu::pack_e4m3x4(x0, x1, x2, x3);
}
inline void wgmma_commit(ATTNBENCH_PTX_CALLER) {
  emu::Block::current().wgmma_commit(ATTNBENCH_PTX_SITE);
}
// The tiles a completed wgmma read are noted as read at the wait (from issue to wait on the GPU).
template <int kPending>
inline void wgmma_wait(ATTNBENCH_PTX_CALLER) {
  for (const unsigned char* chunk : emu::Block::current().wgmma_wait(kPending, ATTNBENCH_PTX_SITE))
    emu::sanitizer::note_read(chunk, 16);
}
template <int kCount>
inline void wgmma_fence_operand(float (&)[kCount]) {}  // the compiler's concern only
template <int kCount>
inline void wgmma_fence_operand(uint32_t (&)[kCount]) {}

// The host's steady clock in nanoseconds: monotonic per thread, as the SM's counter is.
inline uint64_t clock64() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

#endif

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::ptx
