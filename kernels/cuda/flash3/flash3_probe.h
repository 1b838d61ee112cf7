// cuda.flash3[probe=clock64]: cuda.flash3 with the SM's clock read around each wait of a consumer
// warpgroup's turns (issue 38's GPU experiment: where a tile's time goes). Each consumer warpgroup
// sums, over its key tiles, the clocks it spent waiting for a K stage, a V stage, its turn on the
// tensor cores, its S wgmma and its P V wgmma, beside its whole time in the mainloop; one thread
// of it writes one ProbeRecord. The plan turns the records into clocks per key tile
// (probe_details). Host and device code include this header (no CUDA types in it).
//
// The reads perturb what they measure (each is a CS2R the scheduler must keep in place), so the
// probe's own TFLOP/s is not cuda.flash3's: the experiment shows it beside the unprobed kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnbench::flash3 {

// What a consumer warpgroup's clocks are spent on, in ProbeRecord::clocks' order.
enum ProbeEvent : int {
  kProbeKFull,     // k_of.wait_full: K(j) has not landed
  kProbeVFull,     // v_of.wait_full: V(j-1) has not landed
  kProbeTurn,      // the named barrier: the other consumer still holds the tensor cores
  kProbeScores,    // wgmma.wait_group 1: S(j) still computing
  kProbeOutput,    // wgmma.wait_group 0: P(j-1) V(j-1) still computing
  kProbeMainloop,  // everything from the first turn to the last P V's wait
  kProbeEvents,
};

// The JSON names of the events (probe_details), in ProbeEvent's order.
inline const char* probe_event_name(int event) {
  static const char* const kNames[kProbeEvents] = {"k_full_wait", "v_full_wait", "turn_wait",
                                                   "scores_wait", "output_wait", "mainloop"};
  return kNames[event];
}

// One consumer warpgroup's record: its key tiles and its clocks in each event, summed over them.
struct ProbeRecord {
  uint64_t key_tiles;
  uint64_t clocks[kProbeEvents];
  uint64_t unused;  // a 64-byte record
};
static_assert(sizeof(ProbeRecord) == 64, "one record is one 64-byte line");

// The records of a launch's consumer warpgroups (two per CTA) as the result's details: a JSON
// object {"clock_probe": {...}} with each event's clocks per key tile, summed over the warpgroups
// that visited a tile and divided by their tiles.
std::string probe_details(const std::vector<ProbeRecord>& records);

}  // namespace attnbench::flash3
