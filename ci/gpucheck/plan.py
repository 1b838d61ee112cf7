"""The steps of ci/gpu-check.sh, most valuable first, and what each is predicted to cost.

A GPU call is scarce: one run of gpu-check must clear GPU-CLAIMS.md inside its budget. So the
steps come in the order of what they prove per second (the figures every claim names first;
then the correctness matrix; then the sanitizers; then the smoke suite), and each step's cost
is predicted before anything runs: attnbench's own cost model (`attnbench plan --json`: the
forward from FLOPs and bytes over the modeled GPU's ceilings (h100 or h200: the GPU present, or
`--device-model`) at a per-kernel efficiency, the host's
inputs and reference, the harness's timing plan in wall-clock time, cuDNN graph builds) for
every attnbench call, plus the fixed costs below for what is not a case (process starts,
compute-sanitizer's start-up, the calibration GEMMs). A prediction is a lead: a GPU run's
summary shows each step's measured seconds beside it.
"""

import dataclasses
import json
import subprocess

from gpucheck import experiment
from gpucheck.evidence import in_house_kernel_names

# What gpu-check promises (issue 11): the whole check fits 300 s; the plan for either Hopper (H100
# or H200) leaves a margin (240 s), and the figures, the reason for a GPU call, are done in the
# first 120 s.
DEFAULT_BUDGET_S = 300
PLAN_LIMIT_S = 240
FIGURES_BY_S = 120

# Watchdogs. A kernel that never ran on a GPU may hang: a short case timeout and the breaker
# (one crash or timeout stops that kernel) keep it to one watchdog per kernel. Figure cases
# compute a reference over 16k tokens on the host (seconds) before their forward: longer.
CASE_TIMEOUT_S = 10
FIGURE_CASE_TIMEOUT_S = 30

# Fixed costs, leads until a GPU run measures them (summary.md puts measured beside predicted).
# Unpack the bundle (~50 MiB xz), ldd, pre-checks, `attnbench list devices`: measured 2.3-3.8 s in
# the four H200 runs of 2026-12-04 (ci/gpu-runs/), counted at 5.
SETUP_S = 5.0
CALIBRATE_S = 15.0  # cuBLASLt GEMMs in fp16, bf16 and e4m3, a copy, each warmed up and repeated
CUDA_PROCESS_S = 2.0  # a process that creates a CUDA context and loads cuBLAS/cuDNN
SANITIZER_START_S = 8.0  # compute-sanitizer's own start-up and its instrumented context
SANITIZER_SLOWDOWN = 50.0  # a sanitized forward against a plain one (memcheck; racecheck more)
L2_FLUSH_TEST_S = 4.0  # 400 probe forwards of ~60 us, in its own process
CUDA_DEVICE_TESTS_S = 40.0  # the CudaDevice.* executor tests (one process each; calibration)
ISOLATION_TEST_S = 12.0  # a crash, a fresh worker, four small cases
# Every ptx.cuh wrapper on the GPU and emulated (2 x 20,000 mma cases emulated: about 20 s on
# the 2-core build host, less on the GPU host's 16), inputs and outputs written to OUTDIR.
PTX_CONFORMANCE_S = 30.0
# ctest lanes: the tests are host-bound (references, graph builds), and the GPU host has 16 cores.
# Five since issue 16's FP8 variants (four ran the step in 73 s against 87 predicted, 2026-12-04);
# six since cuDNN's 16-bit FP8 series joined (two more cuDNN tests, ~22 s each; five lanes ran the
# step in 63.4 s against 87 predicted, ci/gpu-runs/2026-12-04-h200-c4ddc40.md); seven since
# cuda.flash3_fp8_ws_transpose joined (61 more FP8 cases; six lanes would put the plan at 244 s);
# eight since cuda.flash2's backward joined the figures and gpu-smoke (issue 37; seven would put
# the plan at 245 s), still half the host's 16 cores, and the step has run faster than predicted
# (63.4 s against 87 at five lanes); nine since cuda.flash3's variants [stages=2,block_n=176],
# [pingpong=off], [rescale=after_pv] and [probe=clock64] joined (issue 38: 52 hopper-stages cases
# each; eight would put the plan at 243.2 s).
CTEST_PARALLEL = 9
CUDNN_CTEST_SHARDS = 4  # tests/gpu/test_gpu.cpp's kCudnnShards

