#!/usr/bin/env bash
# ci/behaviour-check.sh ATTNBENCH_BINARY OUTDIR
#
# The behaviour check: builds the fixed-seed database of ci/behaviour-db.py, runs the CLI's
# judging and reading commands and the HTML report over it, and writes what each printed (stdout
# and stderr together, then its exit code) to OUTDIR/*.txt, with the volatile bits (paths, the
# report's build time, "now" timestamps) normalized. Two runs of one binary write identical
# files; a refactor that keeps behaviour writes the files committed in ci/behaviour-runs/before:
#
#   ci/behaviour-check.sh build/bin/attnbench /tmp/after && diff -r ci/behaviour-runs/before /tmp/after
#
# Environment:
#   BEHAVIOUR_REPORT_ROOT  the repository whose `reports` package builds the report (default: the
#                          repository this script is in); the old report for a "before" capture.
#   BEHAVIOUR_SEED         the database's seed (default: behaviour-db.py's, 20261203).
#   BEHAVIOUR_WORK         where the database and the HTML go (default: a fresh mktemp -d, kept
#                          and named at the end; nothing of it is in OUTDIR).
# Exit: 0 when every capture was written (the commands' own exit codes are in the files), 2 on a
# usage error.
set -uo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 ATTNBENCH_BINARY OUTDIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(cd "$(dirname "$1")" 2>/dev/null && pwd)/$(basename "$1")
if [[ ! -x "$BIN" ]]; then
  echo "error: $1 is not an executable" >&2
  exit 2
