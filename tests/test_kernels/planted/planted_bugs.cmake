# Planted bugs (issue 14, "Must show"; issue 15 for flash3): test-only variants of an in-house
# kernel, each its real kernel source with one bug edited in, built for the emulated device and
# listed as test.<family>_<bug> when ATTNBENCH_TEST_KERNELS=1. tests/emu/test_emu_planted.cpp
# requires each to fail with its named reason where the real kernel passes the same case.
# Every edit must match the kernel's text exactly once, or the configure step stops: a variant
# can never silently be the unedited kernel.
#
# A family is a kernel source and the entry that registers one instantiation of its edited copy
# (@name@ and @summary@ filled in per bug): flash2 (cuda.flash2 at d=64, bf16), flash3_wg1
# (cuda.flash3_wg1 at d=128, bf16), flash3_ws (cuda.flash3_ws at d=128, bf16: the
# warp-specialized kernel, whose pipeline crosses warpgroups), flash3 (cuda.flash3 at d=128, bf16:
# the same source, the overlapped schedule), flash3_fp8 (cuda.flash3_fp8 at
# d=128, e4m3), flash3_fp8_incoherent (cuda.flash3_fp8_incoherent at d=128, bf16: its passes) and
# flash3_fp8_block (cuda.flash3_fp8_block at d=128, bf16: per-block descales), flash3_fp8_ws
# (cuda.flash3_fp8_ws at d=128, e4m3: the warp-specialized FP8 forward) and
# flash3_fp8_ws_transpose (cuda.flash3_fp8_ws_transpose at d=128, e4m3: V^T written in the kernel)
# and flash_decode (cuda.flash_decode at d=64, bf16: the split-KV combine, the paged reads).

set(ATTNBENCH_PLANTED_DIR "${CMAKE_CURRENT_BINARY_DIR}/planted")
# A sanitizer build (ATTNBENCH_EMU_SANITIZE) compiles only the variants its sanitizer must report
# (tests/emu/test_emu_sanitized.cpp: PlantedUnderSanitizer, and SanitizedEmu, which requires that
# the build lists exactly these): the races for ThreadSanitizer, the store past the end for
# AddressSanitizer. The others, instrumented, would cost the build time and catch nothing there.
set(ATTNBENCH_PLANTED_UNDER_thread flash2_refill_before_barrier flash2_short_wait
    flash2_missing_syncwarp flash3_wg1_release_before_wait flash3_v_released_before_wait
    flash2_bwd_dq_plain_add flash2_bwd_ds_read_before_barrier
    flash3_fp8_ws_transpose_vt_released_before_wait flash3_persistent_q_reloaded_before_store)
set(ATTNBENCH_PLANTED_UNDER_address flash2_store_guard_off_by_one)
set(ATTNBENCH_PLANTED_SOURCES "")
set(ATTNBENCH_PLANTED_FACTORIES "")

set(ATTNBENCH_PLANTED_KERNEL_flash2 "${PROJECT_SOURCE_DIR}/kernels/cuda/flash2/flash2_kernel.cuh")
set(ATTNBENCH_PLANTED_ENTRY_flash2 [=[
namespace attnbench::flash2::planted_@name@ {
template Status launch_flash2<64, 64, DType::bf16>(const AttentionParams&, cudaStream_t);
}  // namespace attnbench::flash2::planted_@name@

namespace attnbench {
Kernel planted_flash2_@name@_kernel() {
  return flash2::flash2_kernel_entry(
      "test.flash2_@name@", "@summary@",
      {{64, 64, DType::bf16, &flash2::planted_@name@::launch_flash2<64, 64, DType::bf16>,
        flash2::Traits<64>::kSharedBytes}});
}
}  // namespace attnbench
]=])

# flash2_dims: cuda.flash2 at the head dims whose shared rows are wider than the data, bf16: d 80
# (in 128-wide rows) and 192 with d_v 128 (Q and K 192 wide, V 128).
set(ATTNBENCH_PLANTED_KERNEL_flash2_dims "${ATTNBENCH_PLANTED_KERNEL_flash2}")
set(ATTNBENCH_PLANTED_ENTRY_flash2_dims [=[
namespace attnbench::flash2::planted_@name@ {
template Status launch_flash2<80, 80, DType::bf16>(const AttentionParams&, cudaStream_t);
template Status launch_flash2<192, 128, DType::bf16>(const AttentionParams&, cudaStream_t);
}  // namespace attnbench::flash2::planted_@name@

namespace attnbench {
Kernel planted_flash2_dims_@name@_kernel() {
  return flash2::flash2_kernel_entry(
      "test.flash2_dims_@name@", "@summary@",
      {{80, 80, DType::bf16, &flash2::planted_@name@::launch_flash2<80, 80, DType::bf16>,
        flash2::Traits<80>::kSharedBytes},
       {192, 128, DType::bf16, &flash2::planted_@name@::launch_flash2<192, 128, DType::bf16>,
        flash2::Traits<192, 128>::kSharedBytes}});
}
}  // namespace attnbench
]=])

# flash2_bwd: cuda.flash2's backward (flash2_backward_kernel.cuh) at d=64, bf16, dQ by atomics,
# beside the real forward.
set(ATTNBENCH_PLANTED_KERNEL_flash2_bwd
    "${PROJECT_SOURCE_DIR}/kernels/cuda/flash2/flash2_backward_kernel.cuh")
