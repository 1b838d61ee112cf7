"""The slowest tests of ci/test.sh's ctest runs, from the JUnit files ctest wrote.

    python3 ci/test_times.py [--top N] JUNIT.xml...

Prints one line per test, slowest first: seconds, status, name, and the file it came from (the
tier's run), so a budget overrun names what to move or shrink. ctest writes one <testcase> per
test with its `time` attribute in seconds."""

import argparse
import sys
from pathlib import Path
from xml.etree import ElementTree


def test_times(paths):
    """(seconds, status, name, run) of every test case in the JUnit files that exist."""
    times = []
    for path in map(Path, paths):
        if not path.exists():
            continue
        for case in ElementTree.parse(path).getroot().iter("testcase"):
            # ctest writes status="run" for a test that ran and passed.
            status = case.get("status") or "run"
            if case.find("failure") is not None:
                status = "failed"
            elif status == "run":
                status = "passed"
            times.append((float(case.get("time") or 0), status, case.get("name", "?"),
                          path.stem))
    return sorted(times, reverse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("junit", nargs="+")
    args = parser.parse_args(argv)
    times = test_times(args.junit)
    print(f"the {min(args.top, len(times))} slowest of {len(times)} tests:")
    for seconds, status, name, run in times[:args.top]:
        print(f"  {seconds:8.1f} s  {status:<8} {name}  [{run}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
