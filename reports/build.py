"""Builds the static site: index.html (the run: triage first, then the plots), history.html
(every series with a sparkline, full plots where there is something to see), compare.html
(this run against the previous commit's) and studies.html (the study suites beside their
expected findings), with their images under img/ and the stylesheet and script under assets/.
Relative links only, so the folder opens from disk or any static host."""

import pathlib
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass

import jinja2
import markupsafe
from markupsafe import Markup

from reports import analysis, fmt, plots, studies
from reports.db import STATUSES, Database, ReportError

HERE = pathlib.Path(__file__).resolve().parent
# Full history plots cost ~0.1 s each; past this many the rest are listed, not drawn.
MAX_HISTORY_PLOTS = 100
SPARKLINE_RUNS = 60


@dataclass
class BuildSummary:
    run_id: int
    results: int
    images: int
    pages: list
    seconds: float


def _environment(templates):
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        # Every value from the database is escaped; only markup built here from numbers
        # (sparklines) is passed as Markup.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True)
    environment.globals.update(fmt=fmt, statuses=STATUSES)
    environment.filters["breakable"] = breakable
    return environment


def breakable(text):
    """Text that may wrap after each comma (a case string has no other break point), escaped."""
    return Markup(",<wbr>").join(markupsafe.escape(part) for part in str(text).split(","))


def _device_rows(db, devices, run):
    rows = []
    for device in devices:
        ceilings = []
        for calibration in db.calibrations(device.uuid, run.get("finished_at") or ""):
            value = calibration["value"]
            shown = fmt.flops_rate(value) if calibration["kind"] == "gemm" else fmt.byte_rate(value)
            ceilings.append((calibration["kind"], calibration["dtype"], shown, value,
                             calibration["details"], calibration["measured_at"]))
        rows.append((device, ceilings))
    return rows


def _rate_unit(results):
    """TFLOP/s for a GPU's figures, GFLOP/s when everything is below one TFLOP/s (a CPU)."""
    top = max((r.flops_per_s for r in results if r.flops_per_s), default=0)
    return (1e12, "TFLOP/s") if top >= 1e12 else (1e9, "GFLOP/s")


def _device_plots(image_dir, device, results, colours, ceilings):
    """Throughput, memory and energy small multiples and the speedup heatmap of one device."""
    tag = analysis.anchor("dev", f"{device.id}")
    scale, unit = _rate_unit(results)
    dtype_ceilings = {dtype: value / scale for (device_id, dtype), value in ceilings.items()
                      if device_id == device.id}
    memory_figure, memory_unit = plots.extra_memory(image_dir / f"{tag}-memory.png", results,
                                                    colours)
    figures = {
        "throughput": plots.small_multiples(
            image_dir / f"{tag}-throughput.png", results,
            lambda r: r.flops_per_s / scale if r.flops_per_s else None, f"throughput ({unit})",
            colours, ceilings=dtype_ceilings),
        "memory": memory_figure,
        "energy": plots.small_multiples(
            image_dir / f"{tag}-energy.png", results,
            lambda r: r.energy_j * 1e3 if r.energy_j else None, "energy per forward (mJ, log)",
            colours, log_y=True),
        "efficiency": plots.small_multiples(
            image_dir / f"{tag}-efficiency.png", results,
            lambda r: r.flops / r.energy_j / 1e12 if r.energy_j and r.flops else None,
            "efficiency (TFLOP/J)", colours),
    }
    speedups = analysis.speedups(results)
    title = f"speedup over {analysis.BASELINE_KERNEL} on {device.label}" \
        if analysis.BASELINE_KERNEL in speedups.kernels else \
        f"speedup over the fastest kernel of each shape on {device.label}"
    figures["speedup"] = plots.speedup_heatmaps(
        lambda part: image_dir / f"{tag}-speedup-{part}.png", speedups, title)
    figures["accuracy"] = plots.accuracy_heatmaps(
        lambda part: image_dir / f"{tag}-accuracy-{part}.png", results,
        f"error against its bound on {device.label}")
    return {"device": device, "anchor": tag, "unit": unit, "memory_unit": memory_unit,
            "figures": figures,
            "speedups": speedups, "fastest": analysis.fastest_per_shape(results),
            "has_cudnn": analysis.BASELINE_KERNEL in speedups.kernels,
            "timed": sum(1 for r in results if r.timed), "results": len(results)}


