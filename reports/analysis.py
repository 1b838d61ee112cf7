"""What the page says, computed from the loaded rows: status counts, the triage list, speedups,
the fastest kernel per shape, history baselines, health and the run-to-run comparison. Plain
functions over plain data: no plotting and no HTML here."""

import datetime
import fnmatch
import hashlib
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from reports.db import FAILURE_STATUSES, STATUSES, parse_json_object, split_series_key

# The regression rule of DESIGN.md, as the history plots draw it: the baseline is the last
# kBaselineRuns good runs since the latest baseline reset; center = their median, spread =
# 1.4826 x MAD (the normal-consistent MAD) floored at 0.5 % of center; a run trips when it is
# slower than center by more than both 3 % and 4 spreads.
BASELINE_RUNS = 10
MAD_TO_SIGMA = 1.4826
SPREAD_FLOOR = 0.005
TRIP_CHANGE = 0.03
TRIP_SPREADS = 4

# A sample is suspect when its SM clock is this far below its device's median clock in the run:
# sustained tensor work runs at the power cap (normal), a throttled or boosting-off chip is far
# below it.
SUSPECT_CLOCK_FRACTION = 0.90
# Repetitions noisier than this (stddev / mean) make a median hard to compare across runs.
NOISY_CV = 0.05

# The reference kernel of the speedup heatmap (DESIGN: cuDNN's fused SDPA is the baseline).
BASELINE_KERNEL = "cudnn.sdpa"


