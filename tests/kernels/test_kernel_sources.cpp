// The rules that keep `emu` running the GPU's code (issue 14, "One code path"), over every source
// under kernels/cuda/ except common/, which alone holds both bodies of what differs, and the
// test-only CUDA kernels beside the tests (tests/test_kernels/):
//   - no inline PTX (asm): every instruction goes through common/ptx.cuh's wrappers;
//   - no __shared__ declarations: host-compiled, a block-scope one would be one copy per emulated
//     thread; shared memory comes through common/shared.cuh's macros;
//   - no <<<...>>> launches: common/launch.cuh's launch_kernel;
//   - no CUDA header includes and no mention of ATTNBENCH_EMU: common/cuda_api.h decides.
// Each rule also meets a fixture that breaks it, so a rule that matches nothing fails here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace attnbench {
namespace {

namespace fs = std::filesystem;

struct Rule {
  const char* name;
  std::regex pattern;
};

const std::vector<Rule>& rules() {
  static const std::vector<Rule> kRules = {
      {"inline PTX (use kernels/cuda/common/ptx.cuh)", std::regex(R"(\b(asm|__asm__)\b)")},
      {"__shared__ declaration (use ATTNBENCH_SHARED / ATTNBENCH_DYNAMIC_SHARED)",
       std::regex(R"(\b__shared__\b)")},
      {"<<<...>>> launch (use launch_kernel)", std::regex(R"(<<<)")},
      {"CUDA header include (include kernels/cuda/common/cuda_api.h)",
       std::regex(R"(#\s*include\s*<cuda)")},
      {"ATTNBENCH_EMU outside kernels/cuda/common/", std::regex(R"(\bATTNBENCH_EMU\b)")},
  };
  return kRules;
}

// Line comments are dropped, so a comment may name what the rules forbid.
std::string without_line_comments(const std::string& line) {
  const size_t comment = line.find("//");
  return comment == std::string::npos ? line : line.substr(0, comment);
}

std::vector<std::string> violations(const std::string& name, const std::string& text) {
  std::vector<std::string> found;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string code = without_line_comments(line);
    for (const Rule& rule : rules()) {
      if (std::regex_search(code, rule.pattern)) {
        found.push_back(name + ":" + std::to_string(number) + ": " + rule.name);
      }
    }
  }
  return found;
}

std::string read_file(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(KernelSources, NoKernelBypassesTheCommonHeaders) {
  const fs::path source = ATTNBENCH_SOURCE_DIR;
  int files = 0;
  std::vector<std::string> found;
  for (const fs::path& root : {source / "kernels" / "cuda", source / "tests" / "test_kernels"}) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root)) {
      const fs::path& path = entry.path();
      if (!entry.is_regular_file() || path.parent_path().filename() == "common") continue;
      const std::string extension = path.extension().string();
      if (extension != ".cu" && extension != ".cuh" && extension != ".h" && extension != ".cpp")
        continue;
      ++files;
      for (std::string& v : violations(fs::relative(path, source).string(), read_file(path))) {
        found.push_back(std::move(v));
      }
    }
  }
  EXPECT_GE(files, 25) << "kernels/cuda/ should hold the in-house kernels' sources";
  for (const std::string& v : found) ADD_FAILURE() << v;
}

TEST(KernelSources, EachRuleFlagsASourceThatBreaksIt) {
  const std::vector<std::string> fixtures = {
      R"(  asm volatile("cp.async.commit_group;\n" ::: "memory");)",
      "  __shared__ float tile[64][33];",
      "  extern __shared__ unsigned char bytes[];",
      "  kernel<<<grid, 256, 0, stream>>>(params);",
      "#include <cuda_runtime.h>",
      "#if defined(ATTNBENCH_EMU)",
  };
  for (const std::string& fixture : fixtures) {
    EXPECT_EQ(violations("fixture", fixture).size(), 1u) << fixture;
  }
  EXPECT_TRUE(violations("fixture", "  // no asm, no __shared__, no <<<: see common/").empty());
  EXPECT_TRUE(
      violations("fixture", "  launch_kernel(kernel, grid, 256, 0, stream, params);").empty());
}

}  // namespace
}  // namespace attnbench
