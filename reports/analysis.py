"""What the page says, computed from the loaded rows: status counts, the triage list, speedups,
the fastest kernel per shape, the history series, health and the run-to-run comparison. Plain
functions over plain data: no plotting and no HTML here.

Regressions are the detector's business (harness/analysis/): its judgement of every series at
every analysed run is stored in result_analysis (schema version 6), and everything this report
says about a baseline (its center, spread and threshold, a change against it, the verdict, the
baseline run an environment is compared with) is read from there. A run or series without a
stored row is "not analysed": the report never recomputes a baseline. So are the conditions of
a result (schema version 10): what differs from its baseline run's environment, whether its
repetitions were too noisy, which samples' clocks were suspect; and a run's environment field by
field, as attnbench names it (runs.environment_json), for comparing two runs."""

import datetime
import hashlib
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from reports import fmt
from reports.db import FAILURE_STATUSES, STATUSES, parse_json_object, split_series_key

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


def accuracy_by_recipe(results):
    """RMSE against fp64 per kernel (an FP8 kernel's name is its recipe) and input distribution:
    (distributions, {kernel: {distribution: median RMSE over its checked shapes}}), the figure's
    and the table's one source. Empty when no result stores an RMSE."""
    values = defaultdict(lambda: defaultdict(list))
    for result in results:
        if result.checked and result.rmse is not None:
            values[result.kernel][result.distribution].append(result.rmse)
    distributions = sorted({d for by_distribution in values.values() for d in by_distribution},
                           key=lambda d: (d != "normal", d))
    table = {kernel: {d: statistics.median(v) for d, v in by_distribution.items()}
             for kernel, by_distribution in sorted(values.items())}
    return distributions, table


# ---- small multiples: which panel and which line a result belongs to -------------------------

FP8_DTYPES = ("e4m3", "e5m2")


PASS_ORDER = ("fwd", "bwd", "fwd_bwd")


def panel_key(result):
    """dtype x head dim x mask x pass: the grid of the throughput and memory plots (a backward's
    and a training step's panels apart from the forward's)."""
    head_dim = str(result.head_dim) if result.head_dim == result.head_dim_v else \
        f"{result.head_dim}/{result.head_dim_v}"
    return (result.dtype, head_dim, result.mask, result.pass_name)


def panel_title(key):
    dtype, head_dim, mask, pass_name = key
    return f"{dtype}, d={head_dim}, mask={mask}" + ("" if pass_name == "fwd" else f", {pass_name}")


def _head_dim_order(head_dim):
    return [int(part) for part in head_dim.split("/")]


def panel_sort_key(key):
    return (PASS_ORDER.index(key[3]) if key[3] in PASS_ORDER else len(PASS_ORDER), key[0],
            _head_dim_order(key[1]), key[2])


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


# ---- the closed sets of the detector (harness/core/verdict.h) --------------------------------

# Alert kinds, severities and states (CHECKed from schema version 6): each rank table is the
# order the triage lists them in, lower first. Values outside a table (a file older than the
# CHECKs) rank after every known one.
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
# Facts about the run's results first (a crash before a failed check before a case that stopped
# running), then the detector's verdicts from the surest regression to good news.
STATE_RANK = {
    "crashed": 0, "timeout": 1, "error": 2, "failed": 3, "missing": 4, "skipped": 5,
    "confirmed": 6, "suspected": 7, "ambiguous": 8, "fewer_cases": 9, "outlier": 10,
    "improved": 11, "insufficient_history": 12, "passed": 13, "ok": 14, "": 15}
# A status before the kernel-wide aggregate it may explain, before each shape's own time.
KIND_RANK = {"status": 0, "kernel": 1, "performance": 2, "accuracy": 3, "run": 4}

