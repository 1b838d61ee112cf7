"""Shared setup of ci/tests: ci/ on the import path (the gpucheck package, as gpu-check runs it
with PYTHONPATH=ci) and the repository root (reports/tests/fixtures.py, whose databases follow
harness/store.cpp's migrations), so plain `python3 -m pytest ci/tests` works from anywhere.
Fresh random data per test; the seed is printed, replay with ATTNBENCH_TEST_SEED=<seed>."""

import os
import pathlib
import random
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
for path in (ROOT / "ci", ROOT):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


@pytest.fixture
def rng():
    seed = int(os.environ.get("ATTNBENCH_TEST_SEED", random.SystemRandom().randrange(2**32)))
    # Shown by pytest only when the test fails, with the rest of its captured output.
    print(f"random seed {seed} (replay: ATTNBENCH_TEST_SEED={seed})")
    return random.Random(seed)