set(ATTNBENCH_PLANTED_ENTRY_flash2_bwd [=[
namespace attnbench::flash2::planted_@name@ {
template Status launch_flash2_backward<64, DType::bf16, DqAccumulation::atomic>(
    const AttentionParams&, float*, float*, cudaStream_t);
}  // namespace attnbench::flash2::planted_@name@

namespace attnbench {
Kernel planted_flash2_bwd_@name@_kernel() {
  return flash2::flash2_kernel_entry(
      "test.flash2_bwd_@name@", "@summary@",
      {{64, 64, DType::bf16, &flash2::launch_flash2<64, 64, DType::bf16>,
        flash2::Traits<64>::kSharedBytes,
        &flash2::planted_@name@::launch_flash2_backward<64, DType::bf16,
                                                        flash2::DqAccumulation::atomic>,
        flash2::BackwardTraits<64>::kSharedBytes}});
}
}  // namespace attnbench
]=])

# The flash3 families share one entry: @family@ (flash3_wg1, flash3_ws, flash3) names the stage's
# launch function and kernel, @traits@ and @stage@ its tile shape and time-model stage.
set(ATTNBENCH_PLANTED_FLASH3_ENTRY [=[
namespace attnbench::flash3::planted_@name@ {
template Status launch_@family@<128, DType::bf16>(const Flash3Params&, cudaStream_t);
}  // namespace attnbench::flash3::planted_@name@

namespace attnbench {
Kernel planted_@family@_@name@_kernel() {
  using Traits = flash3::@traits@<128>;
  return flash3::flash3_kernel_entry(
      "test.@family@_@name@", "@summary@", flash3::Stage::@stage@,
      {{128, 128, DType::bf16, &flash3::planted_@name@::launch_@family@<128, DType::bf16>,
        Traits::kSharedBytes, Traits::kBlockQ, Traits::kBlockK}});
}
}  // namespace attnbench
]=])
set(ATTNBENCH_PLANTED_KERNEL_flash3_wg1
    "${PROJECT_SOURCE_DIR}/kernels/cuda/flash3/flash3_wg1_kernel.cuh")
set(ATTNBENCH_PLANTED_ENTRY_flash3_wg1 "${ATTNBENCH_PLANTED_FLASH3_ENTRY}")
set(ATTNBENCH_PLANTED_TRAITS_flash3_wg1 Wg1Traits)
set(ATTNBENCH_PLANTED_STAGE_flash3_wg1 wg1)
set(ATTNBENCH_PLANTED_KERNEL_flash3_ws
    "${PROJECT_SOURCE_DIR}/kernels/cuda/flash3/flash3_ws_kernel.cuh")
set(ATTNBENCH_PLANTED_ENTRY_flash3_ws "${ATTNBENCH_PLANTED_FLASH3_ENTRY}")
set(ATTNBENCH_PLANTED_TRAITS_flash3_ws WsTraits)
set(ATTNBENCH_PLANTED_STAGE_flash3_ws ws)
set(ATTNBENCH_PLANTED_KERNEL_flash3 "${ATTNBENCH_PLANTED_KERNEL_flash3_ws}")
# launch_flash3 takes d_v as well (its default, d_qk, is declared in flash3_launch.h, outside the
# planted copy's namespace).
string(REPLACE "<128, DType::bf16>" "<128, DType::bf16, 128>" ATTNBENCH_PLANTED_ENTRY_flash3
               "${ATTNBENCH_PLANTED_FLASH3_ENTRY}")
set(ATTNBENCH_PLANTED_TRAITS_flash3 WsTraits)
set(ATTNBENCH_PLANTED_STAGE_flash3 overlapped)
# flash3_dims: cuda.flash3 at DeepSeek's 192/128, bf16, whose Q and K rows are 192 wide and V's
# 128 (flash3_traits.h's row_width).
set(ATTNBENCH_PLANTED_KERNEL_flash3_dims "${ATTNBENCH_PLANTED_KERNEL_flash3_ws}")
set(ATTNBENCH_PLANTED_ENTRY_flash3_dims [=[
namespace attnbench::flash3::planted_@name@ {
template Status launch_flash3<192, DType::bf16, 128>(const Flash3Params&, cudaStream_t);
}  // namespace attnbench::flash3::planted_@name@

namespace attnbench {
Kernel planted_flash3_dims_@name@_kernel() {
  using Traits = flash3::WsTraits<192, 128>;
  return flash3::flash3_kernel_entry(
      "test.flash3_dims_@name@", "@summary@", flash3::Stage::overlapped,
      {{192, 128, DType::bf16, &flash3::planted_@name@::launch_flash3<192, DType::bf16, 128>,
        Traits::kSharedBytes, Traits::kBlockQ, Traits::kBlockK}});
}
}  // namespace attnbench
]=])
# flash3_persistent: cuda.flash3[persistent=on], the same source on a persistent grid.
set(ATTNBENCH_PLANTED_KERNEL_flash3_persistent "${ATTNBENCH_PLANTED_KERNEL_flash3_ws}")
set(ATTNBENCH_PLANTED_ENTRY_flash3_persistent "${ATTNBENCH_PLANTED_FLASH3_ENTRY}")
set(ATTNBENCH_PLANTED_TRAITS_flash3_persistent WsTraits)
set(ATTNBENCH_PLANTED_STAGE_flash3_persistent overlapped)
# cuda.flash3_fp8 (issue 16) at d 128: family flash3_fp8 on e4m3 inputs (the forward alone), family
# flash3_fp8_incoherent on bf16 inputs with incoherent processing (its passes, then the forward),
# flash3_fp8_block on bf16 inputs with per-block scales.
# flash3_fp8_ws: cuda.flash3_fp8_ws on e4m3 inputs (its own forward; the passes are
# flash3_fp8's). @input@, @recipe@ (flash3_fp8_recipe's incoherent, block_scales), @launch@ and
# @traits@ (the forward's launch function and tile shape) are the family's.
set(ATTNBENCH_PLANTED_KERNEL_flash3_fp8
    "${PROJECT_SOURCE_DIR}/kernels/cuda/flash3/flash3_fp8_kernel.cuh")
