#include "kernels/emu/sanitizer_report.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

namespace attnbench::emu {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "    #0 0x4f2a in f(int) /src/kernels/cuda/naive.cu:211:9" (ASan) or
// "    #0 f(int) /src/kernels/cuda/naive.cu:211:9 (attnbench+0x4f2a)" (TSan).
const std::regex kFrame(R"(^\s+#\d+ (?:0x[0-9a-f]+ in )?.+ ([^\s:]+):(\d+)(?::\d+)?(?: \(.*\))?$)");

// The access's source line: its first frame in a kernel's own code, outside the emulator
// (kernels/emu/), the PTX wrappers and launches every kernel shares (kernels/cuda/common/), the
// standard library and the sanitizer's runtime; else the first frame with a line at all.
struct Frames {
  std::string kernel_site;
  std::string any_site;
  std::string site() const { return !kernel_site.empty() ? kernel_site : any_site; }
};

bool is_machinery(const std::string& file) {
  for (const char* part : {"kernels/emu/", "kernels/cuda/common/", "/include/c++/", "/usr/include/",
                           "sanitizer", "compiler-rt"}) {
    if (file.find(part) != std::string::npos) return true;
  }
  return false;
}

// Reads the frames that start at lines[i]; leaves i on the first line after them.
Frames read_frames(const std::vector<std::string>& lines, size_t& i) {
  Frames frames;
  std::smatch match;
  for (; i < lines.size() && std::regex_match(lines[i], match, kFrame); ++i) {
    const std::string file = match[1];
    const std::string site = base_name(file) + ":" + match[2].str();
    if (frames.any_site.empty()) frames.any_site = site;
    if (frames.kernel_site.empty() && !is_machinery(file)) frames.kernel_site = site;
  }
  return frames;
}

// Where `address` lies among the case's buffers: "at byte 12 of q", "4 bytes past the end of
// out", "8 bytes before the start of k"; "" when no buffer is near.
std::string describe_address(uintptr_t address, const std::vector<Allocation>* buffers) {
  if (buffers == nullptr) return {};
  constexpr uintptr_t kNear = 64 * 1024;
  std::string best;
  uintptr_t best_distance = kNear;
  for (const Allocation& buffer : *buffers) {
    const auto begin = reinterpret_cast<uintptr_t>(buffer.begin);
    const uintptr_t end = begin + buffer.bytes;
    if (address >= begin && address < end)
      return "at byte " + std::to_string(address - begin) + " of " + buffer.name;
    if (address >= end && address - end < best_distance) {
      best_distance = address - end;
      best = std::to_string(best_distance) + " bytes past the end of " + buffer.name;
    }
    if (address < begin && begin - address < best_distance) {
      best_distance = begin - address;
      best = std::to_string(best_distance) + " bytes before the start of " + buffer.name;
    }
  }
  return best;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// ---- ThreadSanitizer -------------------------------------------------------------------------

struct Access {
  bool previous = false;
  std::string kind;  // "write", "read", "atomic write", ...
  std::string bytes;
  std::string thread;  // "T12" or "main thread"
  std::string site;
};

std::string thread_text(const std::string& thread,
                        const std::map<std::string, std::string>& names) {
  const auto named = names.find(thread);
  if (named != names.end() && !named->second.empty()) return named->second;
  return thread == "main thread" ? "the host thread" : "host thread " + thread;
}

std::string tsan_line(const std::vector<std::string>& lines, size_t header,
                      const std::string& what) {
  static const std::regex access_line(
      R"(^  (Previous )?((?:[Aa]tomic )?(?:[Ww]rite|[Rr]ead)) of size (\d+) at 0x[0-9a-f]+ by (main thread|thread (T\d+)).*$)");
  static const std::regex thread_line(R"(^  Thread (T\d+) '([^']*)'.*$)");
  std::vector<Access> accesses;
  std::map<std::string, std::string> names;
  std::smatch match;
  for (size_t i = header + 1; i < lines.size() && lines[i].rfind("SUMMARY:", 0) != 0;) {
    if (std::regex_match(lines[i], match, access_line)) {
      Access access;
      access.previous = match[1].matched;
      access.kind = lower(match[2]);
      access.bytes = match[3];
      access.thread = match[5].matched ? match[5].str() : "main thread";
      ++i;
      access.site = read_frames(lines, i).site();
      accesses.push_back(access);
      continue;
    }
    if (std::regex_match(lines[i], match, thread_line)) names[match[1]] = match[2];
    ++i;
  }
  if (accesses.size() < 2 || what != "data race") {
    std::string line = what;
    if (!accesses.empty())
      line += ": " + thread_text(accesses[0].thread, names) + " at " + accesses[0].site;
    return line;
  }
  const Access& now = accesses[0];
  const Access& before = accesses[1];
  const std::string verb = now.kind.find("write") != std::string::npos ? "writes" : "reads";
  const std::string before_verb = before.kind.find("write") != std::string::npos ? "wrote" : "read";
  return "data race: " + thread_text(now.thread, names) + " " + verb + " " + now.bytes +
         " bytes at " + now.site + "; " + thread_text(before.thread, names) + " " + before_verb +
         " them at " + before.site + ", and no barrier or warp sync orders the two";
}

// ---- AddressSanitizer ------------------------------------------------------------------------

std::string asan_line(const std::vector<std::string>& lines, size_t header, const std::string& kind,
                      uintptr_t address, const std::string& faulting_thread,
                      const std::vector<Allocation>* buffers) {
  static const std::regex access_line(
      R"(^(READ|WRITE) of size (\d+) at 0x[0-9a-f]+ thread (T\d+).*$)");
  std::smatch match;
  for (size_t i = header + 1; i < lines.size(); ++i) {
    if (!std::regex_match(lines[i], match, access_line)) continue;
    const bool write = match[1] == "WRITE";
    const std::string bytes = match[2];
    const std::string os_thread = match[3];
    ++i;
    const std::string site = read_frames(lines, i).site();
    const std::string where = describe_address(address, buffers);
    const std::string who = faulting_thread.empty() ? "host thread " + os_thread : faulting_thread;
    std::string line = std::string(write ? "out-of-bounds write" : "out-of-bounds read") +
                       " (ASan " + kind + "): " + who + (write ? " writes " : " reads ") + bytes +
                       " bytes at " + site;
    line += where.empty() ? ", outside every buffer of the case" : ", " + where;
    return line;
  }
  return "AddressSanitizer: " + kind;
}

}  // namespace

std::string one_line_report(const std::string& report_text, const std::string& faulting_thread,
                            const std::vector<Allocation>* buffers) {
  static const std::regex tsan_header(R"(^WARNING: ThreadSanitizer: (.*?)(?: \(pid=\d+\))?$)");
  static const std::regex asan_header(
      R"(^.*ERROR: AddressSanitizer: (\S+) on (?:unknown )?address (0x[0-9a-f]+).*$)");
  const std::vector<std::string> lines = lines_of(report_text);
  std::smatch match;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (std::regex_match(lines[i], match, tsan_header)) return tsan_line(lines, i, match[1]);
    if (std::regex_match(lines[i], match, asan_header)) {
      const auto address =
          static_cast<uintptr_t>(std::strtoull(match[2].str().c_str(), nullptr, 16));
      return asan_line(lines, i, match[1], address, faulting_thread, buffers);
    }
  }
  return {};  // not a report: a note about the sanitizer's own state, which fails nothing
}

