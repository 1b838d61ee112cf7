// PELT change points over a series' history, their penalty, and the despiking that keeps single
// spikes from costing a segment each: what `attnbench history` draws as a series' change points.
#pragma once

#include <cstddef>
#include <vector>

namespace attnbench {

// PELT (Killick, Fearnhead & Eckley 2012): the exact segmentation minimizing the sum over
// segments of their squared deviations from the segment mean, plus `penalty` per change point,
// pruned so the cost stays near linear. Returns the indices where new segments begin (sorted,
// never 0). Segments are at least `min_segment` values long.
std::vector<size_t> pelt_change_points(const std::vector<double>& values, double penalty,
                                       size_t min_segment = 2);
// Penalty for a mean shift with the noise estimated robustly from successive differences
// (insensitive to the steps themselves): 3 x sigma^2 x log(n), a little stiffer than BIC so
// that a noise wiggle is not a change point. sigma is at least `min_sigma`: for log times, the
// smallest change worth a segment (a short history underestimates its own noise).
double change_point_penalty(const std::vector<double>& values, double min_sigma = 0);
// Centered running median of 5 clamped to +-4 robust sigmas: removes single-run spikes
// (throttled runs) that would otherwise cost PELT a segment each, and keeps steps and drifts.
std::vector<double> despike(const std::vector<double>& values);

}  // namespace attnbench