set(ATTNBENCH_PLANTED_INPUT_flash3_fp8 DType::e4m3)
set(ATTNBENCH_PLANTED_RECIPE_flash3_fp8 "false, false")
set(ATTNBENCH_PLANTED_LAUNCH_flash3_fp8 launch_flash3_fp8)
set(ATTNBENCH_PLANTED_TRAITS_flash3_fp8 Fp8Traits)
set(ATTNBENCH_PLANTED_KERNEL_flash3_fp8_incoherent "${ATTNBENCH_PLANTED_KERNEL_flash3_fp8}")
set(ATTNBENCH_PLANTED_INPUT_flash3_fp8_incoherent DType::bf16)
set(ATTNBENCH_PLANTED_RECIPE_flash3_fp8_incoherent "true, false")
set(ATTNBENCH_PLANTED_LAUNCH_flash3_fp8_incoherent launch_flash3_fp8)
set(ATTNBENCH_PLANTED_TRAITS_flash3_fp8_incoherent Fp8Traits)
set(ATTNBENCH_PLANTED_ENTRY_flash3_fp8 [=[
namespace attnbench::flash3::planted_@name@ {
template Status @launch@<128, @input@>(const Flash3Params&, const Fp8PassArgs&, cudaStream_t);
}  // namespace attnbench::flash3::planted_@name@

namespace attnbench {
Kernel planted_@family@_@name@_kernel() {
  return flash3::flash3_fp8_kernel_entry(
      "test.@family@_@name@", "@summary@", flash3::flash3_fp8_recipe(@recipe@),
      {flash3::fp8_instantiation<flash3::@traits@<128>>(
          @input@, &flash3::planted_@name@::@launch@<128, @input@>)});
}
}  // namespace attnbench
]=])
set(ATTNBENCH_PLANTED_ENTRY_flash3_fp8_incoherent "${ATTNBENCH_PLANTED_ENTRY_flash3_fp8}")
set(ATTNBENCH_PLANTED_KERNEL_flash3_fp8_block "${ATTNBENCH_PLANTED_KERNEL_flash3_fp8}")
set(ATTNBENCH_PLANTED_INPUT_flash3_fp8_block DType::bf16)
set(ATTNBENCH_PLANTED_RECIPE_flash3_fp8_block "false, true")
set(ATTNBENCH_PLANTED_LAUNCH_flash3_fp8_block launch_flash3_fp8)
set(ATTNBENCH_PLANTED_TRAITS_flash3_fp8_block Fp8Traits)
set(ATTNBENCH_PLANTED_ENTRY_flash3_fp8_block "${ATTNBENCH_PLANTED_ENTRY_flash3_fp8}")
set(ATTNBENCH_PLANTED_KERNEL_flash3_fp8_ws
    "${PROJECT_SOURCE_DIR}/kernels/cuda/flash3/flash3_fp8_ws_kernel.cuh")
set(ATTNBENCH_PLANTED_INPUT_flash3_fp8_ws DType::e4m3)
set(ATTNBENCH_PLANTED_RECIPE_flash3_fp8_ws "false, false")
set(ATTNBENCH_PLANTED_LAUNCH_flash3_fp8_ws launch_flash3_fp8_ws)
set(ATTNBENCH_PLANTED_TRAITS_flash3_fp8_ws Fp8WsTraits)
set(ATTNBENCH_PLANTED_ENTRY_flash3_fp8_ws "${ATTNBENCH_PLANTED_ENTRY_flash3_fp8}")
set(ATTNBENCH_PLANTED_KERNEL_flash3_fp8_ws_transpose "${ATTNBENCH_PLANTED_KERNEL_flash3_fp8_ws}")
set(ATTNBENCH_PLANTED_INPUT_flash3_fp8_ws_transpose DType::e4m3)
set(ATTNBENCH_PLANTED_RECIPE_flash3_fp8_ws_transpose "false, false")
set(ATTNBENCH_PLANTED_LAUNCH_flash3_fp8_ws_transpose launch_flash3_fp8_ws_transpose)
set(ATTNBENCH_PLANTED_TRAITS_flash3_fp8_ws_transpose Fp8WsTransposeTraits)
set(ATTNBENCH_PLANTED_ENTRY_flash3_fp8_ws_transpose "${ATTNBENCH_PLANTED_ENTRY_flash3_fp8}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  "${ATTNBENCH_PLANTED_KERNEL_flash2}" "${ATTNBENCH_PLANTED_KERNEL_flash2_bwd}"
  "${ATTNBENCH_PLANTED_KERNEL_flash3_wg1}"
  "${ATTNBENCH_PLANTED_KERNEL_flash3_ws}" "${ATTNBENCH_PLANTED_KERNEL_flash3_fp8}"
  "${ATTNBENCH_PLANTED_KERNEL_flash3_fp8_ws}")