fi
mkdir -p "$2" || exit 2
OUT=$(cd "$2" && pwd)
# The database's cases are described by the binary under check (reports/tests/fixtures.py).
export ATTNBENCH_CLI=$BIN
REPORT_ROOT=$(cd "${BEHAVIOUR_REPORT_ROOT:-$ROOT}" 2>/dev/null && pwd) || {
  echo "error: BEHAVIOUR_REPORT_ROOT=${BEHAVIOUR_REPORT_ROOT:-} is not a directory" >&2
  exit 2
}
WORK=${BEHAVIOUR_WORK:-$(mktemp -d /tmp/behaviour-check.XXXXXX)}
mkdir -p "$WORK" || exit 2
WORK=$(cd "$WORK" && pwd)
DB=$WORK/behaviour.sqlite
# This repository and the report's both read <REPO> (the longer path first: one may prefix the
# other), so a capture with BEHAVIOUR_REPORT_ROOT and one without compare equal.
if (( ${#REPORT_ROOT} >= ${#ROOT} )); then LONGER_ROOT=$REPORT_ROOT SHORTER_ROOT=$ROOT
else LONGER_ROOT=$ROOT SHORTER_ROOT=$REPORT_ROOT; fi
SEED_ARGS=()
[[ -n "${BEHAVIOUR_SEED:-}" ]] && SEED_ARGS=(--seed "$BEHAVIOUR_SEED")
# The days a "now" timestamp can carry during this script (it may cross midnight).
TODAY=$(date -u +%Y-%m-%d)
YESTERDAY=$(date -u -d yesterday +%Y-%m-%d 2>/dev/null || echo "$TODAY")
export PYTHONDONTWRITEBYTECODE=1 TZ=UTC LC_ALL=C.UTF-8

rm -f "$OUT"/*.txt

normalize() {
  local now_day
  now_day=$(date -u +%Y-%m-%d)
  sed -E \
    -e "s#$BIN#attnbench#g" \
    -e "s#$WORK#<WORK>#g" \
    -e "s#$OUT#<OUT>#g" \
    -e "s#$LONGER_ROOT#<REPO>#g" \
    -e "s#$SHORTER_ROOT#<REPO>#g" \
    -e "s#($TODAY|$YESTERDAY|$now_day)[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z?#<NOW>#g" \
    -e "s#(written to .* in )[0-9]+(\.[0-9]+)? s\$#\1<SECONDS> s#" \
    -e "/Matplotlib is building the font cache/d"
}

# capture NAME COMMAND...: the command's stdout+stderr and exit code, normalized, in OUT/NAME.txt.
capture() {
  local name=$1
  shift
  local raw=$WORK/$name.raw code
  timeout 300 "$@" >"$raw" 2>&1
  code=$?
  {
    printf '$'
    printf ' %s' "$@"
    printf '\n'
    cat "$raw"
    printf '[exit %d]\n' "$code"
  } | normalize >"$OUT/$name.txt"
  echo "behaviour-check: $name: exit $code" >&2
}

# report NAME [--run ID]: the report built by REPORT_ROOT's code into WORK/NAME, its console in
# OUT/NAME-build.txt and its verdict-bearing text in OUT/NAME-verdicts.txt.
report() {
  local name=$1
  shift
  rm -rf "${WORK:?}/$name"
  capture "$name-build" env -C "$REPORT_ROOT" PYTHONPATH="$REPORT_ROOT" \
    python3 -m reports build --db "$DB" --out "$WORK/$name" "$@"
  if [[ ! -f "$WORK/$name/index.html" ]]; then
    echo "no report: python3 -m reports build wrote no index.html (see $name-build.txt)" \
      >"$OUT/$name-verdicts.txt"
    return
  fi
  python3 - "$WORK/$name" <<'PY' 2>&1 | normalize >"$OUT/$name-verdicts.txt"
"""The verdict-bearing text of a report: the run's status counts, the triage table (alerts with
their details), the accuracy table, the history page's series table (this run's change per
series, alert counts) and its per-series alert lists (#plots, text only), the comparison page
(per kernel and per case). As plain text, one table row a line, cells separated by ' | '."""
import pathlib
import re
import sys
from html.parser import HTMLParser

BLOCKS = {"p", "div", "tr", "li", "h1", "h2", "h3", "h4", "section", "table", "details",
          "summary", "caption", "figcaption", "dt", "dd", "br", "thead", "tbody"}
# Per page: the sections (by id) holding verdicts, in page order.
WANTED = {"index.html": ("summary", "triage", "accuracy"),
          "history.html": ("series", "plots"),
          "compare.html": ("comparison",)}


class Text(HTMLParser):
    """Text of the elements with the wanted ids (and everything inside them): a line per block
    or table row; inside a cell, a details list reads {key=value; ...} on the row's line."""

    VOID = {"br", "img", "input", "meta", "link", "hr", "wbr", "col", "source"}

    def __init__(self, wanted):
        super().__init__(convert_charrefs=True)
        self.wanted = wanted
        self.stack = []  # (tag, the wanted id it opened or None)
        self.parts = {}
        self.current = None
        self.skip = 0  # inside script, style or a details' summary
        self.cells = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        opened = None
        if self.current is None and attributes.get("id") in self.wanted:
            opened = self.current = attributes["id"]
            self.parts.setdefault(opened, [])
        if tag not in self.VOID:
            self.stack.append((tag, opened))
        self.mark(tag, opening=True)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        self.mark(tag, opening=False)
        while self.stack:
            open_tag, opened = self.stack.pop()
            if opened is not None:
                self.current = None
            if open_tag == tag:
                break

    def mark(self, tag, opening):
        if tag in ("script", "style") or (tag == "summary" and self.cells):
            self.skip += 1 if opening else -1
        if tag in ("td", "th"):
            self.cells += 1 if opening else -1
            self.put(" | " if opening else "")
        elif self.cells:
            self.put({("dl", True): " {", ("dl", False): "} ", ("dt", False): "=",
                      ("dd", False): "; ", ("dt", True): "",
                      ("dd", True): ""}.get((tag, opening), " " if tag in BLOCKS else ""))
        elif tag in BLOCKS:
            self.put("\n")

    def put(self, text):
        if self.current is not None and text:
            self.parts[self.current].append(text)

    def handle_data(self, data):
        if not self.skip:
            self.put(re.sub(r"\s+", " ", data))


folder = pathlib.Path(sys.argv[1])
for page, ids in WANTED.items():
    path = folder / page
    print(f"==== {page}")
    if not path.exists():
        print("(page not written)")
        continue
    parser = Text(ids)
    parser.feed(path.read_text(encoding="utf-8"))
    for section in ids:
        print(f"---- #{section}")
        if section not in parser.parts:
            print("(section not found)")
            continue
        for line in "".join(parser.parts[section]).split("\n"):
            line = re.sub(r" +", " ", line).replace("; }", "}").strip()
            if line and line != "|":
                print(line)
PY
}

capture db python3 "$ROOT/ci/behaviour-db.py" "$DB" "${SEED_ARGS[@]}"
if [[ ! -f "$DB" ]]; then
  echo "error: ci/behaviour-db.py wrote no database (see $OUT/db.txt)" >&2
  exit 2
fi
# Judge every run, oldest first (the rerun, run 31, is folded into run 30).
capture regressions-unanalysed "$BIN" regressions --db "$DB" --run unanalysed
capture show-latest "$BIN" show --db "$DB" latest
capture show-30 "$BIN" show --db "$DB" 30
capture show-28 "$BIN" show --db "$DB" 28
capture regressions-latest "$BIN" regressions --db "$DB" --run latest
capture regressions-31 "$BIN" regressions --db "$DB" --run 31
capture history-cpu.flash "$BIN" history --db "$DB" --kernel cpu.flash
capture history-cpu.naive "$BIN" history --db "$DB" --kernel cpu.naive
capture compare-25-30 "$BIN" compare --db "$DB" 25 30
# The report of the newest run, and of run 22 (two runs after cpu.flash's expected change, where
# the CLI restarted the series' baseline and has too little history to judge).
report report
report report-run22 --run 22

echo "behaviour-check: $(ls "$OUT"/*.txt | wc -l) files in $OUT; database and HTML in $WORK" >&2
exit 0
