// A folder of its own for the running test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "tests/support/test_names.h"

namespace attnbench {

// <temp>/<prefix>_<pid>_<test suite>_<test>: empty at the start, removed with everything in it
// at the end of the scope, however the test ends. Tests and parallel ctest processes never
// share one.
class ScratchDirectory {
 public:
  explicit ScratchDirectory(const std::string& prefix) {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name =
        test ? std::string(test->test_suite_name()) + "_" + test->name() : "no_test";
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "_" + std::to_string(::getpid()) + "_" + test_name_part(name));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The path of `name` inside it.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` inside it; returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file_path = file(name);
    std::ofstream(file_path) << text;
    return file_path;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace attnbench