# attnbench_plant_bug(FAMILY NAME SUMMARY FIND1 REPLACE1 [FIND2 REPLACE2 ...])
function(attnbench_plant_bug family name summary)
  if(ATTNBENCH_EMU_SANITIZE AND
     NOT "${family}_${name}" IN_LIST ATTNBENCH_PLANTED_UNDER_${ATTNBENCH_EMU_SANITIZE})
    return()
  endif()
  set(kernel_file "${ATTNBENCH_PLANTED_KERNEL_${family}}")
  file(READ "${kernel_file}" text)
  # Edits are read argument by argument (ARGV<i>): kernel code holds semicolons, which a CMake
  # list would split. The first edit moves the variant's code into its own namespace, beside the
  # real kernel in the same binary.
  set(find_0 "inline namespace ATTNBENCH_TARGET {")
  set(replace_0 "namespace planted_${name} {")
  set(edits 1)
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE 3 ${last} 2)
    math(EXPR j "${i} + 1")
    set(find_${edits} "${ARGV${i}}")
    set(replace_${edits} "${ARGV${j}}")
    math(EXPR edits "${edits} + 1")
  endforeach()
  math(EXPR last_edit "${edits} - 1")
  foreach(e RANGE 0 ${last_edit})
    string(FIND "${text}" "${find_${e}}" first)
    string(FIND "${text}" "${find_${e}}" final REVERSE)
    if(first EQUAL -1 OR NOT first EQUAL final)
      get_filename_component(kernel_name "${kernel_file}" NAME)
      message(FATAL_ERROR "planted bug ${name}: the edit must match ${kernel_name} exactly once: "
                          "'${find_${e}}'")
    endif()
    string(REPLACE "${find_${e}}" "${replace_${e}}" text "${text}")
  endforeach()
  file(CONFIGURE OUTPUT "${ATTNBENCH_PLANTED_DIR}/${family}_${name}.cuh" CONTENT "${text}" @ONLY)
  set(traits "${ATTNBENCH_PLANTED_TRAITS_${family}}")  # the flash3 entry's fields
  set(stage "${ATTNBENCH_PLANTED_STAGE_${family}}")
  set(input "${ATTNBENCH_PLANTED_INPUT_${family}}")  # the flash3_fp8 entry's fields
  set(recipe "${ATTNBENCH_PLANTED_RECIPE_${family}}")  # flash3_fp8_recipe's arguments
  set(launch "${ATTNBENCH_PLANTED_LAUNCH_${family}}")
  string(CONFIGURE "${ATTNBENCH_PLANTED_ENTRY_${family}}" entry @ONLY)
  file(CONFIGURE OUTPUT "${ATTNBENCH_PLANTED_DIR}/${family}_${name}.cpp" CONTENT
"// Generated by tests/test_kernels/planted/planted_bugs.cmake: ${family} with a planted bug.
#include \"planted/${family}_${name}.cuh\"
#include \"tests/test_kernels/planted/planted_kernels.h\"
${entry}" @ONLY)
  set(ATTNBENCH_PLANTED_SOURCES ${ATTNBENCH_PLANTED_SOURCES} "${ATTNBENCH_PLANTED_DIR}/${family}_${name}.cpp"
      PARENT_SCOPE)
  set(ATTNBENCH_PLANTED_FACTORIES ${ATTNBENCH_PLANTED_FACTORIES} "planted_${family}_${name}_kernel"
      PARENT_SCOPE)
endfunction()

# 1. The refill of a pipeline stage issued before the barrier that protects it (barrier kept): a
#    fast warp overwrites the stage a slow warp still reads (a race; which reads it hits depends
#    on the schedule).
attnbench_plant_bug(flash2 refill_before_barrier "refill issued before the barrier"
  [=[
    ptx::wait_copies<T::kPendingWhenTileReady>();
    __syncthreads();
    {]=] [=[
    ptx::wait_copies<T::kPendingWhenTileReady>();
    {]=]
  [=[
      ptx::commit_copies();
    }

    if (warp_has_rows) {]=] [=[
      ptx::commit_copies();
    }
    __syncthreads();

    if (warp_has_rows) {]=])
# 2. Writer and reader of a shared tile disagree on the swizzle: the epilogue reads unswizzled.
attnbench_plant_bug(flash2 unswizzled_read "epilogue reads the swizzled tile unswizzled"
  [=[q_tile + swizzled_offset<T::kQkWidth>(row, chunk))]=] [=[q_tile + row * T::kQkWidth + chunk * kChunkElements)]=])
# 3. A cp.async wait one group short: the tile is used before it has landed.
attnbench_plant_bug(flash2 short_wait "cp.async wait one group short"
  [=[ptx::wait_copies<T::kPendingWhenTileReady>();]=] [=[ptx::wait_copies<T::kPendingWhenTileReady + 1>();]=])
# 4. V read without .trans.
attnbench_plant_bug(flash2 v_not_transposed "V loaded with ldmatrix without .trans"
  [=[ptx::load_matrix_x4_transposed(b, v_address]=] [=[ptx::load_matrix_x4(b, v_address]=])
# 5. An off-by-one tail guard: the row at the limit is copied (an out-of-bounds read).
attnbench_plant_bug(flash2 tail_guard_off_by_one "tail guard <= instead of <"
  [=[row + pass * kRowStep < row_limit;]=] [=[row + pass * kRowStep <= row_limit;]=])
# 6. The epilogue's __syncwarp missing: lanes read rows their neighbours have not written yet.
attnbench_plant_bug(flash2 missing_syncwarp "epilogue __syncwarp removed"
  [=[
  __syncwarp();
  // (seqlen_q, HeadDimV) of this pair]=] [=[
  // (seqlen_q, HeadDimV) of this pair]=])
# 7. A shuffle mask that leaves out a lane (lane 0 of every quad-max): the variant's own quad_max
#    in place of gpu::quad_max (common/row_stats.cuh), so the faulty shuffle is the kernel's line.
attnbench_plant_bug(flash2 shuffle_mask_drops_lane "quad max shuffles with lane 0 left out of the mask"
  [=[using gpu::quad_max;
]=] [=[__device__ __forceinline__ float quad_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xfffffffeu, value, 1));
  return fmaxf(value, __shfl_xor_sync(kFullWarp, value, 2));
}
]=])
# 8. A __syncthreads inside a branch only some threads take (warps whose rows lie past seqlen_q skip it).
attnbench_plant_bug(flash2 barrier_in_branch "epilogue __syncthreads only in warps with rows"
  [=[
  ptx::wait_copies<0>();
  __syncthreads();]=] [=[
  ptx::wait_copies<0>();
  if (warp_has_rows) __syncthreads();]=])

# 9. An off-by-one guard on the output store: the row at seqlen_q is written, past the end of out
#    for the last batch (a plain store, which only the canaries or the bounds build see).
attnbench_plant_bug(flash2 store_guard_off_by_one "output store guard <= instead of <"
  [=[
    if (query < p.seqlen_q) {
      const uint4 value =]=] [=[
    if (query <= p.seqlen_q) {
      const uint4 value =]=])

# flash2_dims 1. A full tile's copy without the head-dim predicate: the chunks of a 128-wide row
#    past d 80 are copied from the next row, and from past the end of K for its last key.
attnbench_plant_bug(flash2_dims copies_past_head_dim "full tiles copy the row's padding chunks"
  [=[
          if (!Pattern::copies(static_cast<int>(threadIdx.x), round)) continue;
          ptx::copy_async_16(destination + pass * kPassBytes + round * kRoundBytes,
                             source + pass * pass_stride + round * kRoundElements, true);]=] [=[
          ptx::copy_async_16(destination + pass * kPassBytes + round * kRoundBytes,
                             source + pass * pass_stride + round * kRoundElements, true);]=])
# flash2_dims 2. V copied at Q's head dim (192 where it holds 128): its tiles are written in rows
#    of the wrong width, over the next stage and past the end of shared memory.
attnbench_plant_bug(flash2_dims v_copied_at_qk_width "V's tiles copied at Q's head dim"
  [=[TileCopy<T::kBlockK, HeadDimV, T::kThreads, Element> v_copy]=]
  [=[TileCopy<T::kBlockK, HeadDim, T::kThreads, Element> v_copy]=])

# flash3_wg1 1. A stage released before the consumers' wgmma wait: the refill of the stage is
#    issued as soon as the P V batch is committed, while the tensor cores may still read V (on a
#    GPU a race with the async proxy; here the stage is NaN from the TMA's issue, and the race
#    build reports the TMA's write against the wgmma's read).
attnbench_plant_bug(flash3_wg1 release_before_wait "stage refilled before the wgmma wait"
  [=[
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);

    // Every warp has waited for its wgmma on this stage: thread 0 may refill it.
    __syncthreads();
    if (threadIdx.x == 0 && iteration + T::kStages < tile_count) {
      load_kv(stage, iteration + T::kStages);
    }]=] [=[
    __syncthreads();
    if (threadIdx.x == 0 && iteration + T::kStages < tile_count) {
      load_kv(stage, iteration + T::kStages);
    }
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);]=])


# flash3_ws 1. The warp-specialized pipeline's release moved before the consumer's wgmma wait:
#    each consumer thread arrives on the stage's "empty" mbarrier as soon as its P V batch is
#    committed, so the producer warpgroup may refill the stage while the tensor cores still read
#    V. The arrival orders nothing the wait does after it: the race build reports the TMA's write
#    against the wgmma's read; the plain build sees NaN where the producer runs during the wait
#    (the emulated wait lets other warps run first).
attnbench_plant_bug(flash3_ws release_before_wait "stage released to the producer before the wgmma wait"
  [=[
      ptx::wgmma_wait<0>();
      ptx::wgmma_fence_operand(o);
      v_of.release(tile);]=] [=[
      v_of.release(tile);
      ptx::wgmma_wait<0>();
      ptx::wgmma_fence_operand(o);]=])

# flash3 1. cuda.flash3's V released before the P V wait that opens the next turn: the producer
#    may refill V's stage while the tensor cores still read it (the race build reports the TMA's
#    write against the wgmma's read; the plain build sees the TMA's NaN fill).
attnbench_plant_bug(flash3 v_released_before_wait "V's stage released to the producer before the P V wait"
  [=[
    probe.time(kProbeOutput, [] { ptx::wgmma_wait<0>(); });
    ptx::wgmma_fence_operand(o);
    if (turn >= 2) v_of.release(turn - 2);]=] [=[
    if (turn >= 2) v_of.release(turn - 2);
    probe.time(kProbeOutput, [] { ptx::wgmma_wait<0>(); });
    ptx::wgmma_fence_operand(o);]=])
# flash3 2. The producer refills a K stage without waiting for its "empty" barrier: with more key
#    tiles than stages it re-arms the stage's "full" barrier while the consumers have yet to wait
#    on it, over K they still read (a race on a GPU; the emulator stops the launch at the arrival
#    that exceeds the barrier's count).
attnbench_plant_bug(flash3 k_refill_without_empty_wait "the producer refills a K stage before the consumers release it"
  [=[      ring.wait_empty(tile);]=]
  [=[      if (&ring != &barriers.k) ring.wait_empty(tile);]=])

# flash3_dims 1. K's tiles loaded at V's width (128 of d_qk 192): the TMA fills two of K's three
#    boxes, at V's stage stride, and the S products read the third box unwritten (NaN).
attnbench_plant_bug(flash3_dims k_loaded_at_v_width "K's tiles loaded at V's row width"
  [=[
        load(barriers.k, tiles_in.k, &params.k_map, tile,
             std::integral_constant<int, T::kQkWidth>{});]=] [=[
        load(barriers.k, tiles_in.k, &params.k_map, tile,
             std::integral_constant<int, T::kVWidth>{});]=])
# flash3_dims 2. The full turns' S products step through d_v (128) rather than d_qk (192): every
#    key tile after the first scores a third of Q K^T short; finite, and wrong.
attnbench_plant_bug(flash3_dims scores_over_d_v "S = Q K^T over d_v's 128 columns in the full turns"
  [=[
    issue_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                               tiles_in.k_stage(k_of.stage(turn)));]=] [=[
    issue_scores<T::kHeadDimV, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                                    tiles_in.k_stage(k_of.stage(turn)));]=])

# flash3_persistent 1. A persistent CTA loads the next block's Q without waiting for the
#    consumers' release of its tile (q_empty): the TMA overwrites Q while the consumers still read
#    it for the previous block's S products, or pass their output through it.
attnbench_plant_bug(flash3_persistent q_reloaded_before_store "the next block's Q loaded before the previous block's output has left its tile"
  [=[
        if (q_loads > 0) {
          ptx::mbarrier_wait(barriers.q_empty(), static_cast<unsigned>(q_loads - 1) % 2);
        }]=] [=[
        (void)barriers.q_empty();]=])

# flash3_fp8 1. P packed in S's accumulator order, as a 16-bit kernel's P is: the e4m3 A
#    fragment then holds other keys (and rows) than V^T's permuted keys are stored for.
attnbench_plant_bug(flash3_fp8 p_in_accumulator_order "P packed without the e4m3 fragment's key order"
  [=[fragments[step][0] = ptx::pack_e4m3x4(x[0] * k, x[1] * k, x[4] * k, x[5] * k);]=]
  [=[fragments[step][0] = ptx::pack_e4m3x4(x[0] * k, x[1] * k, x[2] * k, x[3] * k);]=]
  [=[fragments[step][1] = ptx::pack_e4m3x4(x[2] * k, x[3] * k, x[6] * k, x[7] * k);]=]
  [=[fragments[step][1] = ptx::pack_e4m3x4(x[4] * k, x[5] * k, x[6] * k, x[7] * k);]=])
# flash3_fp8 2. Q's and K's descales left out of the softmax's scale: right only where they are 1.
attnbench_plant_bug(flash3_fp8 qk_descales_ignored "the scores taken without Q's and K's descales"
  [=[
  p.scale *= qk_descale;
  p.scale_log2 *= qk_descale;]=] [=[
  (void)qk_descale;]=])

# flash3_fp8 3. Per-head descales (fp8_scaling per_head) ignored: the tensor's descale, which is 1
#    then, for every head; right only where every head's amax is 448.
attnbench_plant_bug(flash3_fp8 per_head_descales_ignored "the tensor's descale read in place of each head's"
  [=[  return head_descales != nullptr ? head_descales[head_descale_index(batch, head, heads)]]=]
  [=[  return head_descales != nullptr && head_descale_index(batch, head, heads) >= 0 ? tensor_descale]=])

# flash3_fp8_incoherent 1. The rotation's 1 / sqrt(d) left out: Q and K leave step 1 sqrt(d)
#    times larger, so their descales are too, and every score is d times the recipe's.
attnbench_plant_bug(flash3_fp8_incoherent rotation_unnormalized "Q and K rotated without 1 / sqrt(d)"
  [=[    for (int j = 0; j < kPerLane; ++j) x[j] *= args.rotation_norm;]=]
  [=[    for (int j = 0; j < kPerLane; ++j) (void)args.rotation_norm;]=])
# flash3_fp8_incoherent 2. The forward takes Q's descale from the params (1 for 16-bit inputs) in
#    place of the one the quantize pass computed.
attnbench_plant_bug(flash3_fp8_incoherent computed_q_descale_ignored "the params' Q descale used on 16-bit inputs"
  [=[          ? descales[kTensorQ]]=]
  [=[          ? p.q_descale]=])
# flash3_fp8_block 1. Every key tile scaled by the first block's K descale: right only where the
#    sequence is one block long, or the blocks' amaxes happen to agree.
attnbench_plant_bug(flash3_fp8_block first_k_descale_for_every_tile "every key tile takes K's first block descale"
  [=[descales[groups.index(kTensorK, block.batch, first_key, block.head_kv)];]=]
  [=[descales[groups.index(kTensorK, block.batch, 0, block.head_kv)];]=])

# flash3_fp8_ws 1. Consumer 1 reads consumer 0's rows of Q: the rows past a CTA's first 64 get
#    the scores of the first 64 (right only where seqlen_q <= 64).
attnbench_plant_bug(flash3_fp8_ws consumer_rows_not_offset "both consumers read the first 64 rows of Q"
  [=[const uint32_t q_rows = tiles.q + static_cast<uint32_t>(rows_before * kSwizzleBytes);]=]
  [=[const uint32_t q_rows = tiles.q + static_cast<uint32_t>(0 * rows_before * kSwizzleBytes);]=])
# flash3_fp8_ws 2. The producer refills K's stage without waiting for its "empty" barrier: with
#    more key tiles than stages it overwrites K the consumers may still read (a race; the emulator
#    stops the launch at the arrival past the barrier's count, or the plain build sees the next
#    tile's keys where a consumer lags).
attnbench_plant_bug(flash3_fp8_ws refill_without_empty_wait "the producer refills K's stage before the consumers release it"
  [=[        barriers.k.wait_empty(tile);]=]
  [=[        (void)barriers.k;]=])

# flash3_fp8_ws_transpose 1. The producer's V^T stores left unfenced for the async proxy: the
#    tensor cores may read the stage's old bytes. The emulator stops the launch at the wgmma that
#    reads a byte stored with no fence.proxy.async since, naming it.
attnbench_plant_bug(flash3_fp8_ws_transpose transpose_without_proxy_fence "V^T stored without fence.proxy.async before the tensor cores read it"
  [=[    ptx::fence_proxy_async();  // this thread's stores of V^T, to the tensor cores' proxy]=]
  [=[    // (no fence.proxy.async)]=])
# flash3_fp8_ws_transpose 2. V^T written in key order: P's e4m3 fragment holds the keys in
#    v_key_of_column's order, so each P meets another key's V.
attnbench_plant_bug(flash3_fp8_ws_transpose transpose_in_key_order "V^T written in key order, not P's fragment order"
  [=[      const int key = 32 * group + v_key_of_column(4 * column_quad + i);]=]
  [=[      const int key = 32 * group + 4 * column_quad + i;]=])

# flash3_fp8_ws_transpose 3. V^T's stage released before the P V wgmma that reads it is waited
#    for (at the top of the next turn, where the overlap waits): the producer's threads, free once
#    V(j + 4) has landed (K's release let it load), write V^T(j + 4) into the stage P(j) V(j)
#    still reads.
attnbench_plant_bug(flash3_fp8_ws_transpose vt_released_before_wait "V^T's stage released before the P V wait"
  [=[
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);
    if (turn >= 2) v_of.release(turn - 2);]=] [=[
    if (turn >= 2) v_of.release(turn - 2);
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);]=])

# flash2_bwd 1. dQ's atomic add replaced by a plain read-modify-write: two key blocks' CTAs add
#    into the same accumulator element unordered (a race; updates are lost when they overlap).
attnbench_plant_bug(flash2_bwd dq_plain_add "dQ added with a plain read-modify-write, not atomicAdd"
  [=[atomicAdd(target + e, dq[half][2 * r + e]);]=] [=[target[e] += dq[half][2 * r + e];]=])
# flash2_bwd 2. The barrier between writing dS^T to shared memory and reading it for dQ removed:
#    a warp reads the other warps' keys before they are written (a race).
attnbench_plant_bug(flash2_bwd ds_read_before_barrier "dS^T read for dQ before the barrier"
  [=[
                pack_pair<Element>(s[tile][2 * r], s[tile][2 * r + 1]);
          }
        }
      }
      __syncthreads();]=] [=[
                pack_pair<Element>(s[tile][2 * r], s[tile][2 * r + 1]);
          }
        }
      }]=])
