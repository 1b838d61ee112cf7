// A sanitizer's report, as the one line a result's failure reason holds (issue 14, item 5):
//   ThreadSanitizer: "data race: block (0,0,0) thread 37 writes 2 bytes at flash2_kernel.cuh:412;
//                     block (0,0,0) thread 5 read them at flash2_kernel.cuh:398, and no barrier
//                     or warp sync orders the two"
//   AddressSanitizer: "out-of-bounds read: block (1,0,0) thread 12 reads 4 bytes at naive.cu:211,
//                      4 bytes past the end of q"
// The source line of an access is its first frame in a kernel's own code (kernels/cuda, outside
// common/), else the first outside the emulator and the sanitizer's runtime. A pure function of
// the report's text, so it is tested without a sanitizer build.
#pragma once

#include <string>
#include <vector>

#include "kernels/emu/block.h"

namespace attnbench::emu {

// `faulting_thread`: the emulated thread that ran when ASan found the error ("" if unknown);
// `buffers`: the case's buffers, to say where an address lies (may be null).
std::string one_line_report(const std::string& report_text, const std::string& faulting_thread,
                            const std::vector<Allocation>* buffers);

// The text of the first `kept` reports in `report_text`, and a last line saying how many more
// were left out. Threads racing on a tile each report every access until they reach a barrier,
// tens of thousands of reports in a launch (44 MB for one planted flash3 race): the first says
// what is wrong, a few show its extent, the rest would bloat the result's details.
std::string first_reports(const std::string& report_text, size_t kept);

}  // namespace attnbench::emu
