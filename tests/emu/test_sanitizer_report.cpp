// A sanitizer's report as the one line of a result's failure reason (kernels/emu/
// sanitizer_report.h): the kind, the emulated threads, the kernel's own source lines (not the
// emulator's or the PTX wrappers'), and where an address lies among the case's buffers. The
// reports below are GCC 12's ThreadSanitizer and AddressSanitizer output as the race and bounds
// builds print it, shortened; the sanitizer builds' own test (test_emu_sanitized.cpp) checks the
// same lines end to end.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/emu/sanitizer_report.h"

namespace attnbench::emu {
namespace {

const char* const kDataRace = R"(==================
WARNING: ThreadSanitizer: data race (pid=18264)
  Read of size 8 at 0x7bd0000246b0 by thread T134:
    #0 attnbench::emu::sanitizer::note_read(void const*, unsigned long) /src/kernels/emu/sanitizer.h:88 (attnbench+0x2234b9)
    #1 attnbench::ptx::on_emu::load_matrix_x4(unsigned int (&) [4], unsigned int, char const*, int) /src/kernels/cuda/common/ptx.cuh:177 (attnbench+0x2234b9)
    #2 void attnbench::flash2::on_emu::flash2_forward<64, __nv_bfloat16>(attnbench::AttentionParams) /src/kernels/cuda/flash2/flash2_kernel.cuh:324 (attnbench+0x2234b9)
    #3 attnbench::on_emu::launch_kernel<attnbench::AttentionParams>(...)::{lambda()#1}::operator()() const /src/kernels/cuda/common/launch.cuh:23 (attnbench+0x21a6d4)

  Previous write of size 8 at 0x7bd0000246b0 by thread T498:
    #0 attnbench::ptx::on_emu::copy_async_16(unsigned int, void const*, bool, char const*, int) /src/kernels/cuda/common/ptx.cuh:148 (attnbench+0x21a6d4)
    #1 void attnbench::flash2::on_emu::flash2_forward<64, __nv_bfloat16>(attnbench::AttentionParams) /src/kernels/cuda/flash2/flash2_kernel.cuh:151 (attnbench+0x21a6d4)

  Location is heap block of size 52224 at 0x7bd000018000 allocated by thread T2:
    #0 operator new(unsigned long) ../../../../src/libsanitizer/tsan/tsan_new_delete.cpp:64 (libtsan.so.2+0x8f7c2)

  Thread T134 'block (0,0,0) thread 8' (tid=18300, running) created by thread T2 at:
    #0 __tsan_create_fiber ../../../../src/libsanitizer/tsan/tsan_interface.cpp:42 (libtsan.so.2+0x5e0a1)

  Thread T498 'block (0,0,0) thread 80' (tid=18300, running) created by thread T2 at:
    #0 __tsan_create_fiber ../../../../src/libsanitizer/tsan/tsan_interface.cpp:42 (libtsan.so.2+0x5e0a1)

SUMMARY: ThreadSanitizer: data race /src/kernels/emu/sanitizer.h:88 in attnbench::emu::sanitizer::note_read(void const*, unsigned long)
==================
)";

TEST(SanitizerReport, ADataRaceNamesBothThreadsAndTheKernelsLines) {
  EXPECT_EQ(one_line_report(kDataRace, "", nullptr),
            "data race: block (0,0,0) thread 8 reads 8 bytes at flash2_kernel.cuh:324; "
            "block (0,0,0) thread 80 wrote them at flash2_kernel.cuh:151, and no barrier or warp "
            "sync orders the two");
}

TEST(SanitizerReport, AnUnnamedHostThreadIsCalledSo) {
  std::string report = kDataRace;
  report.replace(report.find("by thread T498"), 14, "by main thread");
  const std::string line = one_line_report(report, "", nullptr);
  EXPECT_NE(line.find("; the host thread wrote them at"), std::string::npos) << line;
}

// A frame in a generated planted variant (kernels/planted/, in the build folder) is the kernel's.
TEST(SanitizerReport, AFrameOutsideTheMachineryIsTheKernels) {
  std::string report = kDataRace;
  const std::string real = "/src/kernels/cuda/flash2/flash2_kernel.cuh:151";
  report.replace(report.find(real), real.size(),
                 "/build/kernels/planted/flash2_short_wait.cuh:151");
  const std::string line = one_line_report(report, "", nullptr);
  EXPECT_NE(line.find("wrote them at flash2_short_wait.cuh:151"), std::string::npos) << line;
}

constexpr uintptr_t kOutBegin = 0x62e000031400;
constexpr size_t kOutBytes = 33280;  // its end: 0x62e000039600, 80 bytes before the write

const char* const kOutOfBounds =
    R"(=================================================================
==21167==ERROR: AddressSanitizer: use-after-poison on address 0x62e000039650 at pc 0x5603e5895673 bp 0x63100212f6e0 sp 0x63100212f6d8
WRITE of size 16 at 0x62e000039650 thread T0
    #0 0x5603e5895672 in void attnbench::flash2::planted_store_guard_off_by_one::flash2_forward<64, __nv_bfloat16>(attnbench::AttentionParams) /build/kernels/planted/flash2_store_guard_off_by_one.cuh:436
    #1 0x5603e58261d6 in attnbench::on_emu::launch_kernel<attnbench::AttentionParams>(...)::{lambda()#1}::operator()() const /src/kernels/cuda/common/launch.cuh:23
    #6 0x5603e599109b in attnbench::emu::Fiber::enter(boost::context::fiber&&) (/build/bin/attnbench+0x31a09b)

0x62e000039650 is located 37456 bytes inside of 41472-byte region [0x62e000030400,0x62e00003a600)
allocated by thread T0 here:
    #0 0x7ff301cb94c8 in operator new(unsigned long) ../../../../src/libsanitizer/asan/asan_new_delete.cpp:95

SUMMARY: AddressSanitizer: use-after-poison /build/kernels/planted/flash2_store_guard_off_by_one.cuh:436 in void attnbench::flash2::planted_store_guard_off_by_one::flash2_forward<64, __nv_bfloat16>(attnbench::AttentionParams)
)";