# The masking study profiled on the GPU (issue 17): every GPU kernel of suites/masking.toml (the
# suite and --devices gpu select them, the PyTorch peers among them), CUPTI's launches and time
# per forward. The worker imports torch and makes its CUDA context once: a lead until a GPU run
# measures it.
MASKING_PROFILE_FORWARDS = 3
TORCH_IMPORT_S = 6.0
PROFILE_TRACE = "masking-trace.json"  # in OUTDIR

# The figure shapes and the timer's shape (tests/gpu/test_gpu.cpp, kTimerShape).
TIMER_SHAPE = "b=4,hq=16,s=4096,d=128,dtype=bf16"
TIMER_REPETITIONS, TIMER_MAX_CASE_S, TIMER_HOST_LOOP_S = 20, 3.0, 2.0

# Tiny shapes for the sanitizers: every mask path, GQA, a tail, decode, FP8 (memcheck); the
# in-house kernels' tile loops with partial tiles (racecheck, synccheck).
MEMCHECK_SHAPES = [
    "b=2,hq=4,hkv=2,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br",
    "b=2,hq=4,s=128,d=128,dtype=fp16,mask=padding",
    "b=1,hq=2,s=200,d=64,dtype=bf16,mask=window(32,8)",
    "b=1,hq=4,hkv=1,sq=1,sk=257,d=128,dtype=bf16",
    "b=2,hq=4,s=128,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor,mask=causal",
]
RACE_SHAPES = [
    "b=1,hq=2,hkv=1,sq=65,sk=97,d=64,dtype=bf16,mask=causal_br",
    "b=1,hq=1,s=80,d=128,dtype=fp16",
]
# The timer claims' tests (tests/gpu/test_gpu.cpp), run from the test binary in the figures step.
TIMER_TESTS = "test_gpu --gtest_filter=GpuTimer.*"


@dataclasses.dataclass
class Call:
    """One attnbench command inside a step, and how its cost is predicted."""
    label: str
    args: list  # attnbench arguments; gpu-check adds --db and --require-gpu
    plan_args: list | None = None  # `attnbench plan` arguments predicting it (None: fixed_s)
    fixed_s: float = 0.0
    sanitizer: str = ""  # compute-sanitizer tool wrapping the call, if any
    predicted_s: float = 0.0
    cases: int = 0
    rows: list = dataclasses.field(default_factory=list)  # (what, predicted seconds) to print


@dataclasses.dataclass
class Step:
    name: str
    proves: str
    needs: list  # pre-checks that must pass, else the step is disabled with their reason
    calls: list = dataclasses.field(default_factory=list)
    fixed_s: float = 0.0
    predicted_s: float = 0.0
    ends_at_s: float = 0.0
    device_model: str = ""  # the model attnbench planned its calls for ("" for fixed costs)
    device_model_source: str = ""  # why that model (--device-model, the GPU present, default)


