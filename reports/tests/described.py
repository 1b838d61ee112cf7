"""What attnbench would store about a case, as `attnbench describe` says it: the test fixtures'
Case, whose canonical shape, cases row, series and kernel-wide keys, label, FLOPs, bytes and
kernel expectation all come from the binary (ATTNBENCH_CLI, else build/bin/attnbench), asked
once for many cases and kept for the session. The fixtures keep no shape syntax, key format or
FLOP convention of their own."""

import functools
import json
import os
import pathlib
import subprocess
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]


def attnbench_cli():
    """The attnbench binary of this tree: ctest's ATTNBENCH_CLI, else build/bin/attnbench."""
    return os.environ.get("ATTNBENCH_CLI") or str(ROOT / "build" / "bin" / "attnbench")


# What `attnbench describe` said, kept for the whole test session: {(kernel, shape input,
# distribution): its case}, {shape input: its shape}, {key: its parts as result_analysis stores
# them}, and the build part of every key.
_CASES, _SHAPES, _KEY_PARTS = {}, {}, {}
_BUILD = []


def describe(cases, devices=()):
    """Asks `attnbench describe` once about every case not described yet, or not on one of
    `devices` (device model names); afterwards each case's properties read what it said."""
    devices = set(devices)
    wanted = [c for c in cases if c.described is None or not devices <= set(c.described["series_keys"])]
    if not wanted:
        return
    devices |= {d for c in wanted if c.described for d in c.described["series_keys"]}
    inputs = sorted({c.shape_input for c in wanted})
    command = [attnbench_cli(), "describe", "--json"]
    command += [arg for shape in inputs for arg in ("--shape", shape)]
    command += [arg for kernel in sorted({c.kernel for c in wanted}) for arg in ("--kernel-name", kernel)]
    command += [arg for dist in sorted({c.distribution for c in wanted}) for arg in ("--dist", dist)]
    command += [arg for device in sorted(devices) for arg in ("--device-name", device)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"attnbench describe: {done.stderr.strip()}")
    described = json.loads(done.stdout)
    _BUILD[:] = [described["build"]]
    _SHAPES.update({shape["input"]: shape for shape in described["shapes"]})
    for one in described["cases"]:
        _CASES[(one["kernel"], one["input"], one["distribution"])] = one
        for device, key in one["series_keys"].items():
            _KEY_PARTS[key] = {"scope": "series", "kernel": one["kernel"], "shape": one["shape"],
                               "distribution": one["distribution"], "device_name": device,
                               "build": described["build"]}
        for device, key in one["kernel_wide_keys"].items():
            _KEY_PARTS[key] = {"scope": "kernel", "kernel": one["kernel"], "shape": "*",
                               "distribution": "*", "device_name": device,
                               "build": described["build"]}


def build_label():
    """The build part of every series key attnbench writes (this binary's build)."""
    if not _BUILD:
        describe([Case("cpu.flash")])
    return _BUILD[0]


def key_parts(series_key):
    """A key's parts as result_analysis stores them, for a key attnbench described."""
    return _KEY_PARTS[series_key]


@dataclass(frozen=True)
class Case:
    kernel: str
    batch: int = 1
    heads_q: int = 8
    heads_kv: int = 8
    seqlen_q: int = 512
    seqlen_k: int = 512
    head_dim: int = 64
    dtype: str = "bf16"
    output_dtype: str = ""  # "" = the default for the input dtype
    fp8_scaling: str = "none"
    mask: str = "none"  # none, causal, causal_br, window(L,R), padding
    layout: str = "bshd"
    distribution: str = "normal"
    pass_name: str = "fwd"  # fwd, bwd, fwd_bwd

    @functools.cached_property
    def shape_input(self):
        """The case in the CLI's --shape syntax, every field named; attnbench canonicalizes it."""
        out = f",out={self.output_dtype}" if self.output_dtype else ""
        return (f"b={self.batch},hq={self.heads_q},hkv={self.heads_kv},sq={self.seqlen_q},"
                f"sk={self.seqlen_k},d={self.head_dim},dtype={self.dtype}{out},"
                f"fp8_scaling={self.fp8_scaling},mask={self.mask},layout={self.layout},"
                f"pass={self.pass_name}")

    @property
    def described(self):
        """What `attnbench describe` said about this case; None before it was asked."""
        return _CASES.get((self.kernel, self.shape_input, self.distribution))

    def _described(self, device=None):
        # Kept on the instance once found (a year's fixture reads it millions of times).
        found = self.__dict__.get("_found")
        if found is None or (device and device not in found["series_keys"]):
            found = self.described
            if found is None or (device and device not in found["series_keys"]):
                describe([self], [device] if device else [])
                found = self.described
            self.__dict__["_found"] = found
        return found

    @property
    def shape(self):
        """reference/problem.cpp's shape_string: the CLI's --shape text."""
        return self._described()["shape"]

    @property
    def label(self):
        """As the report (and the CLI's summary table) prints a case."""
        return self._described()["case_label"]

    @property
    def flops(self):
        """The project's convention (reference/flops.h): the visible pairs, diagonal included."""
        return _SHAPES[self._described()["input"]]["flops"]

    @property
    def bytes(self):
        return _SHAPES[self._described()["input"]]["bytes"]

    @property
    def case_row(self):
        """The cases row as the store writes it."""
        return self._described()["case_row"]

    @property
    def expected(self):
        """The kernel's expectation of a forward ({} when it declares none or is unknown)."""
        return self._described().get("expected") or {}

    def series_key(self, device_name):
        return self._described(device_name)["series_keys"][device_name]

    def kernel_wide_key(self, device_name):
        return self._described(device_name)["kernel_wide_keys"][device_name]
