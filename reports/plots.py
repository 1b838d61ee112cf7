"""The report's figures, drawn with matplotlib's object API (Figure, not pyplot: no global state,
nothing opens a window) and written as PNG files. Every axis names its unit; seqlen is on a log2
axis; kernels are named as the CLI names them and keep one colour in every figure."""

import math
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only; must precede anything that could pick an interactive backend
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402

from reports import analysis  # noqa: E402

DPI = 100
PANEL_SIZE = (3.6, 2.7)  # inches per small-multiples panel
MAX_COLUMNS = 4
# Markers tell apart the variants (GQA, sq != sk, layout, ...) that share a panel and a kernel.
VARIANT_MARKERS = "osD^v<>pP*Xh"
# Cell values are written into a heatmap only while they stay legible.
MAX_ANNOTATED_CELLS = 600
HEATMAP_SHAPES_PER_IMAGE = 80


def plain(text):
    """Database text for a matplotlib label: '$' would start mathtext, so it is escaped."""
    return str(text).replace("$", r"\$")


class KernelColours:
    """One colour per kernel, the same in every figure of the report."""

    def __init__(self, kernels):
        kernels = sorted(set(kernels))
        palette = matplotlib.colormaps["tab10" if len(kernels) <= 10 else "tab20"]
        self._colours = {k: palette(i % palette.N) for i, k in enumerate(kernels)}

    def __call__(self, kernel):
        return self._colours.get(kernel, "black")


def _save(figure, path):
    figure.savefig(path, dpi=DPI)
    return path.name


def _time_unit(values):
    """(scale, unit) so that the typical value reads between 1 and 1000."""
    typical = sorted(values)[len(values) // 2] if values else 1.0
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if typical >= scale:
            return scale, unit
    return 1e-9, "ns"


def byte_unit(values):
    """(scale, unit) in binary units for the typical value."""
    typical = sorted(values)[len(values) // 2] if values else 1
    for scale, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if typical >= scale:
            return scale, unit
    return 1, "B"


def _log2_seqlen_axis(ax, seqlens):
    ax.set_xscale("log", base=2)
    ticks = sorted(set(seqlens))
    if len(ticks) <= 8:
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(t) for t in ticks], fontsize=7)
    if len(ticks) == 1:
        ax.set_xlim(ticks[0] / 1.6, ticks[0] * 1.6)
    ax.set_xlabel("seqlen of keys (log2)", fontsize=8)


def _grid(count):
    columns = min(MAX_COLUMNS, count)
    rows = math.ceil(count / columns)
    return rows, columns


