"""The study suites (issue 17) as one page: for each of suites/masking.toml, memory.toml,
long_context.toml and decode.toml, its expected finding as the suite file writes it beside its
matrix, and what the newest run of that suite measured: per kernel and shape the status, time,
launches per forward, extra memory, energy and bandwidth, with the suite's figure.

The finding is read from the suite file (its comment paragraph starting "The expected finding"),
the one place it is written; the measurements come from the database alone. A study never run
says how to run it."""

import pathlib
import tomllib
from dataclasses import dataclass, field

from reports import analysis, fmt, plots

SUITES = pathlib.Path(__file__).resolve().parents[1] / "suites"
STUDIES = ("masking", "memory", "long_context", "decode")
FINDING_START = "The expected finding"


@dataclass
class Study:
    name: str
    description: str
    finding: list  # the suite file's paragraph: its lead, then its bullets; [] when not found
    run: dict | None  # the newest run of the suite; None: never run in this database
    rows: list = field(default_factory=list)  # Result objects, ordered for the table
    figure: str | None = None

    @property
    def anchor(self):
        return "study-" + self.name


def suite_text(name, suites=SUITES):
    """(description, expected finding) of a suite file; ("", []) when it is not there."""
    path = suites / f"{name}.toml"
    if not path.is_file():
        return "", []
    text = path.read_text(encoding="utf-8")
    description = tomllib.loads(text).get("description", "")
    return description, expected_finding(text)


def expected_finding(text):
    """The comment paragraph of a suite file that starts "The expected finding", without its
    '#' marks, up to the next empty comment line or the first line that is not a comment: a
    list of items, the lead text first, then one per "- " bullet. [] when there is none."""
    items, inside = [], False
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if body.startswith(FINDING_START):
            inside = True
        elif inside and not body:
            break
        if not inside:
            continue
        if body.startswith("- ") or not items:
            items.append(body.removeprefix("- "))
        else:
            items[-1] += " " + body
    return items


def _figure(name, image_dir, results, colours):
    """memory and long_context against seqlen: extra memory (out of memory marked) and
    throughput; decode: bandwidth; masking (one shape) has its table only."""
    path = image_dir / f"study-{name}.png"
    if name == "memory":
        return plots.extra_memory(path, results, colours)[0]
    if name == "long_context":
        return plots.small_multiples(
            path, results, lambda r: r.flops_per_s / 1e12 if r.flops_per_s else None,
            "throughput (TFLOP/s)", colours, mark_out_of_memory=True)
    if name == "decode":
        return plots.small_multiples(
            path, results, lambda r: r.bytes_per_s / 1e9 if r.bytes_per_s else None,
            "bandwidth (GB/s)", colours)
    return None


def studies(db, image_dir, colours, up_to_run):
    """Every study, with its newest run up to `up_to_run` and what it measured."""
    found = []
    for name in STUDIES:
        description, finding = suite_text(name)
        run = db.latest_run_of_suite(name, up_to_run)
        study = Study(name, description, finding, run)
        if run is not None:
            results = db.results(run["id"], with_samples=False)
            # The kernels side by side at each shape, the fewest launches and bytes first (the
            # order the masking finding expects).
            orders = analysis.shape_orders(results)
            study.rows = sorted(results, key=lambda r: (orders[r.case_label], r.launches or 0,
                                                        r.extra_memory_bytes or 0, r.kernel))
            study.figure = _figure(name, image_dir, results, colours)
        found.append(study)
    return found


def bandwidth_text(result):
    """GB/s and, where the device's copy bandwidth was calibrated, its share."""
    if not result.bytes_per_s:
        return "-"
    text = fmt.byte_rate(result.bytes_per_s)
    if result.fraction_of_peak_bandwidth:
        text += f" ({fmt.percent(result.fraction_of_peak_bandwidth)} of copy)"
    return text