def anchor(prefix, text):
    """A stable HTML id (and image file name) for any text from the database: a hash, so no
    database string ever reaches an attribute name or a path."""
    return prefix + "-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def parse_time(text):
    """The store's ISO 8601 UTC timestamps ("2026-12-02T14:00:37Z") as aware datetimes."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def run_duration(run):
    """Seconds from start to finish; None for a run that never finished."""
    if not run.get("finished_at"):
        return None
    return (parse_time(run["finished_at"]) - parse_time(run["started_at"])).total_seconds()


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def quantile(values, q):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]


def geometric_mean(values):
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def status_counts(results):
    counts = {status: 0 for status in STATUSES}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return counts


def flops_ceilings(results):
    """{(device_id, dtype): FLOP/s} as the harness used it: each result stores its throughput and
    its fraction of the calibrated ceiling of its dtype, so their ratio is that ceiling exactly
    (whatever fallback the harness chose for a dtype it did not calibrate)."""
    ratios = defaultdict(list)
    for result in results:
        if result.flops_per_s and result.fraction_of_peak_flops:
            ratios[(result.device_id, result.dtype)].append(
                result.flops_per_s / result.fraction_of_peak_flops)
    return {key: statistics.median(values) for key, values in ratios.items()}


# ---- small multiples: which panel and which line a result belongs to -------------------------

FP8_DTYPES = ("e4m3", "e5m2")


def panel_key(result):
    """dtype x head dim x mask: the grid of the throughput and memory plots."""
    head_dim = str(result.head_dim) if result.head_dim == result.head_dim_v else \
        f"{result.head_dim}/{result.head_dim_v}"
    return (result.dtype, head_dim, result.mask)


def panel_title(key):
    dtype, head_dim, mask = key
    return f"{dtype}, d={head_dim}, mask={mask}"


def _head_dim_order(head_dim):
    return [int(part) for part in head_dim.split("/")]


def panel_sort_key(key):
    return (key[0], _head_dim_order(key[1]), key[2])


def variant_label(result):
    """What else distinguishes a line inside a panel besides the kernel, in the CLI's words:
    GQA/MQA, sq != sk, layout, input distribution, FP8 output and scaling. Empty for the plain
    case. Batch is left out: suites keep the tokens per batch fixed, so batch follows seqlen."""
    parts = []
    if result.heads_q != result.heads_kv:
        group = result.heads_q // result.heads_kv
        parts.append("MQA" if result.heads_kv == 1 else f"GQA {group}:1")
    if result.seqlen_q != result.seqlen_k:
        parts.append(f"sq={result.seqlen_q}")
    if result.layout != "bshd":
        parts.append(result.layout)
    if result.distribution != "normal":
        parts.append(result.distribution)
    # The default output dtype is the input's, bf16 for FP8 inputs (reference/problem.cpp).
    default_output = "bf16" if result.dtype in FP8_DTYPES else result.dtype
    if result.output_dtype != default_output:
        parts.append(f"out={result.output_dtype}")
    if result.fp8_scaling != "none":
        parts.append(result.fp8_scaling)
    return ", ".join(parts)


# ---- speedup and fastest kernel --------------------------------------------------------------

@dataclass
class Speedups:
    kernels: list
    shapes: list  # case labels
    values: dict  # (kernel, shape) -> baseline time / kernel time
    against: dict  # shape -> the kernel it is measured against


def speedups(results):
    """Speedup over cudnn.sdpa per kernel and shape; over the fastest kernel of the shape where
    cuDNN has no time (a CPU run, or a shape cuDNN skipped)."""
    by_shape = defaultdict(dict)
    for result in results:
        if result.timed and result.status == "passed":
            by_shape[result.case_label][result.kernel] = result.median_s
    values, against = {}, {}
    for shape, times in by_shape.items():
        if BASELINE_KERNEL in times:
            reference_kernel = BASELINE_KERNEL
        else:
            reference_kernel = min(times, key=times.get)
        against[shape] = reference_kernel
        for kernel, time in times.items():
            values[(kernel, shape)] = times[reference_kernel] / time
    kernels = sorted({kernel for kernel, _ in values})
    return Speedups(kernels, sorted(by_shape, key=shape_orders(results).get), values, against)


def shape_orders(results):
    """{case label: sort key}: panels in order, then variants, then seqlen."""
    orders = {}
    for result in results:
        orders.setdefault(result.case_label, (panel_sort_key(panel_key(result)),
                                              variant_label(result), result.seqlen_k,
                                              result.case_label))
    return orders


@dataclass
class FastestRow:
    shape: str
    kernel: str
    median_s: float
    runner_up: str | None
    runner_up_s: float | None
    kernels_timed: int
    naive_beats_flash: bool

    @property
    def margin(self):
        return None if self.runner_up_s is None else self.runner_up_s / self.median_s


def fastest_per_shape(results):
    by_shape = defaultdict(list)
    for result in results:
        if result.timed and result.status == "passed":
            by_shape[result.case_label].append(result)
    rows = []
    for shape in sorted(by_shape, key=shape_orders(results).get):
        ranked = sorted(by_shape[shape], key=lambda r: r.median_s)
        best = ranked[0]
        runner_up = ranked[1] if len(ranked) > 1 else None
        flash_present = any("flash" in r.kernel for r in ranked)
        rows.append(FastestRow(shape, best.kernel, best.median_s,
                               runner_up.kernel if runner_up else None,
                               runner_up.median_s if runner_up else None, len(ranked),
                               "naive" in best.kernel and flash_present))
    return rows


# ---- history ---------------------------------------------------------------------------------

def alert_category(alert):
    """What an alert means for the plots and the baseline: regression, improvement, outlier,
    accuracy, status or other. The detector (harness/history.cpp) writes kind (performance,
    accuracy, status, kernel, run) and, from schema version 4, state (suspected, confirmed,
    outlier, improved, ambiguous, failed, missing, ...); older files have only kind and
    severity, so every word of the three is considered."""
    kind = (alert.get("kind") or "").lower()
    words = f"{kind} {alert.get('state') or ''} {alert.get('severity') or ''}".lower()
    if kind == "status" or "missing" in words:
        return "status"
    if "outlier" in words:
        return "outlier"
    if "improv" in words:
        return "improvement"
    if "accura" in words:
        return "accuracy"
    if kind in ("performance", "kernel") or any(
            word in words for word in ("regress", "suspect", "confirm", "ambiguous", "slow")):
        return "regression"
    return "other"


def annotation_applies(annotation, series_key):
    pattern = annotation.get("series_key", "")
    if any(mark in pattern for mark in "*?"):
        return fnmatch.fnmatchcase(series_key, pattern)
    return pattern == series_key


def annotation_run(annotation, runs):
    """The first run an annotation governs: stored from schema version 4 on, else the first run
    started after it was made."""
    if annotation.get("from_run_id"):
        return annotation["from_run_id"]
    created = annotation.get("created_at", "")
    for run in runs:
        if run["started_at"] >= created:
            return run["id"]
    return None


def baseline_of(good_medians):
    """(center, half width of the no-trip band) from the baseline runs' medians."""
    center = statistics.median(good_medians)
    mad = statistics.median(abs(m - center) for m in good_medians)
    spread = max(MAD_TO_SIGMA * mad, SPREAD_FLOOR * center)
    return center, max(TRIP_CHANGE * center, TRIP_SPREADS * spread)