# flash2_bwd 3. D from the wrong tensor: rowsum(dO o dO) instead of rowsum(dO o O).
attnbench_plant_bug(flash2_bwd delta_from_dout "D = rowsum(dO o dO)"
  [=[sum += gpu::to_float(dout[d]) * gpu::to_float(out[d]);]=]
  [=[sum += gpu::to_float(dout[d]) * gpu::to_float(dout[d]);
    (void)out;]=])
# flash2_bwd 4. dK stored without the softmax scale (dS's scale, which dQ's convert still applies).
attnbench_plant_bug(flash2_bwd no_softmax_scale "dK stored without the softmax scale"
  [=[pack_pair<Element>(
            dk[tile][2 * r] * p.scale, dk[tile][2 * r + 1] * p.scale);]=]
  [=[pack_pair<Element>(
            dk[tile][2 * r], dk[tile][2 * r + 1]);]=])
# flash2_bwd 5. Every query tile visited, none masked: the tiles a mask hides entirely are not
#    skipped, and no tile is masked element by element.
attnbench_plant_bug(flash2_bwd masked_tile_unmasked "fully masked query tiles visited unmasked"
  [=[
    work.first_tile = static_cast<int>(rows.begin) / T::kBlockQ;
    work.tiles = rows.end > rows.begin
                     ? static_cast<int>(rows.end - 1) / T::kBlockQ - work.first_tile + 1
                     : 0;]=] [=[
    (void)rows;
    work.first_tile = 0;
    work.tiles = (p.seqlen_q + T::kBlockQ - 1) / T::kBlockQ;]=]
  [=[const bool needs_mask =]=] [=[const bool needs_mask = false &&]=])

