#!/usr/bin/env python3
"""How a host's noise reaches the kernels: one line per database of repeated runs of one suite.

    python3 ci/noise_spread.py DB [DB ...]

Each database holds runs of the same suite on the same host (ci/noise-check.sh writes one for
back-to-back timing and one for interleaved timing). Per series (a kernel on a problem), every
passed run's median is taken against the series' median over the runs (log); per run, the run's
level is the median of those deviations over all its series; per kernel (and pass) and run, the
kernel's own move is the median of its series' deviations less the run's level. Printed per
database, as robust standard deviations (1.4826 x MAD) in percent:

  levels      the runs' levels: what moved every series together (one level per run takes it out)
  kernels     the kernels' own moves: what one level for the run cannot take out, and what the
              regression gate's kernel-wide aggregates see as noise
  series      each series' remaining move, beyond its run's level and its kernel's move (the
              median over the series)

Interleaving is meant to shrink the last two: a host's drift during a problem reaches all of its
kernels alike.
"""
import math
import sqlite3
import statistics
import sys
from collections import defaultdict


def robust_sd(values):
    if len(values) < 2:
        return float("nan")
    center = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - center) for v in values)


def kernel_of(series_key):
    """kernel|shape|distribution|device|build -> 'kernel' or 'kernel (pass)'."""
    fields = series_key.split("|")
    passes = [part[len("pass="):] for part in fields[1].split(",") if part.startswith("pass=")]
    return fields[0] + (f" ({passes[0]})" if passes and passes[0] != "fwd" else "")


def spreads(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT run_id, series_key, median_s FROM results "
        "WHERE status = 'passed' AND median_s > 0").fetchall()
    by_series = defaultdict(dict)
    for run_id, key, median_s in rows:
        by_series[key][run_id] = math.log(median_s)
    runs = sorted({run_id for run_id, _, _ in rows})
    deviation = defaultdict(dict)  # run -> series -> log change against the series' median
    for key, times in by_series.items():
        if len(times) < max(3, len(runs) // 2):
            continue
        center = statistics.median(times.values())
        for run_id, value in times.items():
            deviation[run_id][key] = value - center
    levels, kernel_moves = {}, {}
    series_rest = defaultdict(list)
    for run_id, by_key in deviation.items():
        levels[run_id] = statistics.median(by_key.values())
        by_kernel = defaultdict(list)
        for key, value in by_key.items():
            by_kernel[kernel_of(key)].append(value - levels[run_id])
        for kernel, values in by_kernel.items():
            kernel_moves[(kernel, run_id)] = statistics.median(values)
        for key, value in by_key.items():
            series_rest[key].append(value - levels[run_id] - kernel_moves[(kernel_of(key), run_id)])
    percent = lambda x: 100 * (math.exp(x) - 1)
    return {
        "runs": len(runs),
        "series": len(series_rest),
        "levels": percent(robust_sd(list(levels.values()))),
        "level_range": (percent(min(levels.values())), percent(max(levels.values()))),
        "kernels": percent(robust_sd(list(kernel_moves.values()))),
        "series_rest": percent(statistics.median(robust_sd(v) for v in series_rest.values()
                                                 if len(v) >= 3)),
    }


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for path in paths:
        s = spreads(path)
        print(f"{path}: {s['runs']} runs, {s['series']} series; levels sd {s['levels']:.2f} % "
              f"({s['level_range'][0]:+.1f} to {s['level_range'][1]:+.1f} %), kernels' own "
              f"moves sd {s['kernels']:.2f} %, each series beyond both sd {s['series_rest']:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