def baseline_before(points, index, reset_runs, excluded_runs):
    """The baseline of point `index`: the last BASELINE_RUNS good runs before it since the
    latest baseline reset at or before it, as (center, half width); None without any.
    Good: passed, timed, and not itself flagged as a regression or outlier."""
    run_id = points[index][0]
    latest_reset = max((r for r in reset_runs if r <= run_id), default=None)
    window = []
    for previous_run, status, value, _ in reversed(points[:index]):
        if latest_reset is not None and previous_run < latest_reset:
            break
        if status == "passed" and value is not None and previous_run not in excluded_runs:
            window.append(value)
            if len(window) == BASELINE_RUNS:
                break
    return baseline_of(window) if window else None


@dataclass
class Series:
    key: str
    kernel: str
    shape: str
    distribution: str
    device: str
    build: str
    points: list  # (run_id, status, median_s or None, chip uuid), oldest first
    alerts: list = field(default_factory=list)  # every alert of the series, any run
    annotations: list = field(default_factory=list)  # with "run_id": where each takes effect
    reset_runs: list = field(default_factory=list)
    excluded_runs: set = field(default_factory=set)  # flagged runs: never in a baseline

    @property
    def case_label(self):
        return self.shape + ("" if self.distribution in ("normal", "") else
                             f" dist={self.distribution}")

    def band(self, index):
        return baseline_before(self.points, index, self.reset_runs, self.excluded_runs)

    def bands(self):
        return [self.band(index) for index in range(len(self.points))]

    def index_of_run(self, run_id):
        for index in range(len(self.points) - 1, -1, -1):
            if self.points[index][0] == run_id:
                return index
        return None

    def change_at(self, run_id):
        """The run's median against the baseline before it (+0.05 = 5 % slower)."""
        index = self.index_of_run(run_id)
        if index is None or self.points[index][2] is None:
            return None
        band = self.band(index)
        return None if band is None else self.points[index][2] / band[0] - 1

    @property
    def chip_changes(self):
        """Run ids where the series' chip differs from its previous result's."""
        return [current[0] for previous, current in zip(self.points, self.points[1:])
                if previous[3] and current[3] and previous[3] != current[3]]


def build_series(history, alerts, annotations, runs):
    """Series objects with their alerts, annotations, baseline resets and flagged runs."""
    alerts_by_key = defaultdict(list)
    for alert in alerts:
        alerts_by_key[alert["series_key"]].append(alert)
    series = {}
    for key, points in history.items():
        parts = split_series_key(key)
        item = Series(key, parts["kernel"], parts["shape"], parts["distribution"],
                      parts["device"], parts["build"], points, alerts_by_key.get(key, []))
        item.annotations = [dict(a, run_id=annotation_run(a, runs)) for a in annotations
                            if annotation_applies(a, key)]
        item.reset_runs = [a["run_id"] for a in item.annotations
                           if "reset" in a.get("kind", "") and a["run_id"] is not None]
        item.excluded_runs = {a["run_id"] for a in item.alerts
                              if alert_category(a) in ("regression", "outlier")}
        series[key] = item
    return series


# ---- triage ----------------------------------------------------------------------------------

# Lower is more severe. The detector's severities are error (gates the job), warning and info;
# the items computed here use the same words: "error" for a case that failed, crashed or timed
# out, "warning" for one that stopped running. Other words rank as a warning.
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
UNKNOWN_SEVERITY_RANK = 1
# Inside one severity: facts (status) first, then regressions, accuracy, the rest.
CATEGORY_ORDER = ("status", "regression", "accuracy", "other", "outlier", "improvement")

RUN_ENVIRONMENT = (
    ("git_sha", "commit"), ("git_dirty", "uncommitted changes"), ("build_type", "build type"),
    ("build_flags", "build flags"), ("compiler", "compiler"), ("cuda_runtime", "CUDA runtime"),
    ("cuda_driver", "driver"), ("cudnn", "cuDNN"), ("cudnn_frontend", "cudnn-frontend"),
    ("cublas", "cuBLAS"), ("blas", "BLAS"), ("host", "host"), ("cpu", "CPU"), ("os", "OS"))
