"""Shared test fixtures: fresh random data per test (the seed is printed, so a failure can be
replayed with ATTNBENCH_TEST_SEED=<seed>), and the markers ctest selects by."""

import os
import random

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: scale tests, run on demand (ctest label slow)")


@pytest.fixture
def rng():
    seed = int(os.environ.get("ATTNBENCH_TEST_SEED", random.SystemRandom().randrange(2**32)))
    # Shown by pytest only when the test fails, with the rest of its captured output.
    print(f"random seed {seed} (replay: ATTNBENCH_TEST_SEED={seed})")
    return random.Random(seed)
