#include "harness/cli/command_support.h"

#include <cstdio>

namespace attnbench {

std::unique_ptr<Store> open_store(const std::string& db_path, std::ostream& err) {
  Status status;
  std::unique_ptr<Store> store = Store::open(db_path, status);
  if (!store) err << "error: " << status.message << "\n";
  return store;
}

std::optional<int64_t> resolve_run(Store& store, const std::string& text, const std::string& what,
                                   std::ostream& err) {
  Status status;
  if (text == "latest") {
    std::optional<int64_t> latest = store.latest_primary_run_id(status);
    if (!latest) {
      err << "error: " << (status ? "no run stored in " + store.path() : status.message) << "\n";
    }
    return latest;
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

std::string short_sha(const std::string& sha) { return sha.substr(0, 10); }

std::vector<double> sample_times(const std::vector<Sample>& samples) {
  std::vector<double> times;
  for (const Sample& s : samples) times.push_back(s.time_s);
  return times;
}

}  // namespace attnbench