# What an alert means for the plots and the triage, by (kind, state). Before schema version 4
# alerts had no state: a performance or kernel alert was then always a trip. Anything else
# (a kind or state outside the sets) is "other".
_TRIP_STATES = ("suspected", "confirmed", "ambiguous", "")
ALERT_CATEGORIES = {
    **{(kind, state): "regression" for kind in ("performance", "kernel") for state in _TRIP_STATES},
    **{(kind, "outlier"): "outlier" for kind in ("performance", "kernel", "accuracy")},
    **{(kind, "improved"): "improvement" for kind in ("performance", "kernel", "accuracy")},
    **{("accuracy", state): "accuracy" for state in _TRIP_STATES},
    **{("status", state): "status" for state in
       ("", "passed", "failed", "skipped", "crashed", "timeout", "error", "missing")},
    **{("run", state): "run" for state in ("", "ambiguous", "fewer_cases")},
}


def alert_category(alert):
    """regression, improvement, outlier, accuracy, status, run or other: looked up by the
    alert's kind and state, never guessed from words."""
    return ALERT_CATEGORIES.get((alert.get("kind") or "", alert.get("state") or ""), "other")


def verdict_label(verdict):
    """A verdict as the page prints it."""
    return verdict.replace("_", " ")


# How a row is marked by its stored verdict: a trip slower, an improvement faster.
VERDICT_CLASSES = {"suspected": "slower", "confirmed": "slower", "improved": "faster"}


def verdict_class(verdict):
    return VERDICT_CLASSES.get(verdict, "")


# ---- history ---------------------------------------------------------------------------------

def annotation_applies(annotation, series_key):
    """`attnbench annotate` stores one row per exact series key (it expands the globs itself)."""
    return annotation.get("series_key", "") == series_key


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


def stored_band(row):
    """(low, center, high) in seconds of a stored analysis row's no-trip band at its run's
    level, where a run median of that run is drawn: the detector compares the level-free median
    (median / exp(level)) with center, so a median inside trips nothing. None without a center
    or threshold (too little history, an aggregate)."""
    if row is None or row.center_s is None or row.threshold is None:
        return None
    center = row.center_s * math.exp(row.level or 0.0)
    return center * (1 - row.threshold), center, center * (1 + row.threshold)


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
    analyses: dict = field(default_factory=dict)  # {run_id: db.Analysis}: the stored judgements

    @property
    def case_label(self):
        return self.shape + ("" if self.distribution in ("normal", "") else
                             f" dist={self.distribution}")

    def analysis_at(self, run_id):
        """The detector's stored row for this series at that run; None: not analysed."""
        return self.analyses.get(run_id)

    def bands(self):
        """The stored no-trip band of every point (see stored_band), None where the run has no
        stored row or the row no baseline."""
        return [stored_band(self.analyses.get(point[0])) for point in self.points]

    @property
    def chip_changes(self):
        """Run ids where the series' chip differs from its previous result's."""
        return [current[0] for previous, current in zip(self.points, self.points[1:])
                if previous[3] and current[3] and previous[3] != current[3]]


def series_parts(key, row=None, result=None):
    """kernel, shape, distribution, device and build of a series: from its stored analysis
    row's columns, else from its result's (the shape is only in the key), else from the key."""
    if row is not None:
        return {"kernel": row.kernel, "shape": row.shape, "distribution": row.distribution,
                "device": row.device, "build": row.build}
    parts = split_series_key(key)
    if result is not None:
        parts.update(kernel=result.kernel, shape=result.shape,
                     distribution=result.distribution, device=result.device_name)
    return parts


def build_series(history, alerts, annotations, runs, analyses, results=()):
    """Series objects with their alerts, annotations and stored judgements.
    analyses: {series_key: {run_id: Analysis}} (the run's own rows at least)."""
    alerts_by_key = defaultdict(list)
    for alert in alerts:
        alerts_by_key[alert["series_key"]].append(alert)
    result_of = {result.series_key: result for result in results}
    series = {}
    for key, points in history.items():
        stored = analyses.get(key, {})
        newest = stored[max(stored)] if stored else None
        parts = series_parts(key, newest, result_of.get(key))
        item = Series(key, parts["kernel"], parts["shape"], parts["distribution"],
                      parts["device"], parts["build"], points, alerts_by_key.get(key, []),
                      analyses=dict(stored))
        item.annotations = [dict(a, run_id=annotation_run(a, runs)) for a in annotations
                            if annotation_applies(a, key)]
        series[key] = item
    return series


# ---- triage ----------------------------------------------------------------------------------