def steps(case_filter="", kernels=()):
    """The steps in the order they run. kernels: the registry, as `attnbench list kernels --json`
    states it (registry_kernels): racecheck and synccheck cover its in-house kernels, a kernel
    added to the registry included without a change here."""
    in_house = ",".join(in_house_kernel_names(list(kernels)))
    if not in_house:
        raise ValueError("the registry names no in-house kernel (attnbench list kernels --json)")
    filter_args = ["--filter", case_filter] if case_filter else []
    selection = ["--devices", "gpu", "--breaker"]
    figures = Step("figures", "calibrated ceilings, every claimed figure, the timers, energy",
                   needs=["attnbench", "cublas"])  # without NVML only energy is lost
    figures.calls = [
        Call("calibrate", ["calibrate", "--devices", "gpu"], fixed_s=CALIBRATE_S),
        Call("figures", ["run", "--suite", "gpu-figures", "--energy", *selection,
                         "--case-timeout", str(FIGURE_CASE_TIMEOUT_S)],
             plan_args=["--suite", "gpu-figures", "--energy"]),
        # The two timer claims, from the test binary (not attnbench): predicted by its shape.
        Call(TIMER_TESTS, [], plan_args=["--shape", TIMER_SHAPE, "--kernels", "cudnn.sdpa",
                                         "--repetitions", str(TIMER_REPETITIONS),
                                         "--max-case-seconds", str(TIMER_MAX_CASE_S)],
             fixed_s=TIMER_HOST_LOOP_S + L2_FLUSH_TEST_S + CUDA_PROCESS_S),
    ]
    ctest = Step("ctest", "every GPU kernel over the ctest suite; the executor; isolation",
                 needs=["attnbench", "ctest"])
    sanitizer = Step("sanitizer", "memcheck, racecheck and synccheck clean on tiny shapes",
                     needs=["attnbench", "compute-sanitizer"])
    sanitizer.calls = [
        Call("memcheck", ["check", "--kernels", "cuda.*,cudnn.*", *selection, *filter_args,
                          *[a for s in MEMCHECK_SHAPES for a in ("--shape", s)]],
             plan_args=["--kernels", "cuda.*,cudnn.*", "--check", *filter_args,
                        *[a for s in MEMCHECK_SHAPES for a in ("--shape", s)]],
             sanitizer="memcheck"),
        # Every pass: the backward kernels' shared-memory dS and atomic dQ (issue 37) included.
        *[Call(tool, ["check", "--kernels", in_house, "--pass", "all", *selection, *filter_args,
                      *[a for s in RACE_SHAPES for a in ("--shape", s)]],
               plan_args=["--kernels", in_house, "--pass", "all", "--check", *filter_args,
                          *[a for s in RACE_SHAPES for a in ("--shape", s)]],
               sanitizer=tool)
          for tool in ("racecheck", "synccheck")],
    ]
    smoke = Step("gpu-smoke", "the small GPU suite timed: launches, memory, clocks",
                 needs=["attnbench"])
    smoke.calls = [Call("gpu-smoke", ["run", "--suite", "gpu-smoke", *selection, *filter_args,
                                      "--case-timeout", str(CASE_TIMEOUT_S)],
                        plan_args=["--suite", "gpu-smoke", *filter_args])]
    profile = Step("profile", "the masking study: launches and time per forward by CUPTI",
                   needs=["attnbench", "cupti"])
    profile.calls = [Call("masking profile",
                          ["profile", "--suite", "masking", "--devices", "gpu", "--timed",
                           str(MASKING_PROFILE_FORWARDS), *filter_args, "--case-timeout",
                           str(FIGURE_CASE_TIMEOUT_S)],
                          plan_args=["--suite", "masking", "--check", *filter_args],
                          fixed_s=TORCH_IMPORT_S)]
    return [setup_step(), figures, ctest, sanitizer, smoke, profile]


def setup_step():
    return Step("setup", "the bundle loads; GPU, cuDNN, cuBLAS, NVML, tools present", needs=[],
                fixed_s=SETUP_S)