std::vector<Allocation> case_buffers() {
  return {{reinterpret_cast<const void*>(0x62e000010000), 4096, "q"},
          {reinterpret_cast<const void*>(kOutBegin), kOutBytes, "out"}};
}

TEST(SanitizerReport, AnOutOfBoundsWriteNamesTheEmulatedThreadAndTheBuffer) {
  const std::vector<Allocation> buffers = case_buffers();
  EXPECT_EQ(one_line_report(kOutOfBounds, "block (0,0,0) thread 21", &buffers),
            "out-of-bounds write (ASan use-after-poison): block (0,0,0) thread 21 writes 16 bytes "
            "at flash2_store_guard_off_by_one.cuh:436, 80 bytes past the end of out");
}

TEST(SanitizerReport, AnAddressFarFromEveryBufferSaysSo) {
  const std::vector<Allocation> far = {{reinterpret_cast<const void*>(0x10000), 64, "q"}};
  const std::string line = one_line_report(kOutOfBounds, "", &far);
  EXPECT_NE(line.find("host thread T0 writes 16 bytes"), std::string::npos) << line;
  EXPECT_NE(line.find(", outside every buffer of the case"), std::string::npos) << line;
}

TEST(SanitizerReport, AnAddressBeforeABufferOrInsideItIsPlaced) {
  std::string report = kOutOfBounds;
  report.replace(report.find("on address 0x62e000039650"), 25, "on address 0x62e0000313f8");
  const std::vector<Allocation> buffers = case_buffers();
  EXPECT_NE(one_line_report(report, "", &buffers).find("8 bytes before the start of out"),
            std::string::npos);
  report.replace(report.find("on address 0x62e0000313f8"), 25, "on address 0x62e000031410");
  EXPECT_NE(one_line_report(report, "", &buffers).find("at byte 16 of out"), std::string::npos);
}

TEST(SanitizerReport, WhatIsNoReportFailsNothing) {
  EXPECT_EQ(one_line_report("", "", nullptr), "");
  EXPECT_EQ(one_line_report("==1==WARNING: ASan is ignoring requested __asan_handle_no_return: "
                            "stack type: default top: 0x7ffd; bottom 0x7f00; size: 0x1000\n"
                            "False positive error reports may follow\n",
                            "", nullptr),
            "");
  EXPECT_EQ(one_line_report("ThreadSanitizer: reported 2 warnings\n", "", nullptr), "");
}

// Racing threads report every access until they reach a barrier: a result keeps the first few
// reports whole, separators included, and says how many more there were.
TEST(SanitizerReport, OnlyTheFirstReportsAreKeptAndTheRestCounted) {
  std::string second = kDataRace;
  second.replace(second.find("thread 8'"), 9, "thread 9'");
  std::string third = kOutOfBounds;
  const std::string all = std::string(kDataRace) + second + third;
  const std::string kept = first_reports(all, 2);
  EXPECT_EQ(kept.substr(0, std::string(kDataRace).size() + second.size()),
            std::string(kDataRace) + second);
  EXPECT_EQ(kept.find("AddressSanitizer"), std::string::npos) << kept;
  EXPECT_NE(kept.find("[attnbench: 1 more reports (" + std::to_string(third.size()) +
                      " bytes) left out]"),
            std::string::npos)
      << kept;
  EXPECT_EQ(one_line_report(kept, "", nullptr), one_line_report(kDataRace, "", nullptr));
  EXPECT_EQ(first_reports(all, 3), all);
  EXPECT_EQ(first_reports("", 3), "");
}

}  // namespace
}  // namespace attnbench::emu