def _accuracy_rows(results):
    rows = []
    by_kernel = defaultdict(list)
    for result in results:
        if result.error_ratio is not None:
            by_kernel[result.kernel].append(result)
    for kernel, mine in sorted(by_kernel.items()):
        worst = max(mine, key=lambda r: r.error_ratio)
        rows.append({"kernel": kernel, "checked": len(mine),
                     "failed": sum(1 for r in mine if r.status == "failed"),
                     "worst": worst})
    return rows


def _launch_rows(results):
    by_kernel = defaultdict(list)
    for result in results:
        if result.launches is not None:
            by_kernel[(result.device_name, result.kernel)].append(result.launches)
    return [(device, kernel, min(v), max(v), len(v))
            for (device, kernel), v in sorted(by_kernel.items())]


def build(db_path, out_dir, run_id=None, compare_to=None):
    started = time.perf_counter()
    db = Database(db_path)
    try:
        return _build(db, pathlib.Path(out_dir), run_id, compare_to, started)
    finally:
        db.close()


def _build(db, out, run_id, compare_to, started):
    run_ids = db.run_ids()
    if not run_ids:
        raise ReportError(f"{db.path}: the database holds no runs yet")
    run = db.run(run_ids[-1] if run_id is None else run_id)
    runs = db.runs_up_to(run["id"])
    runs_by_id = {r["id"]: r for r in runs}
    base = runs_by_id.get(compare_to) if compare_to is not None else \
        analysis.comparison_base(runs, run)
    if compare_to is not None and base is None:
        raise ReportError(f"{db.path}: no run {compare_to} at or before run {run['id']} "
                          "to compare with")
    devices = db.devices(run["id"])
    results = db.results(run["id"])
    image_dir = _prepare(out)

    # History: this run's series and those of the previous run of the same suite (so a
    # series that stopped running is still found).
    previous_suite_run = next((r for r in reversed(runs)
                               if r["id"] < run["id"] and r["suite"] == run["suite"]
                               and not r.get("rerun_of")), None)
    previous_keys = db.series_keys_of_run(previous_suite_run["id"]) if previous_suite_run else []
    keys = sorted({r.series_key for r in results} | set(previous_keys))
    history = db.history(keys, run["id"])
    run_alerts = db.alerts(run_id=run["id"])
    # The detector's judgement of this run: every baseline, change and verdict shown.
    run_analysis = db.run_analysis(run["id"])
    series = analysis.build_series(
        history, db.alerts(series_keys=keys), db.annotations(), runs,
        {key: {run["id"]: row} for key, row in run_analysis.items()}, results)
    # The triage the analysis stored (grouped, in its order, with the gate's sentence); a flat
    # list from the alerts and results only for a run analysed before schema 8, or never.
    grouped = db.run_triage(run["id"])
    triage = [] if grouped else \
        analysis.triage(run, results, run_alerts, history, previous_keys, run_analysis)
    for item in triage:
        item.environment, item.environment_note = analysis.stored_environment(item, run_analysis)
    triage_keys = [row["series_key"] for group in grouped["groups"] for row in group["rows"]] \
        if grouped else [item.series_key for item in triage]
    history_plots, not_drawn = _history_plots(db, image_dir, run, triage_keys, series, runs_by_id)
    for item in triage:
        if item.series_key in history_plots:
            item.plot_anchor = analysis.anchor("s", item.series_key)
    for row in (r for group in grouped["groups"] for r in group["rows"]) if grouped else ():
        row["plot_anchor"] = analysis.anchor("s", row["series_key"]) \
            if row["series_key"] in history_plots else ""

    colours = plots.KernelColours([r.kernel for r in results] + [s.kernel for s in series.values()])
    ceilings = analysis.flops_ceilings(results)
    device_sections = [
        _device_plots(image_dir, device, [r for r in results if r.device_id == device.id],
                      colours, ceilings) for device in devices]
    healths = [analysis.device_health(device, results, run_analysis) for device in devices]
    profiles = db.profiles()
    figures = {
        "accuracy": plots.accuracy(image_dir / "accuracy.png", results, colours),
        "recipes": plots.accuracy_by_recipe(image_dir / "recipes.png", results, colours),
        "profiles": plots.profile_breakdown(image_dir / "profiles.png", profiles),
        "predicted": plots.predicted_vs_measured(image_dir / "predicted.png", results, colours),
        "clocks": plots.clocks(image_dir / "clocks.png", healths),
        "noise": plots.noise(image_dir / "noise.png", healths),
    }

    environment = _environment(HERE / "templates")
    common = {"run": run, "db_name": db.path.name, "schema_version": db.schema_version,
              "has_alerts": db.has_table("alerts"),
              "has_annotations": db.has_table("annotations"),
              "has_analysis": db.has_analysis, "run_analysed": bool(run_analysis)}
    device_ids = {d.id for d in devices}
    index = environment.get_template("index.html").render(
        page="index", counts=analysis.status_counts(results),
        devices=_device_rows(db, devices, run), triage=triage, grouped=grouped,
        run_alerts=run_alerts,
        reruns=db.reruns_of(run["id"]), device_sections=device_sections, figures=figures,
        orphans=sum(1 for r in results if r.device_id not in device_ids),
        accuracy_rows=_accuracy_rows(results), launch_rows=_launch_rows(results),
        recipe_accuracy=analysis.accuracy_by_recipe(results), profiles=profiles,
        healths=healths, any_energy=any(r.energy_j for r in results),
        duration=analysis.run_duration(run), **common)
    history_page = environment.get_template("history.html").render(
        page="history", table=_history_table(run, keys, series, history_plots),
        verdict_label=analysis.verdict_label,
        plotted=[series[k] for k in history_plots], history_plots=history_plots,
        not_drawn=not_drawn, runs_count=len(runs), anchor=analysis.anchor, **common)
    rows, kernels = analysis.compare(db.results(base["id"], with_samples=False), results) \
        if base else ([], [])
    compare_page = environment.get_template("compare.html").render(
        page="compare", base=base, rows=rows, kernels=kernels,
        differences=analysis.environment_changes(base, run) if base else [],
        analyses=run_analysis, verdict_label=analysis.verdict_label,
        verdict_class=analysis.verdict_class,
        **common)
    studies_page = environment.get_template("studies.html").render(
        page="studies", studies=studies.studies(db, image_dir, colours, run["id"]),
        bandwidth_text=studies.bandwidth_text, **common)
    pages = [_write(out / "index.html", index), _write(out / "history.html", history_page),
             _write(out / "compare.html", compare_page), _write(out / "studies.html", studies_page)]
    images = len(list(image_dir.glob("*.png")))
    return BuildSummary(run["id"], len(results), images, pages, time.perf_counter() - started)


