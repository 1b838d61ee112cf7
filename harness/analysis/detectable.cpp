// The detectable change (detectable.h): the rule's confirmation as a small Markov chain over
// nightlies, solved for the change by bisection.
#include "harness/analysis/detectable.h"

#include <cmath>
#include <cstddef>

namespace attnbench {
namespace {

// One nightly's chances at a slowdown of `change`. It advances when its run trips clear and its
// rerun trips, or its run trips unclear and its rerun is clean and trips (the rerun as a run of
// the history: clear at the history's share, tripping at the clear runs' rate); it holds an open
// suspicion when its run trips unclear and its rerun is unclear too (ambiguous); else it ends one.
struct Nightly {
  double clear_trip = 0;    // P(clear and tripped)
  double unclear_trip = 0;  // P(unclear and tripped)
  double unclear = 0;       // P(unclear)
  double rerun_trip = 0;    // P(tripped) of a clear rerun
  double advance() const {
    return (clear_trip + unclear_trip * (1 - unclear)) * rerun_trip;
  }
  double hold() const { return unclear_trip * unclear; }
};

Nightly nightly_at(const DetectionNoise& noise, double change) {
  Nightly nightly;
  if (noise.deviations.size() >= static_cast<size_t>(kMinDetectionRuns) &&
      noise.clear.size() == noise.deviations.size()) {
    const double runs = static_cast<double>(noise.deviations.size());
    for (size_t i = 0; i < noise.deviations.size(); ++i) {
      const bool tripped = change + noise.deviations[i] > noise.threshold;
      (noise.clear[i] ? nightly.clear_trip : nightly.unclear_trip) += tripped ? 1 / runs : 0;
      nightly.unclear += noise.clear[i] ? 0 : 1 / runs;
    }
    const double clear = 1 - nightly.unclear;
    nightly.rerun_trip = clear > 0 ? nightly.clear_trip / clear : 0;
    return nightly;
  }
  // A normal deviation of the spread, every run clear.
  const double spread = noise.spread > 0 ? noise.spread : 1e-12;
  nightly.clear_trip = 0.5 * std::erfc((noise.threshold - change) / (spread * std::sqrt(2.0)));
  nightly.rerun_trip = nightly.clear_trip;
  return nightly;
}

}  // namespace

double confirmation_probability(const DetectionNoise& noise, double change, int nightlies) {
  const Nightly nightly = nightly_at(noise, change);
  const double advance = nightly.advance();
  const double hold = nightly.hold();
  // Before each nightly: nothing open, or (host-timed) a suspicion open; and confirmed.
  double idle = 1, suspected = 0, confirmed = 0;
  for (int night = 0; night < nightlies; ++night) {
    if (noise.host_timed) {
      confirmed += suspected * advance;
      const double opened = idle * advance;
      idle += suspected * (1 - advance - hold) - opened;
      suspected = suspected * hold + opened;
    } else {
      confirmed += idle * advance;
      idle -= idle * advance;
    }
  }
  return confirmed;
}

Detectable detectable_change(const DetectionNoise& noise) {
  const auto smallest = [&](int nightlies) {
    if (confirmation_probability(noise, kMaxDetectable, nightlies) < kDetectionPower) {
      return kBlind;
    }
    double low = 0, high = kMaxDetectable;
    for (int step = 0; step < 50; ++step) {  // to well under 0.01 %
      const double middle = 0.5 * (low + high);
      (confirmation_probability(noise, middle, nightlies) >= kDetectionPower ? high : low) = middle;
    }
    return high;
  };
  return {smallest(1), smallest(3)};
}

}  // namespace attnbench