# flash_decode: cuda.flash_decode at d 64, bf16 (issue 39): the split-KV combine and the paged
# cache's reads. Wrong values, not races: the checker reports them.
set(ATTNBENCH_PLANTED_KERNEL_flash_decode
    "${PROJECT_SOURCE_DIR}/kernels/cuda/flash_decode/flash_decode_kernel.cuh")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${ATTNBENCH_PLANTED_KERNEL_flash_decode}")
set(ATTNBENCH_PLANTED_ENTRY_flash_decode [=[
namespace attnbench::flash_decode::planted_@name@ {
template Status launch_flash_decode<64, DType::bf16>(const AttentionParams&, const Workspace&,
                                                     int, cudaStream_t);
}  // namespace attnbench::flash_decode::planted_@name@

namespace attnbench {
Kernel planted_flash_decode_@name@_kernel() {
  return flash_decode::flash_decode_kernel_entry(
      "test.flash_decode_@name@", "@summary@",
      {{64, DType::bf16, &flash_decode::planted_@name@::launch_flash_decode<64, DType::bf16>}});
}
}  // namespace attnbench
]=])
# 1. The combine weighs every split alike: a split's LSE dropped, so a split of few visible keys
#    counts as much as one of many.
attnbench_plant_bug(flash_decode lse_dropped "combine ignores each split's LSE"
  [=[const float weight = lse_split == kNegInf ? 0.0f : expf(lse_split - lse_max);]=]
  [=[const float weight = lse_split == kNegInf ? 0.0f : 1.0f;]=])
