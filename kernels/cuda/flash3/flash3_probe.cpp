#include "kernels/cuda/flash3/flash3_probe.h"

#include <nlohmann/json.hpp>

namespace attnbench::flash3 {

std::string probe_details(const std::vector<ProbeRecord>& records) {
  uint64_t warpgroups = 0;
  uint64_t key_tiles = 0;
  uint64_t clocks[kProbeEvents] = {};
  for (const ProbeRecord& record : records) {
    if (record.key_tiles == 0) continue;  // a block with every key masked runs no mainloop
    ++warpgroups;
    key_tiles += record.key_tiles;
    for (int event = 0; event < kProbeEvents; ++event) clocks[event] += record.clocks[event];
  }
  nlohmann::json per_tile = nlohmann::json::object();
  for (int event = 0; event < kProbeEvents; ++event) {
    per_tile[probe_event_name(event)] =
        key_tiles == 0 ? 0.0 : static_cast<double>(clocks[event]) / static_cast<double>(key_tiles);
  }
  const nlohmann::json probe = {
      {"unit", "SM clocks (clock64) per key tile of one consumer warpgroup"},
      {"warpgroups", warpgroups},
      {"key_tiles", key_tiles},
      {"per_tile", per_tile},
  };
  return nlohmann::json{{"clock_probe", probe}}.dump();
}

}  // namespace attnbench::flash3