namespace {

// Where each report starts: the line of its header, or of the separator just above it.
std::vector<size_t> report_starts(const std::string& text) {
  std::vector<size_t> starts;
  for (const char* header : {"WARNING: ThreadSanitizer: ", "ERROR: AddressSanitizer: "}) {
    for (size_t at = text.find(header); at != std::string::npos; at = text.find(header, at + 1)) {
      size_t line = text.rfind('\n', at);
      line = line == std::string::npos ? 0 : line + 1;
      if (line >= 2) {  // the separator line of '=' above it belongs to this report
        const size_t previous = text.rfind('\n', line - 2);
        const size_t begin = previous == std::string::npos ? 0 : previous + 1;
        if (line - 1 > begin &&
            text.find_first_not_of('=', begin) == line - 1) {
          line = begin;
        }
      }
      starts.push_back(line);
    }
  }
  std::sort(starts.begin(), starts.end());
  return starts;
}

}  // namespace

std::string first_reports(const std::string& report_text, size_t kept) {
  const std::vector<size_t> starts = report_starts(report_text);
  if (starts.size() <= kept) return report_text;
  const size_t end = starts[kept];
  return report_text.substr(0, end) + "[attnbench: " + std::to_string(starts.size() - kept) +
         " more reports (" + std::to_string(report_text.size() - end) + " bytes) left out]\n";
}

}  // namespace attnbench::emu
