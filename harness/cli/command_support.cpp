#include "harness/cli/command_support.h"

#include <cstdio>

namespace attnbench {

std::unique_ptr<Store> open_store(const std::string& db_path, std::ostream& err) {
  Result<std::unique_ptr<Store>> store = Store::open(db_path);
  if (!store) {
    err << "error: " << store.status().message << "\n";
    return nullptr;
  }
  return std::move(*store);
}

std::optional<int64_t> resolve_run(Store& store, const std::string& text, const std::string& what,
                                   std::ostream& err) {
  if (text == "latest") {
    const Result<std::optional<int64_t>> latest = store.latest_primary_run_id();
    if (!latest) {
      err << "error: " << latest.status().message << "\n";
      return std::nullopt;
    }
    if (!*latest) err << "error: no run stored in " << store.path() << "\n";
    return *latest;
  }
  try {
    size_t used = 0;
    const int64_t id = std::stoll(text, &used);
    if (used == text.size() && id > 0) return id;
  } catch (const std::exception&) {
  }
  err << "error: " << what << " '" << text << "': accepted: a positive run id or 'latest'\n";
  return std::nullopt;
}

std::string scientific(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", value);
  return text;
}

}  // namespace attnbench