DEVICE_ENVIRONMENT = (
    ("uuid", "chip"), ("name", "device"), ("sm_version", "SM version"), ("sm_count", "SMs"),
    ("clock_mhz", "clock (MHz)"), ("power_limit_w", "power limit (W)"), ("ecc", "ECC"),
    ("persistence", "persistence mode"), ("threads", "threads"))
# Median SM clocks further apart than this are reported as a clock difference.
CLOCK_DIFFERENCE = 0.05


def environment_differences(run_now, run_then, device_now, device_then, clock_now=None,
                            clock_then=None):
    """[(what, baseline value, this run's value)] for every field that differs."""
    differences = []
    for column, label in RUN_ENVIRONMENT:
        if column in run_now and column in run_then and run_now[column] != run_then[column]:
            then, now = run_then[column], run_now[column]
            if column == "git_sha":
                then, now = then[:12], now[:12]  # as git log --oneline shows commits
            differences.append((label, then, now))
    if device_now and device_then:
        for column, label in DEVICE_ENVIRONMENT:
            if device_now.get(column) != device_then.get(column):
                differences.append((label, device_then.get(column), device_now.get(column)))
    if clock_now and clock_then and abs(clock_now / clock_then - 1) > CLOCK_DIFFERENCE:
        differences.append(("median SM clock (MHz)", f"{clock_then:.0f}", f"{clock_now:.0f}"))
    return differences


@dataclass
class TriageItem:
    severity: str
    category: str
    what: str  # "performance confirmed", "crashed", "passed -> skipped", "missing"
    series_key: str
    kernel: str
    case_label: str
    device: str
    message: str
    details: list = field(default_factory=list)  # (name, value)
    environment: str = ""  # the detector's own account of what differs from its baseline
    baseline_run: int | None = None
    differences: list = field(default_factory=list)  # (what, baseline, now), computed here
    plot_anchor: str = ""

    @property
    def rank(self):
        return SEVERITY_RANK.get(self.severity.lower(), UNKNOWN_SEVERITY_RANK)

    @property
    def order(self):
        category = CATEGORY_ORDER.index(self.category) if self.category in CATEGORY_ORDER \
            else len(CATEGORY_ORDER)
        return (self.rank, category, self.kernel, self.case_label)


def _details_pairs(details_json):
    pairs = []
    for name, value in parse_json_object(details_json).items():
        if value is None or value == "":
            continue
        if isinstance(value, float):
            value = f"{value:.4g}"
        elif isinstance(value, (dict, list)):
            value = json.dumps(value, sort_keys=True)
        pairs.append((str(name), str(value)))
    return pairs


def previous_result(points, run_id):
    """The series' newest result before this run: (run_id, status, median, uuid) or None."""
    earlier = [p for p in points if p[0] < run_id]
    return earlier[-1] if earlier else None


def baseline_run_of(points, run_id):
    """The newest earlier run where the series passed: what 'the baseline' means here."""
    for point in reversed(points):
        if point[0] < run_id and point[1] == "passed":
            return point[0]
    return None


def _case_label(parts):
    if parts["shape"] == "*":
        return "every shape (kernel-wide)"
    dist = parts["distribution"]
    return parts["shape"] + ("" if dist in ("normal", "") else f" dist={dist}")


KNOWN_ALERT_COLUMNS = {"id", "run_id", "series_key", "kind", "state", "severity", "message",
                       "details_json", "created_at", "since_run_id", "change_fraction",
                       "environment", "annotation", "chip_changed"}


def _alert_item(alert, run_id):
    parts = split_series_key(alert.get("series_key") or "")
    details = _details_pairs(alert.get("details_json", ""))
    # Schema version 4's alert fields, in words.
    if alert.get("change_fraction") is not None:
        details.insert(0, ("change", f"{alert['change_fraction'] * 100:+.1f} %"))
    if alert.get("since_run_id") and alert["since_run_id"] != run_id:
        details.append(("since run", str(alert["since_run_id"])))
    if alert.get("chip_changed"):
        details.append(("chip changed", "yes: a chip change alone is never a confirmed regression"))
    if alert.get("annotation"):
        details.append(("annotation", alert["annotation"]))
    # Columns of a schema newer than this report are shown as they are.
    details += [(name, str(value)) for name, value in alert.items()
                if name not in KNOWN_ALERT_COLUMNS and value not in (None, "")]
    what = " ".join(filter(None, (alert.get("kind"), alert.get("state"))))
    return TriageItem(alert.get("severity") or "", alert_category(alert), what,
                      alert.get("series_key") or "", parts["kernel"], _case_label(parts),
                      parts["device"], alert.get("message") or "", details,
                      alert.get("environment") or "")