def small_multiples(path, results, value, ylabel, colours, log_y=False, ceilings=None,
                    mark_out_of_memory=False):
    """One panel per dtype x head dim x mask, value against seqlen, one line per kernel (and
    variant). ceilings: {dtype: ceiling in the unit of the y values} adds a right axis in % of
    the panel's dtype ceiling. Returns the file name, or None when nothing is drawn."""
    points = [r for r in results if value(r) is not None]
    out_of_memory = [r for r in results if mark_out_of_memory and r.out_of_memory]
    panels = sorted({analysis.panel_key(r) for r in points + out_of_memory},
                    key=analysis.panel_sort_key)
    if not panels:
        return None
    rows, columns = _grid(len(panels))
    figure = Figure(figsize=(PANEL_SIZE[0] * columns, PANEL_SIZE[1] * rows + 0.9),
                    layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    variants = sorted({analysis.variant_label(r) for r in points})
    marker_of = {v: VARIANT_MARKERS[i % len(VARIANT_MARKERS)] for i, v in enumerate(variants)}
    kernels_drawn = set()
    for index, key in enumerate(panels):
        ax = axes[index // columns][index % columns]
        lines = defaultdict(list)
        for result in points:
            if analysis.panel_key(result) == key:
                lines[(result.kernel, analysis.variant_label(result))].append(
                    (result.seqlen_k, value(result)))
        for (kernel, variant), xy in sorted(lines.items()):
            kernels_drawn.add(kernel)
            xy.sort()
            # Several shapes of one line may share a seqlen (batch differs): every point is
            # drawn, the line goes through their median.
            by_x = defaultdict(list)
            for x, y in xy:
                by_x[x].append(y)
            xs = sorted(by_x)
            ax.plot(xs, [analysis.median(by_x[x]) for x in xs], color=colours(kernel),
                    linewidth=1.2, alpha=0.8)
            ax.plot([x for x, _ in xy], [y for _, y in xy], linestyle="none",
                    marker=marker_of[variant], markersize=4, color=colours(kernel))
        seqlens = [r.seqlen_k for r in points + out_of_memory if analysis.panel_key(r) == key]
        _log2_seqlen_axis(ax, seqlens)
        if log_y:
            ax.set_yscale("log")
            # Plain numbers (0.25, 40) rather than mathtext powers of ten at every minor tick.
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_title(plain(analysis.panel_title(key)), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        oom_here = [r for r in out_of_memory if analysis.panel_key(r) == key]
        if oom_here:
            # At the top edge of the panel: an out-of-memory case has no value to place.
            ax.plot([r.seqlen_k for r in oom_here], [0.97] * len(oom_here), linestyle="none",
                    marker="x", markersize=8, color="red", markeredgewidth=2,
                    transform=ax.get_xaxis_transform(), clip_on=False)
        if ceilings and ceilings.get(key[0]):
            ceiling = ceilings[key[0]]
            secondary = ax.secondary_yaxis(
                "right", functions=(lambda y, c=ceiling: y / c * 100,
                                    lambda p, c=ceiling: p * c / 100))
            secondary.set_ylabel(f"% of {plain(key[0])} ceiling", fontsize=8)
            secondary.tick_params(labelsize=7)
    for index in range(len(panels), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    handles = [Line2D([], [], color=colours(k), linewidth=2, label=plain(k))
               for k in sorted(kernels_drawn)]
    if len(variants) > 1:
        handles += [Line2D([], [], color="grey", linestyle="none", marker=marker_of[v],
                           label=plain(v or "plain (MHA, sq = sk)")) for v in variants]
    if out_of_memory:
        handles.append(Line2D([], [], color="red", linestyle="none", marker="x",
                              markeredgewidth=2, label="out of memory"))
    figure.legend(handles=handles, loc="outside lower center", ncols=min(6, len(handles)),
                  fontsize=8, frameon=False)
    return _save(figure, path)


def extra_memory(path, results, colours):
    """Extra memory per forward against seqlen, log scale, out of memory marked: (file name or
    None, the binary unit its axis uses)."""
    scale, unit = byte_unit([r.extra_memory_bytes for r in results if r.extra_memory_bytes])
    name = small_multiples(
        path, results, lambda r: r.extra_memory_bytes / scale if r.extra_memory_bytes else None,
        f"extra memory per forward ({unit}, log)", colours, log_y=True, mark_out_of_memory=True)
    return name, unit


def _heatmaps(path_of_part, shapes, kernels, values, title, colour_label, cmap, ticks,
              cell_text, shape_label=plain):
    """Kernel x shape heatmaps of log2(value), centred on 1 (log2 = 0), split into parts of
    HEATMAP_SHAPES_PER_IMAGE shapes so that every row stays legible. ticks: the colour bar's
    values; cell_text((kernel, shape), value) writes a cell. Returns the file names written."""
    if not values:
        return []
    names = []
    for part, start in enumerate(range(0, len(shapes), HEATMAP_SHAPES_PER_IMAGE)):
        chunk = shapes[start:start + HEATMAP_SHAPES_PER_IMAGE]
        grid = [[values.get((k, s), math.nan) for k in kernels] for s in chunk]
        logs = [[math.log2(v) if v == v and v > 0 else math.nan for v in row] for row in grid]
        extent = max([abs(v) for row in logs for v in row if v == v] + [0.1])
        label_width = max(len(shape_label(s)) for s in chunk) * 0.055 + 0.6
        figure = Figure(figsize=(label_width + 1.0 * len(kernels) + 1.6, 0.24 * len(chunk) + 2.2),
                        layout="constrained")
        ax = figure.subplots()
        image = ax.imshow(logs, aspect="auto", cmap=cmap.with_extremes(bad="#dddddd"),
                          norm=TwoSlopeNorm(vcenter=0, vmin=-extent, vmax=extent),
                          interpolation="nearest")
        ax.set_xticks(range(len(kernels)))
        ax.set_xticklabels([plain(k) for k in kernels], rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(chunk)))
        ax.set_yticklabels([shape_label(s) for s in chunk], fontsize=7)
        ax.set_xlabel("kernel")
        ax.set_ylabel("shape")
        if len(chunk) * len(kernels) <= MAX_ANNOTATED_CELLS:
            for row, cells in enumerate(grid):
                for column, v in enumerate(cells):
                    if v == v:
                        # White on the darkest colours at either end, black elsewhere.
                        dark = abs(logs[row][column]) > 0.7 * extent
                        ax.text(column, row, cell_text((kernels[column], chunk[row]), v),
                                ha="center", va="center", fontsize=7,
                                color="white" if dark else "black")
        bar = figure.colorbar(image, ax=ax, shrink=0.8)
        bar.set_label(colour_label)
        shown = [t for t in ticks if abs(math.log2(t)) <= extent]
        bar.set_ticks([math.log2(t) for t in shown], labels=[f"{t:g}" for t in shown])
        suffix = f" (part {part + 1})" if len(shapes) > HEATMAP_SHAPES_PER_IMAGE else ""
        ax.set_title(plain(title) + suffix, fontsize=10)
        names.append(_save(figure, path_of_part(part)))
    return names


def speedup_heatmaps(path_of_part, speedups, title):
    """Speedup over the reference kernel: green faster, red slower."""
    return _heatmaps(
        path_of_part, speedups.shapes, speedups.kernels, speedups.values, title,
        "speedup (x, log2 colour scale)", matplotlib.colormaps["RdYlGn"],
        [2.0 ** t for t in range(-8, 9)], lambda key, v: f"{v:.2f}",
        lambda s: plain(s) + ("" if speedups.against[s] == analysis.BASELINE_KERNEL else " *"))


def accuracy_heatmaps(path_of_part, results, title):
    """Error against its bound per kernel and shape: red at and above the bound (a failure),
    green far below it; failed cells read FAIL."""
    checked = [r for r in results if r.error_ratio is not None]
    values = {(r.kernel, r.case_label): r.error_ratio for r in checked}
    failed = {(r.kernel, r.case_label) for r in checked if r.status == "failed"}
    orders = analysis.shape_orders(checked)
    shapes = sorted({r.case_label for r in checked}, key=orders.get)
    kernels = sorted({r.kernel for r in checked})

    def cell_text(key, v):
        return "FAIL" if key in failed else f"{v:.2g}"

    return _heatmaps(path_of_part, shapes, kernels, values, title,
                     "max |out - ref| / bound (ratio, log2 colour scale)",
                     matplotlib.colormaps["RdYlGn_r"], [2.0 ** t for t in range(-20, 21, 2)],
                     cell_text)


def accuracy(path, results, colours):
    """Error against its bound per kernel: one point per checked case, failures in red."""
    checked = [r for r in results if r.error_ratio is not None]
    if not checked:
        return None
    kernels = sorted({r.kernel for r in checked})
    figure = Figure(figsize=(max(6.0, 1.1 * len(kernels) + 2), 4.2), layout="constrained")
    ax = figure.subplots()
    floor = 1e-6  # an exact result (error 0) is drawn at the floor of the log axis
    for column, kernel in enumerate(kernels):
        mine = [r for r in checked if r.kernel == kernel]
        # A fixed spread across the column instead of random jitter: the same database
        # always draws the same picture.
        xs = [column + (i / max(1, len(mine) - 1) - 0.5) * 0.5 for i in range(len(mine))]
        ys = [max(r.error_ratio, floor) for r in mine]
        failed = [r.status == "failed" for r in mine]
        ax.plot([x for x, f in zip(xs, failed) if not f], [y for y, f in zip(ys, failed) if not f],
                linestyle="none", marker="o", markersize=3, color=colours(kernel), alpha=0.6)
        ax.plot([x for x, f in zip(xs, failed) if f], [y for y, f in zip(ys, failed) if f],
                linestyle="none", marker="X", markersize=7, color="red")
    ax.axhline(1.0, color="red", linestyle="--", linewidth=1)
    ax.text(len(kernels) - 0.5, 1.0, " bound", color="red", va="bottom", ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels([plain(k) for k in kernels], rotation=20, ha="right", fontsize=8)
    ax.set_xlabel("kernel")
    ax.set_ylabel("max |out - ref| / bound (ratio, log)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(handles=[Line2D([], [], color="grey", marker="o", linestyle="none", label="passed"),
                       Line2D([], [], color="red", marker="X", linestyle="none", label="failed")],
              fontsize=8, loc="lower right")
    return _save(figure, path)


def accuracy_by_recipe(path, results, colours):
    """Median RMSE against fp64 per kernel, grouped by input distribution (log axis): where an
    FP8 recipe gains or loses accuracy (issue 16's study) and how far any kernel sits from fp16."""
    distributions, table = analysis.accuracy_by_recipe(results)
    if not table:
        return None
    kernels = list(table)
    width = 0.8 / len(kernels)
    figure = Figure(figsize=(max(6.0, 1.2 * len(distributions) * max(1, len(kernels) / 3) + 2),
                             4.2), layout="constrained")
    ax = figure.subplots()
    for index, kernel in enumerate(kernels):
        xs = [column + (index - (len(kernels) - 1) / 2) * width
              for column, d in enumerate(distributions) if d in table[kernel]]
        ys = [table[kernel][d] for d in distributions if d in table[kernel]]
        ax.bar(xs, ys, width=width, color=colours(kernel), label=plain(kernel))
    ax.set_yscale("log")
    ax.set_xticks(range(len(distributions)))
    ax.set_xticklabels([plain(d) for d in distributions])
    ax.set_xlabel("input distribution")
    ax.set_ylabel("RMSE against fp64 (median over shapes, log)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncols=2)
    return _save(figure, path)


PHASE_COLOURS = {"scores": "#4c72b0", "mask": "#c44e52", "softmax": "#dd8452", "output": "#55a868",
                 "convert": "#8172b3", "gaps": "#cccccc"}


def profile_breakdown(path, profiles):
    """Each stored profile (`attnbench profile`) as one bar of its phases' shares of the forward's
    thread time, gaps grey: where each kernel's time goes, side by side."""
    if not profiles:
        return None
    figure = Figure(figsize=(8.0, 1.2 + 0.45 * len(profiles)), layout="constrained")
    ax = figure.subplots()
    shown = set()
    for row, profile in enumerate(profiles):
        left = 0.0
        for phase in profile["phases"]:
            name = phase["name"]
            ax.barh(row, phase["share"] * 100, left=left, color=PHASE_COLOURS.get(name, "#937860"),
                    label=None if name in shown else name, edgecolor="white", linewidth=0.5)
            shown.add(name)
            left += phase["share"] * 100
    ax.set_yticks(range(len(profiles)))
    ax.set_yticklabels([f"{p['kernel']} {p['shape']} ({p['forward_s'] * 1e3:.1f} ms)"
                        for p in profiles], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the forward's thread time (%)")
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=6, frameon=False)
    return _save(figure, path)


def predicted_vs_measured(path, results, colours):
    pairs = [r for r in results if r.predicted_s and r.timed]
    if not pairs:
        return None
    scale, unit = _time_unit([r.median_s for r in pairs])
    figure = Figure(figsize=(6.0, 4.6), layout="constrained")
    ax = figure.subplots()
    for kernel in sorted({r.kernel for r in pairs}):
        mine = [r for r in pairs if r.kernel == kernel]
        ax.plot([r.predicted_s / scale for r in mine], [r.median_s / scale for r in mine],
                linestyle="none", marker="o", markersize=4, color=colours(kernel),
                label=plain(kernel))
    low = min(min(r.predicted_s, r.median_s) for r in pairs) / scale
    high = max(max(r.predicted_s, r.median_s) for r in pairs) / scale
    ax.plot([low, high], [low, high], color="grey", linestyle="--", linewidth=1,
            label="measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"predicted time per forward ({unit}, memory-bound model)")
    ax.set_ylabel(f"measured median time per forward ({unit})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(figure, path)


def clocks(path, healths):
    """SM clock of every sample in run order, per device; the samples the analysis marked
    suspect (far below their series' usual clock) in red."""
    with_clocks = [h for h in healths if h.clocks]
    if not with_clocks:
        return None
    figure = Figure(figsize=(9.0, 2.6 * len(with_clocks)), layout="constrained")
    axes = figure.subplots(len(with_clocks), 1, squeeze=False)
    for ax, health in zip(axes[:, 0], with_clocks):
        ax.plot(range(len(health.clocks)), health.clocks, linewidth=0.8)
        marked = [(i, c) for i, (c, s) in enumerate(zip(health.clocks, health.suspect)) if s]
        if marked:
            ax.scatter(*zip(*marked), color="red", s=12, zorder=3,
                       label=f"suspect (the analysis): {len(marked)}")
        ax.set_xlabel("sample (repetition, in run order)")
        ax.set_ylabel("SM clock (MHz)")
        ax.set_title(plain(f"{health.device.label}: {health.device.name}"), fontsize=9)
        if marked:
            ax.legend(fontsize=8, loc="lower right")
        ax.grid(True, alpha=0.3)
    return _save(figure, path)


def noise(path, healths):
    """Histogram of the coefficient of variation of each case's repetitions, per device."""
    with_cv = [h for h in healths if h.cvs]
    if not with_cv:
        return None
    figure = Figure(figsize=(9.0, 2.6 * len(with_cv)), layout="constrained")
    axes = figure.subplots(len(with_cv), 1, squeeze=False)
    for ax, health in zip(axes[:, 0], with_cv):
        values = [max(cv, 1e-5) * 100 for cv in health.cvs]
        low, high = min(values), max(values)
        edges = [low * (high / low) ** (i / 30) for i in range(31)] if high > low else 30
        ax.hist(values, bins=edges)
        ax.set_xscale("log")
        ax.set_xlabel("coefficient of variation of the repetitions (%, log)")
        ax.set_ylabel("cases")
        ax.set_title(plain(f"{health.device.label}: {health.device.name}"), fontsize=9)
    return _save(figure, path)


def history(path, series, runs_by_id):
    """One series over time: run medians, the baseline band the detector stored for each run,
    alerts, annotations, chip changes. A run without a stored judgement has no band: the plot
    draws the detector's baselines, it never computes one."""
    timed = [(p, band) for p, band in zip(series.points, series.bands()) if p[2] is not None]
    if not timed:
        return None
    scale, unit = _time_unit([p[2] for p, _ in timed])
    figure = Figure(figsize=(9.0, 3.2), layout="constrained")
    ax = figure.subplots()
    when = {run_id: analysis.parse_time(run["started_at"]) for run_id, run in runs_by_id.items()}
    xs = [when[p[0]] for p, _ in timed]
    ax.plot(xs, [p[2] / scale for p, _ in timed], color="black", linewidth=0.8, marker="o",
            markersize=2.5, label="run median")
    banded = [(when[p[0]], band) for p, band in timed if band is not None]
    if banded:
        ax.fill_between([x for x, _ in banded], [b[0] / scale for _, b in banded],
                        [b[2] / scale for _, b in banded], step="mid", color="tab:blue",
                        alpha=0.2, label="stored baseline band (no trip)")
        ax.plot([x for x, _ in banded], [b[1] / scale for _, b in banded], color="tab:blue",
                linewidth=0.8, linestyle="--", label="stored baseline center")
    else:
        ax.text(0.5, 0.04, "not analysed: no stored baseline for these runs", ha="center",
                va="bottom", fontsize=8, color="grey", transform=ax.transAxes)
    median_of_run = {p[0]: p[2] for p, _ in timed}
    styles = {"regression": ("v", "red"), "improvement": ("^", "green"),
              "outlier": ("o", "orange"), "accuracy": ("s", "purple"),
              "status": ("X", "brown"), "run": ("D", "grey"), "other": ("P", "grey")}
    drawn = set()
    for alert in series.alerts:
        run_id = alert["run_id"]
        if run_id not in median_of_run or run_id not in when:
            continue
        category = analysis.alert_category(alert)
        marker, colour = styles[category]
        ax.plot(when[run_id], median_of_run[run_id] / scale, linestyle="none", marker=marker,
                markersize=9, markerfacecolor="none" if category == "outlier" else colour,
                markeredgecolor=colour, markeredgewidth=1.5,
                label=None if category in drawn else category)
        drawn.add(category)
    for index, run_id in enumerate(series.chip_changes):
        if run_id in when:
            ax.axvline(when[run_id], color="grey", linestyle=":", linewidth=1.2,
                       label="chip changed" if index == 0 else None)
    for index, annotation in enumerate(series.annotations):
        run_id = annotation.get("run_id")
        if run_id in when:
            ax.axvline(when[run_id], color="purple", linestyle="--", linewidth=1,
                       label="annotation" if index == 0 else None)
            ax.text(when[run_id], 0.98, " " + plain(annotation.get("kind", "")), rotation=90,
                    va="top", fontsize=7, color="purple", transform=ax.get_xaxis_transform())
    ax.set_ylabel(f"median time per forward ({unit})")
    ax.set_xlabel("run date (UTC)")
    ax.set_title(plain(f"{series.kernel}  {series.case_label}  on {series.device}"), fontsize=9)
    ax.grid(True, alpha=0.3)
    # Beside the axes, never over the points.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.autofmt_xdate()
    return _save(figure, path)


def sparkline(values, alerted, width=120, height=22):
    """Inline SVG of the last run medians (higher = slower), built from numbers only."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = (width - 4) / (len(values) - 1)
    points = " ".join(f"{2 + i * step:.1f},{height - 2 - (v - low) / span * (height - 4):.1f}"
                      for i, v in enumerate(values))
    last_x, last_y = points.rsplit(" ", 1)[-1].split(",")
    colour = "#c62828" if alerted else "#1565c0"
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
            f' role="img" aria-label="run medians"><polyline fill="none" stroke="{colour}" '
            f'stroke-width="1.2" points="{points}"/><circle cx="{last_x}" cy="{last_y}" r="2" '
            f'fill="{colour}"/></svg>')