def experiment_steps(name):
    """The steps of `--experiment NAME` (gpucheck/experiment.py), in the order they run."""
    if name != "flash3":
        raise ValueError(f"--experiment {name}: accepted: {', '.join(experiment.EXPERIMENTS)}")
    rounds = Step("flash3-rounds", "cuda.flash3's variants and cudnn.sdpa round-robin, clocks",
                  needs=["attnbench"])  # without NVML only the clocks are lost
    rounds.calls = [Call("flash3 rounds",
                         ["run", "--suite", experiment.FLASH3_SUITE, "--kernels",
                          experiment.FLASH3_KERNELS, "--devices", "gpu", "--breaker",
                          "--case-timeout", str(experiment.ROUNDS_CASE_TIMEOUT_S)],
                         plan_args=["--suite", experiment.FLASH3_SUITE, "--kernels",
                                    experiment.FLASH3_KERNELS])]
    ncu = Step("flash3-ncu", "Nsight Compute on four variants: tensor pipe, L2, stalls",
               needs=["attnbench", "ncu"])
    ncu.calls = [Call(kernel, ["run", "--shape", experiment.NCU_SHAPE, "--kernels", kernel,
                               "--devices", "gpu", "--repetitions", "1", "--max-case-seconds",
                               "0.05", "--no-isolation"], fixed_s=experiment.NCU_CALL_S)
                 for kernel in experiment.NCU_KERNELS]
    return [setup_step(), rounds, ncu]


def attnbench_plan(cli, plan_args, device_model=None, environment=None):
    """`attnbench plan --json`: the cases and their predicted seconds, for `device_model` (None:
    attnbench takes the GPU present, else its default)."""
    model_args = ["--device-model", device_model] if device_model else []
    command = [cli, "plan", *model_args, "--json", *plan_args]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def registry_kernels(cli, environment=None):
    """The registry as `attnbench list kernels --json` states it (what gpu-check's setup records
    in evidence.json): the one list of kernels the plan selects from."""
    done = subprocess.run([cli, "list", "kernels", "--json"], capture_output=True, text=True,
                          check=False, env=environment)
    if done.returncode != 0:
        raise RuntimeError(f"{cli} list kernels --json: {done.stderr.strip()}")
    return json.loads(done.stdout)


def gpu_ctest_kernels(cli, environment=None):
    """The kernels GpuCtestSuite checks (tests/gpu/test_gpu.cpp: every built-in CUDA kernel with
    a forward; it checks their forward, the backward runs in the figures and gpu-smoke steps), in
    the registry's order, each with its correctness suite: {name: suite}."""
    return {kernel["name"]: kernel["correctness_suite"]
            for kernel in registry_kernels(cli, environment)
            if kernel["backend"] == "cuda" and not kernel["origin"]
            and "fwd" in kernel.get("passes", ["fwd"])}


def lanes_makespan(durations, lanes):
    """ctest --parallel: the longest first, each onto the least loaded lane."""
    loads = [0.0] * lanes
    for duration in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += duration
    return max(loads)


def predict_ctest(cli, device_model, environment=None):
    """The ctest step: GpuCtestSuite per kernel (check-only over the ctest suite; cudnn.sdpa
    in shards), the executor tests and the isolation test, over CTEST_PARALLEL lanes."""
    durations, cases, rows = [], 0, []
    for kernel, suite in gpu_ctest_kernels(cli, environment).items():
        # The kernel's own correctness suite, as GpuCtestSuite runs it (the Hopper stages, d 128
        # bf16 only, and the FP8 kernels, d 128, run ctest's shapes at their size).
        planned = attnbench_plan(cli, ["--suite", suite, "--kernels", kernel, "--check",
                                       "--pass", "fwd"], device_model, environment)
        supported = sum(1 for c in planned["cases"] if c["supported"])
        cases += supported
        shards = CUDNN_CTEST_SHARDS if kernel == "cudnn.sdpa" else 1
        durations += [planned["total_s"] / shards + CUDA_PROCESS_S] * shards
        rows.append((f"GpuCtestSuite {kernel}: {supported} cases checked"
                     + (f", {shards} shards" if shards > 1 else ""), planned["total_s"]))
    durations += [CUDA_DEVICE_TESTS_S, ISOLATION_TEST_S, PTX_CONFORMANCE_S]
    rows += [("CudaDevice.* executor tests", CUDA_DEVICE_TESTS_S),
             ("GpuIsolation out-of-bounds test", ISOLATION_TEST_S),
             ("PtxConformance: every ptx.cuh wrapper, GPU against emu", PTX_CONFORMANCE_S)]
    return lanes_makespan(durations, CTEST_PARALLEL), cases, rows