def triage(run, results, alerts, history, previous_suite_keys):
    """The run's alerts, then what the results themselves say (failed, crashed or timed-out
    cases, passed -> something else, cases that stopped running) where no status alert of the
    detector already says it; most severe first.

    history: {series_key: points}; previous_suite_keys: the series of the previous run of the
    same suite, for 'missing'."""
    run_id = run["id"]
    items = [_alert_item(alert, run_id) for alert in alerts]
    told = {a["series_key"] for a in alerts if alert_category(a) == "status"}
    present = set()
    for result in results:
        present.add(result.series_key)
        if result.series_key in told:
            continue
        previous = previous_result(history.get(result.series_key, []), run_id)
        was = f" (was {previous[1]} in run {previous[0]})" if previous else ""
        common = dict(series_key=result.series_key, kernel=result.kernel,
                      case_label=result.case_label, device=result.device_name,
                      details=[("repro", result.repro)])
        if result.status in FAILURE_STATUSES:
            items.append(TriageItem("error", "status", result.status,
                                    message=result.message + was, **common))
        elif previous and previous[1] == "passed" and result.status != "passed":
            items.append(TriageItem("warning", "status", f"passed -> {result.status}",
                                    message=result.message, **common))
    for key in sorted(set(previous_suite_keys) - present - told):
        parts = split_series_key(key)
        items.append(TriageItem("warning", "status", "missing", key, parts["kernel"],
                                _case_label(parts), parts["device"],
                                "ran in the previous run of this suite, not in this one"))
    items.sort(key=lambda item: item.order)
    return items


# ---- health ----------------------------------------------------------------------------------

@dataclass
class DeviceHealth:
    device: object
    results: int
    samples: int
    clocks: list  # every sample's SM clock in run order (MHz)
    median_clock: float | None
    suspect_samples: int
    clock_reasons: list  # (reason, samples), most frequent first
    cvs: list
    median_cv: float | None
    p90_cv: float | None
    noisy_results: int


def device_health(device, results):
    mine = [r for r in results if r.device_id == device.id]
    clocks = [s[1] for r in mine for s in r.samples if s[1] is not None]
    median_clock = median(clocks)
    suspect = sum(1 for c in clocks if median_clock and c < SUSPECT_CLOCK_FRACTION * median_clock)
    reasons = defaultdict(int)
    for result in mine:
        for sample in result.samples:
            for reason in filter(None, (part.strip() for part in sample[2].split(","))):
                reasons[reason] += 1
    cvs = [r.cv for r in mine if r.cv is not None and r.timed]
    return DeviceHealth(device, len(mine), sum(len(r.samples) for r in mine), clocks,
                        median_clock, suspect, sorted(reasons.items(), key=lambda kv: -kv[1]),
                        cvs, median(cvs), quantile(cvs, 0.9),
                        sum(1 for cv in cvs if cv > NOISY_CV))


# ---- run-to-run comparison -------------------------------------------------------------------

def comparison_base(runs, run):
    """The run to compare against: the newest earlier run built from another commit (a
    commit-to-commit comparison), else the newest earlier run."""
    earlier = [r for r in runs if r["id"] < run["id"] and not r.get("rerun_of")]
    for candidate in reversed(earlier):
        if candidate["git_sha"] != run["git_sha"]:
            return candidate
    return earlier[-1] if earlier else None


@dataclass
class ComparisonRow:
    series_key: str
    kernel: str
    case_label: str
    device: str
    base_s: float
    new_s: float

    @property
    def change(self):
        return self.new_s / self.base_s - 1


def compare(base_results, new_results):
    """Rows for every series timed in both runs, largest slowdown first, and the geometric
    mean of new/base time per kernel."""
    base = {r.series_key: r for r in base_results if r.timed}
    rows = [ComparisonRow(r.series_key, r.kernel, r.case_label, r.device_name,
                          base[r.series_key].median_s, r.median_s)
            for r in new_results if r.timed and r.series_key in base]
    rows.sort(key=lambda row: -row.change)
    per_kernel = defaultdict(list)
    for row in rows:
        per_kernel[row.kernel].append(row.new_s / row.base_s)
    kernels = [(kernel, geometric_mean(ratios), len(ratios))
               for kernel, ratios in sorted(per_kernel.items())]
    return rows, kernels
