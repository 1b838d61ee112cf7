"""gpu-check's experiments (`ci/gpu-check.sh OUTDIR --experiment NAME`): runs that answer a
kernel's open question on a GPU rather than judge GPU-CLAIMS.md. One so far, `flash3` (issue 38):

  flash3-rounds  cuda.flash3's stages and variants beside cudnn.sdpa at the figure shape and at
                 seqlen 16k causal, timed round-robin (suites/gpu-flash3-experiment.toml); every
                 sample keeps its SM clock and clock-event reasons (NVML, once per repetition).
                 Among the variants, cuda.flash3[probe=clock64] stores its consumer warpgroups'
                 clocks per key tile in each wait (the K and V stages, the turn, S, P V).
  flash3-ncu     Nsight Compute on four variants at the figure shape, where ncu exists, with the
                 chip's own clock (--clock-control none): tensor-pipe activity, L2 and SM
                 throughput, the warp stall reasons; the raw CSV travels in the logs.

The summary gives each result's TFLOP/s, its ratio to cudnn.sdpa in the same run and shape, its
median SM clock and clock range, the probe's waits per key tile, and the ncu metrics per variant. An experiment has its own plan
(`--plan --experiment flash3`) and budget, separate from the claims' check.
"""

import csv
import io
import json
import statistics

from gpucheck.claims import TERA

EXPERIMENTS = ("flash3",)
FLASH3_SUITE = "gpu-flash3-experiment"
# The suite names families; variants run where --kernels names them.
FLASH3_KERNELS = "*,cuda.flash3[*]"
FLASH3_BASELINE = "cudnn.sdpa"
# The variants ncu profiles: the default, the stage ring of 2, and the two earlier schedules.
NCU_KERNELS = ("cuda.flash3", "cuda.flash3[stages=2]", "cuda.flash3_ws", "cuda.flash3_pingpong")
NCU_SHAPE = "b=2,hq=16,s=8192,d=128,dtype=bf16"
NCU_SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis",
                "WarpStateStats")
# One process per variant: the host's reference at 16k tokens (about 6 s), then one launch
# replayed once per section pass. A lead until a GPU run measures it.
NCU_CALL_S = 25.0
ROUNDS_CASE_TIMEOUT_S = 30
# What the summary shows of ncu's raw page, by metric-name prefix, in this order.
NCU_SHOWN = (("gpu__time_duration.sum", "duration"),
             ("sm__cycles_elapsed.avg.per_second", "SM clock"),
             ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput %"),
             ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput %"),
             ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
              "memory throughput %"),
             ("sm__pipe_tensor_op", "tensor pipe %"))
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALLS_SHOWN = 4


def ncu_command(ncu, log_file, attnbench_argv):
    """Nsight Compute over one attnbench process: the flash3 family's second matching launch (the
    first is the check's), every section's raw metrics as CSV."""
    sections = [a for s in NCU_SECTIONS for a in ("--section", s)]
    return [ncu, "--clock-control", "none", "--target-processes", "all",
            "--kernel-name", "regex:flash3", "--launch-skip", "1", "--launch-count", "1",
            *sections, "--csv", "--page", "raw", "--log-file", str(log_file), *attnbench_argv]


def parse_ncu_raw(text):
    """ncu --csv --page raw: a header row of metric names, a row of units, then one row per
    profiled launch. Returns [{metric: (value, unit)}], one per launch; [] when nothing parses."""
    rows = [row for row in csv.reader(io.StringIO(text)) if row]
    start = next((i for i, row in enumerate(rows) if row and row[0] == "ID"), None)
    if start is None or len(rows) < start + 3:
        return []
    header, units = rows[start], rows[start + 1]
    launches = []
    for row in rows[start + 2:]:
        if len(row) != len(header):
            continue
        launches.append({name: (value, units[i] if i < len(units) else "")
                         for i, (name, value) in enumerate(zip(header, row))})
    return launches


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def ncu_findings(launch):
    """The shown metrics of one launch, then its largest stall reasons: [(label, text)]."""
    findings = []
    for prefix, label in NCU_SHOWN:
        name = next((n for n in sorted(launch) if n.startswith(prefix)), None)
        if name is not None:
            value, unit = launch[name]
            findings.append((label, f"{value} {unit}".strip()))
    stalls = sorted(((number(v), n[len(STALL_PREFIX):]) for n, (v, _) in launch.items()
                     if n.startswith(STALL_PREFIX) and number(v) is not None), reverse=True)
    for value, reason in stalls[:STALLS_SHOWN]:
        findings.append((f"stall {reason}", f"{value:g}"))
    return findings


# ---- the summary ---------------------------------------------------------------------------------

def _clock_range(samples):
    clocks = [s["sm_clock_mhz"] for s in samples if s.get("sm_clock_mhz") is not None]
    return f"{min(clocks):.0f}-{max(clocks):.0f}" if clocks else "-"


def _reasons(samples):
    seen = sorted({r for s in samples for r in (s.get("clock_reasons") or "").split(",") if r})
    return ", ".join(seen) or "none"


def _shape_key(r):
    return (r.get("shape") or "", r.get("pass", "fwd"))


def rounds_rows(results, samples):
    """Each result of the rounds' run: kernel, shape, status, TFLOP/s, its ratio to cudnn.sdpa
    of the same shape, the median and range of its samples' SM clocks, their clock reasons."""
    by_result = {}
    for s in samples:
        by_result.setdefault(s["result_id"], []).append(s)
    baseline = {_shape_key(r): r.get("flops_per_s") for r in results
                if r["kernel"] == FLASH3_BASELINE and r["status"] == "passed"}
    rows = []
    for r in results:
        mine = by_result.get(r["id"], [])
        rate, base = r.get("flops_per_s"), baseline.get(_shape_key(r))
        ratio = f"{rate / base:.3f}x" if rate and base else "-"
        clocks = [s["sm_clock_mhz"] for s in mine if s.get("sm_clock_mhz") is not None]
        median = f"{statistics.median(clocks):.0f}" if clocks else "-"
        rows.append([r["kernel"], r.get("shape") or "", r["status"],
                     "-" if rate is None else f"{rate / TERA:.1f}", ratio, median,
                     _clock_range(mine), _reasons(mine), len(mine)])
    return rows


def probe_rows(results):
    """The clock probe's results (cuda.flash3[probe=clock64]: clocks in its details): per shape,
    each wait's SM clocks per key tile of one consumer warpgroup and its share of the mainloop."""
    rows = []
    for r in results:
        try:
            probe = json.loads(r.get("details_json") or "{}").get("clock_probe")
        except (json.JSONDecodeError, AttributeError):
            probe = None
        if not probe:
            continue
        per_tile = probe.get("per_tile", {})
        mainloop = per_tile.get("mainloop") or 0
        for event, clocks in per_tile.items():
            share = f"{100 * clocks / mainloop:.1f} %" if mainloop else "-"
            rows.append([r["kernel"], r.get("shape") or "", event, f"{clocks:.0f}", share])
    return rows


def ncu_rows(ncu_evidence):
    """evidence.json's ncu findings: one row per (variant, metric)."""
    rows = []
    for kernel, found in (ncu_evidence or {}).items():
        if "error" in found:
            rows.append([kernel, "error", found["error"]])
        for label, text in found.get("findings", []):
            rows.append([kernel, label, text])
    return rows