def predict(plan_steps, cli, device_model=None, environment=None):
    """Fills predicted_s of every call and step and the step's end time, in order; each step
    planned by attnbench names the device model it was planned for."""
    clock = 0.0
    for step in plan_steps:
        total = step.fixed_s
        if step.name == "ctest":
            total, cases, rows = predict_ctest(cli, device_model, environment)
            step.calls = [Call(f"ctest -L gpu (in {CTEST_PARALLEL} lanes)", [], fixed_s=total,
                               predicted_s=total, cases=cases, rows=rows)]
        else:
            for call in step.calls:
                call.predicted_s = call.fixed_s
                if call.plan_args is not None:
                    planned = attnbench_plan(cli, call.plan_args, device_model, environment)
                    step.device_model = planned["device_model"]
                    step.device_model_source = planned.get("device_model_source", "")
                    call.cases = sum(1 for c in planned["cases"] if c["supported"])
                    call.rows = [(f"{c['kernel']} {c['shape']}", c["case_s"])
                                 for c in planned["cases"] if c["supported"]]
                    forwards_s = sum(c.get("check_s", 0) + c.get("timing_s", 0)
                                     for c in planned["cases"])
                    call.predicted_s += planned["total_s"]
                    if call.sanitizer:
                        call.predicted_s += (SANITIZER_START_S
                                             + (SANITIZER_SLOWDOWN - 1) * forwards_s)
                total += call.predicted_s
        step.predicted_s = total
        clock += total
        step.ends_at_s = clock
    return plan_steps


def planned_device_model(plan_steps):
    """(model, source) attnbench planned the steps for: ("", "") when no step asked it."""
    planned = next((s for s in plan_steps if s.device_model), None)
    return (planned.device_model, planned.device_model_source) if planned else ("", "")


def format_plan(plan_steps, budget_s):
    """The plan as text: every step, its calls and cases, predicted seconds, the verdicts."""
    model, source = planned_device_model(plan_steps)
    lines = [f"gpu-check plan for a modeled {model or '?'} ({source or 'no attnbench call'}; "
             f"budget {budget_s:g} s; plan limit {PLAN_LIMIT_S} s, figures by {FIGURES_BY_S} s)",
             ""]
    lines.append(f"{'step':<11} {'predicted':>10} {'ends at':>9}  what it proves / runs")
    for step in plan_steps:
        lines.append(f"{step.name:<11} {step.predicted_s:>9.1f}s {step.ends_at_s:>8.1f}s  "
                     f"{step.proves}")
        for call in step.calls:
            what = " ".join(call.args) if call.args else call.label
            under = f"{call.sanitizer}: " if call.sanitizer else ""
            cases = f", {call.cases} case{'' if call.cases == 1 else 's'}" if call.cases else ""
            lines.append(f"{'':<11} {call.predicted_s:>9.1f}s {'':>9}    {under}{what}{cases}")
            lines += [f"{'':<11} {seconds:>9.2f}s {'':>9}      {row}" for row, seconds in call.rows]
    figures_end = figures_end_s(plan_steps)
    total = plan_steps[-1].ends_at_s
    lines.append("")
    if figures_end is not None:
        lines.append(f"figures done at {figures_end:.1f} s (limit {FIGURES_BY_S} s): "
                     + ("ok" if figures_end <= FIGURES_BY_S else "TOO LATE"))
    lines.append(f"predicted total {total:.1f} s (limit {PLAN_LIMIT_S} s): "
                 + ("ok" if total <= PLAN_LIMIT_S else "OVER"))
    return "\n".join(lines)


def figures_end_s(plan_steps):
    """When the figures step ends; None for an experiment's plan, which has none."""
    return next((s.ends_at_s for s in plan_steps if s.name == "figures"), None)


def plan_fits(plan_steps):
    figures_end = figures_end_s(plan_steps)
    return ((figures_end is None or figures_end <= FIGURES_BY_S)
            and plan_steps[-1].ends_at_s <= PLAN_LIMIT_S)
