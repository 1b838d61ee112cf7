"""python3 -m reports build --db FILE --out DIR [--run ID] [--compare-to ID]
python3 -m reports screenshot PAGE PNG   (headless Chromium: load time, console errors, picture)"""

import argparse
import pathlib
import sys

from reports.build import build
from reports.db import ReportError

# attnbench's exit codes: 1 a check failed, 2 a usage or infrastructure error.
CHECK_FAILED = 1
USAGE_ERROR = 2


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m reports",
                                     description="attnbench's HTML report from its database")
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="write index.html, history.html, "
                                        "compare.html and their images")
    build_command.add_argument("--db", default="results/attnbench.sqlite",
                               help="the attnbench database (default %(default)s)")
    build_command.add_argument("--out", default="results/report",
                               help="output folder (default %(default)s)")
    build_command.add_argument("--run", type=int, help="run id (default: the newest run)")
    build_command.add_argument("--compare-to", type=int,
                               help="run id for compare.html (default: the newest earlier run "
                               "of another commit)")
    shot_command = commands.add_parser("screenshot", help="load a page in headless Chromium at "
                                       "1400x900 and save what it shows")
    shot_command.add_argument("page", help="an HTML page of the report")
    shot_command.add_argument("png", help="where to write the screenshot")
    arguments = parser.parse_args(argv)
    if arguments.command == "screenshot":
        return screenshot(arguments.page, arguments.png)
    try:
        summary = build(arguments.db, arguments.out, arguments.run, arguments.compare_to)
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    print(f"report of run {summary.run_id} ({summary.results} results, {summary.images} images) "
          f"written to {arguments.out}/index.html in {summary.seconds:.1f} s")
    return 0


def screenshot(page, png):
    from reports import browser  # only this command needs Chromium

    try:
        load = browser.load_page(page)
    except browser.BrowserError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    pathlib.Path(png).write_bytes(load.screenshot)
    where = "" if load.triage_top is None else f", triage table at {load.triage_top:.0f} px"
    print(f"{page} loaded in {load.load_seconds:.3f} s, {len(load.console_errors)} console "
          f"error(s){where}; screenshot {png}")
    for error in load.console_errors:
        print(f"console error: {error}", file=sys.stderr)
    return CHECK_FAILED if load.console_errors else 0
