// ci/host_speed.cpp: the fixed work ci/test.sh times to learn how fast this host is, so that the
// tiers' budgets (stated for the reference host, docs/testing.md) are judged in that host's time.
// Hosts of the CI kind differ: two 2-core machines built the same tree in 376 s and 852 s.
//
// Do not edit: the reference time in ci/test.sh (host_speed_reference_s) was measured on this
// text. It is compiled (g++ -std=c++20 -O2, as the suite compiles: the standard library's
// headers, templates, optimization) and run (a branchy integer and floating-point loop, as the
// emulated device's tests run). It uses the standard library alone, so the project's own changes
// never move it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace {

using Value = std::variant<std::int64_t, double, std::string>;

// Template work for the compiler: a few containers and algorithms over a variant.
template <typename Key>
std::map<Key, std::vector<Value>> group(const std::vector<std::pair<Key, Value>>& items) {
  std::map<Key, std::vector<Value>> groups;
  for (const auto& [key, value] : items) groups[key].push_back(value);
  return groups;
}

std::string describe(const Value& value) {
  return std::visit(
      [](const auto& v) {
        std::ostringstream out;
        out << v;
        return out.str();
      },
      value);
}

// The run: a random walk through a hash map and a softmax-like sum, fixed seed and size.
double work(int rounds) {
  std::mt19937_64 random(12345);
  std::unordered_map<std::uint64_t, double> table;
  double total = 0.0;
  for (int i = 0; i < rounds; ++i) {
    const std::uint64_t key = random() % 4096;
    double& cell = table[key];
    cell = cell * 0.5 + std::exp(-static_cast<double>(key % 97) / 13.0);
    if ((key & 3) == 0) total += cell;
    else if ((key & 3) == 1) total -= cell * 0.25;
    else total = std::max(total, cell);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 80000000;
  std::vector<std::pair<std::string, Value>> items;
  for (int i = 0; i < 64; ++i) {
    items.emplace_back("k" + std::to_string(i % 7), Value{static_cast<std::int64_t>(i)});
    items.emplace_back("d" + std::to_string(i % 5), Value{i * 0.5});
  }
  std::size_t described = 0;
  for (const auto& [key, values] : group(items)) {
    for (const Value& v : values) described += describe(v).size();
  }
  const std::regex number("[0-9]+");
  std::set<std::string> seen;
  for (const auto& [key, value] : items) {
    if (std::regex_search(key, number)) seen.insert(key);
  }
  std::printf("%.6f %zu %zu\n", work(rounds), described, seen.size());
  return 0;
}