def environment_changes(run_then, run_now):
    """[(what, then, now)] for every field of the runs' environments, as attnbench stored them
    (runs.environment_json: its entries, named as it names them), whose values differ; None when
    either run stored none (written before schema version 10). The commit is apart: the compare
    page shows both."""
    stored = [run.get("environment_json") or "" for run in (run_then, run_now)]
    if not all(stored):
        return None
    then, now = ({entry["what"]: entry["value"] for entry in json.loads(text)} for text in stored)
    return [(what, then.get(what, ""), value) for what, value in now.items()
            if then.get(what, "") != value]


@dataclass
class TriageItem:
    severity: str
    kind: str  # performance, accuracy, status, kernel or run (status for the computed items)
    state: str  # a verdict, a result status, missing, fewer_cases or ''
    what: str  # "performance confirmed", "crashed", "passed -> skipped", "missing"
    series_key: str
    kernel: str
    case_label: str
    device: str
    message: str
    details: list = field(default_factory=list)  # (name, value)
    # What differs from its baseline's environment, as the analysis stored it (the alert's, else
    # the series' result_analysis row's); environment_note says why there is none.
    environment: str = ""
    environment_note: str = ""
    plot_anchor: str = ""

    @property
    def category(self):
        return alert_category({"kind": self.kind, "state": self.state})

    @property
    def rank(self):
        return SEVERITY_RANK.get(self.severity, len(SEVERITY_RANK))

    @property
    def order(self):
        return (self.rank, STATE_RANK.get(self.state, len(STATE_RANK)),
                KIND_RANK.get(self.kind, len(KIND_RANK)), self.kernel, self.case_label)


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


def _case_label(parts):
    if parts["shape"] == "*":
        return "every shape (kernel-wide)"
    dist = parts["distribution"]
    return parts["shape"] + ("" if dist in ("normal", "", "*") else f" dist={dist}")


def analysis_details(row):
    """The stored judgement in words, for a triage item's details."""
    if row is None:
        return [("analysis", "not analysed: no stored judgement of this series in this run")]
    pairs = [("verdict", verdict_label(row.verdict))]
    if row.center_s is not None:
        spread = f" ± {fmt.seconds(row.spread_s)}" if row.spread_s is not None else ""
        pairs.append(("baseline", f"{fmt.seconds(row.center_s)}{spread} over "
                                  f"{row.baseline_runs} runs (level-free)"))
    if row.threshold is not None:
        pairs.append(("threshold", fmt.percent(row.threshold)))
    if row.history_from_run_id:
        pairs.append(("baseline from run", str(row.history_from_run_id)))
    return pairs


KNOWN_ALERT_COLUMNS = {"id", "run_id", "series_key", "kind", "state", "severity", "message",
                       "details_json", "created_at", "since_run_id", "change_fraction",
                       "environment", "annotation", "chip_changed"}


def _alert_item(alert, run_id, row):
    key = alert.get("series_key") or ""
    kind = alert.get("kind") or ""
    if kind == "run":
        # A finding about the whole run (its level, fewer cases): no series to name.
        parts = {"kernel": "", "shape": "", "distribution": "", "device": "", "build": ""}
        case_label = "the whole run"
    else:
        parts = series_parts(key, row)
        case_label = _case_label(parts)
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
    if kind in ("performance", "kernel"):
        details += analysis_details(row)
    # Columns of a schema newer than this report are shown as they are.
    details += [(name, str(value)) for name, value in alert.items()
                if name not in KNOWN_ALERT_COLUMNS and value not in (None, "")]
    state = alert.get("state") or ""
    what = " ".join(filter(None, (kind, state)))
    return TriageItem(alert.get("severity") or "", kind, state, what, key, parts["kernel"],
                      case_label, parts["device"], alert.get("message") or "", details,
                      alert.get("environment") or "")


