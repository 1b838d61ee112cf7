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
// Conversions with their rounding (__floats2half2_rn, ...) are CUDA's intrinsics on the GPU and
// bit-exact copies of them under emu (kernels/emu/cuda_subset.h).
#pragma once

#include <cstdint>
#include <type_traits>

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

#endif

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::ptx