# 2. The page-table lookup one page off: rows past a sequence's first page read from the page
#    before theirs.
attnbench_plant_bug(flash_decode page_off_by_one "page-table lookup one page off"
  [=[const int slot = key / p.page_size;]=]
  [=[const int slot = key / p.page_size > 0 ? key / p.page_size - 1 : 0;]=])
# 3. The partial last page read whole: a varlen sequence's keys rounded up to whole pages, so
#    the stale rows past its last key are attended to.
attnbench_plant_bug(flash_decode last_page_whole "partial last page read whole"
  [=[const int keys = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];]=]
  [=[const int keys = p.page_table != nullptr
                         ? (p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] + p.page_size - 1) /
                               p.page_size * p.page_size
                         : p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];]=])

# cuda.naive's backward (issue 37): its bugs are operands the plan hands the steps, so one
# hand-written source holds the three variants (planted_naive_backward.cpp); the plain build only
# (no sanitizer reports them: they are wrong values, not races or stray stores).
if(NOT ATTNBENCH_EMU_SANITIZE)
  list(APPEND ATTNBENCH_PLANTED_SOURCES
       "${PROJECT_SOURCE_DIR}/tests/test_kernels/planted/planted_naive_backward.cpp")
  list(APPEND ATTNBENCH_PLANTED_FACTORIES planted_cuda_naive_bwd_no_softmax_scale_kernel
       planted_cuda_naive_bwd_delta_from_dout_kernel planted_cuda_naive_bwd_gqa_not_summed_kernel)
endif()

# The list the registry reads (tests/test_kernels/planted/planted_kernels.h).
set(declarations "")
set(calls "")
foreach(factory ${ATTNBENCH_PLANTED_FACTORIES})
  string(APPEND declarations "Kernel ${factory}();\n")
  string(APPEND calls "      ${factory}(),\n")
endforeach()
file(CONFIGURE OUTPUT "${ATTNBENCH_PLANTED_DIR}/planted_kernels.cpp" CONTENT
"// Generated by tests/test_kernels/planted/planted_bugs.cmake.
#include \"tests/test_kernels/planted/planted_kernels.h\"

namespace attnbench {
${declarations}
std::vector<Kernel> planted_kernels() {
  return {
${calls}  };
}
}  // namespace attnbench
" @ONLY)
list(APPEND ATTNBENCH_PLANTED_SOURCES "${ATTNBENCH_PLANTED_DIR}/planted_kernels.cpp")
