// Runs as the store keeps them, for the tests that run cases and read the database afterwards.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/store/store.h"

namespace attnbench {

// The newest run stored in `db`.
inline Result<StoredRun> load_latest_run(const std::string& db) {
  Result<std::unique_ptr<Store>> store = Store::open(db);
  if (!store) return store.status();
  const Result<std::optional<int64_t>> latest = (*store)->latest_run_id();
  if (!latest) return latest.status();
  if (!*latest) return Status::Error("no run in " + db);
  return (*store)->load_run(**latest);
}

// The profiles stored in `db` (`attnbench profile`), by kernel, then by phase or kernel name.
inline std::map<std::string, std::map<std::string, ProfilePhaseRecord>> stored_profiles(
    const std::string& db) {
  std::map<std::string, std::map<std::string, ProfilePhaseRecord>> by_kernel;
  Result<std::unique_ptr<Store>> store = Store::open(db);
  EXPECT_TRUE(store) << store.status().message;
  if (!store) return by_kernel;
  Result<std::vector<ProfilePhaseRecord>> rows = (*store)->load_profiles();
  EXPECT_TRUE(rows) << rows.status().message;
  if (!rows) return by_kernel;
  for (const ProfilePhaseRecord& row : *rows) by_kernel[row.kernel][row.name] = row;
  return by_kernel;
}

// A case the check passed, as `attnbench check` judges one: checked, within its bound, no NaN,
// the canaries intact, bit-for-bit repeatable when the kernel says it is deterministic, and the
// extra memory measured.
inline void expect_passed(const ResultRecord& r, bool deterministic) {
  EXPECT_EQ(r.status, ResultStatus::passed) << r.message;
  EXPECT_TRUE(r.check.checked);
  EXPECT_LE(r.check.max_abs_error, r.check.bound);
  EXPECT_EQ(r.check.nan_count, 0);
  EXPECT_TRUE(r.check.canaries_ok);
  if (deterministic) {
    EXPECT_TRUE(r.check.repeatable);
  }
  EXPECT_GE(r.extra_memory_bytes, 0);
}

}  // namespace attnbench