def triage(run, results, alerts, history, previous_suite_keys, analyses=None):
    """The run's alerts, then what the results themselves say (failed, crashed or timed-out
    cases, passed -> something else, cases that stopped running) where no status alert of the
    detector already says it; most severe first (SEVERITY_RANK, then STATE_RANK, KIND_RANK).

    history: {series_key: points}; previous_suite_keys: the series of the previous run of the
    same suite, for 'missing'; analyses: {series_key: Analysis}, the run's stored judgements."""
    run_id = run["id"]
    analyses = analyses or {}
    items = [_alert_item(alert, run_id, analyses.get(alert.get("series_key") or ""))
             for alert in alerts]
    told = {a["series_key"] for a in alerts if alert_category(a) == "status"}
    present = set()
    for result in results:
        present.add(result.series_key)
        if result.series_key in told:
            continue
        previous = previous_result(history.get(result.series_key, []), run_id)
        was = f" (was {previous[1]} in run {previous[0]})" if previous else ""
        common = dict(kind="status", state=result.status, series_key=result.series_key,
                      kernel=result.kernel, case_label=result.case_label,
                      device=result.device_name, details=[("repro", result.repro)])
        if result.status in FAILURE_STATUSES:
            items.append(TriageItem("error", what=result.status, message=result.message + was,
                                    **common))
        elif previous and previous[1] == "passed" and result.status != "passed":
            items.append(TriageItem("warning", what=f"passed -> {result.status}",
                                    message=result.message, **common))
    for key in sorted(set(previous_suite_keys) - present - told):
        parts = series_parts(key, analyses.get(key))
        items.append(TriageItem("warning", "status", "missing", "missing", key, parts["kernel"],
                                _case_label(parts), parts["device"],
                                "ran in the previous run of this suite, not in this one"))
    items.sort(key=lambda item: item.order)
    return items


def stored_environment(item, analyses):
    """(environment, note): what differs from the item's baseline environment, as the analysis
    stored it (the alert's own text, else its series' result_analysis row's, schema version 10),
    or why nothing is shown. Never computed here."""
    if item.environment:
        return item.environment, ""
    if item.kind == "run":
        return "", "a finding about the whole run"
    row = analyses.get(item.series_key)
    if row is None:
        return "", "not analysed: no stored judgement of this series in this run"
    if row.environment is None:
        return "", "not stored: analysed before schema version 10"
    if not row.environment:
        return "", "no stored baseline run (too little history)"
    return row.environment, ""


# ---- health ----------------------------------------------------------------------------------

@dataclass
class DeviceHealth:
    device: object
    results: int
    samples: int
    clocks: list  # every sample's SM clock in run order (MHz)
    suspect: list  # each of those samples: True, False as the analysis judged it; None not judged
    median_clock: float | None
    suspect_samples: int  # of the judged samples, those the analysis marked suspect
    judged_samples: int
    clock_reasons: list  # (reason, samples), most frequent first
    cvs: list
    median_cv: float | None
    p90_cv: float | None
    noisy_results: int  # of the judged results, those the analysis found too noisy
    judged_results: int


def device_health(device, results, analyses):
    """A device's clocks, clock-event reasons and noise in this run: the statistics of what was
    measured, and the judgements the analysis stored (a sample's clock far below its series'
    usual, a result's repetitions too noisy); analyses: {series_key: Analysis} of the run."""
    mine = [r for r in results if r.device_id == device.id]
    clocked = [s for r in mine for s in r.samples if s[1] is not None]
    clocks = [s[1] for s in clocked]
    suspect = [s[3] if len(s) > 3 else None for s in clocked]
    reasons = defaultdict(int)
    for result in mine:
        for sample in result.samples:
            for reason in filter(None, (part.strip() for part in sample[2].split(","))):
                reasons[reason] += 1
    cvs = [r.cv for r in mine if r.cv is not None and r.timed]
    noisy = [analyses[r.series_key].noisy for r in mine if r.series_key in analyses
             and analyses[r.series_key].noisy is not None]
    return DeviceHealth(device, len(mine), sum(len(r.samples) for r in mine), clocks, suspect,
                        median(clocks), sum(1 for s in suspect if s),
                        sum(1 for s in suspect if s is not None),
                        sorted(reasons.items(), key=lambda kv: -kv[1]), cvs, median(cvs),
                        quantile(cvs, 0.9), sum(1 for n in noisy if n), len(noisy))


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