def _prepare(out):
    """The output folder with fresh img/ and the assets; returns img/."""
    image_dir = out / "img"
    if image_dir.exists():
        shutil.rmtree(image_dir)  # images of an earlier build would otherwise linger
    image_dir.mkdir(parents=True)
    (out / "assets").mkdir(exist_ok=True)
    for asset in ("style.css", "report.js"):
        shutil.copyfile(HERE / "assets" / asset, out / "assets" / asset)
    return image_dir


def _history_plots(db, image_dir, run, triage_keys, series, runs_by_id):
    """Full plots of every series in the triage, then of every series with an alert in this
    run or an annotation, up to MAX_HISTORY_PLOTS, each with the baselines the detector stored
    for its runs. Returns ({key: image}, how many were left out)."""
    wanted = [key for key in triage_keys if key in series]
    wanted += [key for key, item in series.items()
               if item.annotations or any(a["run_id"] == run["id"] for a in item.alerts)]
    wanted = list(dict.fromkeys(wanted))
    stored = db.analysis_history(wanted[:MAX_HISTORY_PLOTS], run["id"])
    drawn = {}
    for key in wanted[:MAX_HISTORY_PLOTS]:
        series[key].analyses.update(stored[key])
        name = plots.history(image_dir / f"{analysis.anchor('s', key)}.png", series[key],
                             runs_by_id)
        if name:
            drawn[key] = name
    return drawn, max(0, len(wanted) - MAX_HISTORY_PLOTS)


def _history_table(run, keys, series, history_plots):
    table = []
    for key in keys:
        item = series[key]
        medians = [p[2] for p in item.points if p[2] is not None]
        latest = next((p for p in reversed(item.points) if p[0] == run["id"]), None)
        alerts_now = sum(1 for a in item.alerts if a["run_id"] == run["id"])
        stored = item.analysis_at(run["id"])  # None: the detector never judged it here
        table.append({
            "series": item, "anchor": analysis.anchor("s", key),
            "sparkline": Markup(plots.sparkline(medians[-SPARKLINE_RUNS:], bool(item.alerts))),
            "runs": len(item.points), "latest": latest, "analysis": stored,
            "change": stored.change_fraction if stored else None,
            "alerts_now": alerts_now, "alerts_all": len(item.alerts),
            "plot": history_plots.get(key)})
    # Series with an alert in this run first, the largest stored change first among the rest.
    table.sort(key=lambda row: (-row["alerts_now"], -abs(row["change"] or 0)))
    return table


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path.name
