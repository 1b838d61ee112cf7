"""gpu-check without a GPU: the plan fits its limits, the budget skips what does not fit, a
missing tool disables only its step, an interrupted run still leaves a summary naming the step it
hit, and the bundle's source manifest catches a checkout it was not built from.

The plan needs an attnbench binary (ATTNBENCH_CLI, set by ctest; else build/bin/attnbench)."""

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from gpucheck import plan, run, setup
from gpucheck.claims import FIGURE_DTYPE, FLASH3_STAGES

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("ATTNBENCH_CLI") or str(ROOT / "build" / "bin" / "attnbench")
needs_cli = pytest.mark.skipif(not Path(CLI).exists(), reason=f"no attnbench binary at {CLI}")


# ---- the plan ------------------------------------------------------------------------------------

@needs_cli
@pytest.mark.parametrize("model", ["h100", "h200"])
def test_the_plan_for_either_hopper_fits_with_the_figures_first(model):
    done = subprocess.run([str(ROOT / "ci" / "gpu-check.sh"), "--plan", "--device-model", model],
                          capture_output=True, text=True, env=dict(os.environ, ATTNBENCH_CLI=CLI))
    assert done.returncode == 0, done.stdout + done.stderr
    text = done.stdout
    assert text.startswith(f"gpu-check plan for a modeled {model} (--device-model;"), text
    order = [m.group(1) for m in re.finditer(r"^(\S+)\s+[\d.]+s\s+[\d.]+s", text, flags=re.M)]
    assert order == ["setup", "figures", "ctest", "sanitizer", "gpu-smoke", "profile"], text
    figures_end = float(re.search(r"figures done at ([\d.]+) s", text).group(1))
    total = float(re.search(r"predicted total ([\d.]+) s", text).group(1))
    assert figures_end <= plan.FIGURES_BY_S, text
    assert total <= plan.PLAN_LIMIT_S, text
    assert "run --suite gpu-figures" in text and "racecheck" in text and "synccheck" in text
    assert "profile --suite masking" in text


@needs_cli
def test_plan_names_its_model_and_refuses_an_unknown_one():
    """Without --device-model a build machine plans for the default and says so; an H100's
    slower memory makes a memory-bound case cost more than on an H200, a compute-bound one not."""
    memory_bound = ["--shape", "b=1,hq=32,sq=1,sk=65536,d=128,dtype=bf16", "--kernels",
                    "cuda.flash2"]
    default = plan.attnbench_plan(CLI, memory_bound)
    assert (default["device_model"], default["device_model_source"]) == \
        ("h200", "no GPU here: the default")
    h100 = plan.attnbench_plan(CLI, memory_bound, "h100")
    assert h100["rates_measured"].startswith("leads")
    ratio = h100["cases"][0]["forward_s"] / default["cases"][0]["forward_s"]
    assert 1.3 < ratio < 1.5, ratio  # 4.3 / 3.0 TB/s, less the launch both pay
    compute_bound = ["--shape", "b=2,hq=16,s=8192,d=128,dtype=bf16", "--kernels", "cudnn.sdpa"]
    assert plan.attnbench_plan(CLI, compute_bound, "h100")["cases"][0]["forward_s"] == \
        pytest.approx(plan.attnbench_plan(CLI, compute_bound, "h200")["cases"][0]["forward_s"],
                      rel=0.02)
    done = subprocess.run([CLI, "plan", "--device-model", "a100", *compute_bound],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --device-model 'a100': accepted: h100, h200"


@needs_cli
def test_the_sanitizer_covers_the_registrys_in_house_kernels_and_no_list_of_its_own():
    """racecheck and synccheck take the in-house kernels of the registry as attnbench lists it: a
    kernel added there is covered with no change to the plan, a cuDNN or cuBLAS kernel never;
    the masking study's kernels are its suite's (no --kernels of the plan's own)."""
    registry = plan.registry_kernels(CLI)
    added = {"name": "cuda.flash4", "backend": "emu", "unavailable": "", "origin": "",
             "correctness_suite": "ctest"}
    sanitizer = next(s for s in plan.steps("", registry + [added]) if s.name == "sanitizer")
    for call in sanitizer.calls:
        if call.sanitizer not in ("racecheck", "synccheck"):
            continue
        named = call.args[call.args.index("--kernels") + 1].split(",")
        assert "cuda.flash4" in named and "cuda.naive" in named and "cuda.flash3" in named
        assert not [k for k in named if k.startswith(("cudnn.", "cpu.", "torch."))
                    or k == "cuda.naive_cublas"]
        assert named == call.plan_args[call.plan_args.index("--kernels") + 1].split(",")
    profile = next(s for s in plan.steps("", registry) if s.name == "profile")
    assert "--kernels" not in profile.calls[0].args and "--kernels" not in profile.calls[0].plan_args
    with pytest.raises(ValueError, match="no in-house kernel"):
        plan.steps("", [k for k in registry if k["backend"] != "emu"])


@needs_cli
def test_every_step_has_a_prediction_and_the_figures_only_the_claimed_kernels():
    steps = plan.predict(plan.steps("", plan.registry_kernels(CLI)), CLI)
    assert all(step.predicted_s > 0 for step in steps)
    assert [s.ends_at_s for s in steps] == sorted(s.ends_at_s for s in steps)
    figures = next(s for s in steps if s.name == "figures")
    planned = plan.attnbench_plan(CLI, ["--suite", "gpu-figures"], "h200")
    supported = [c for c in planned["cases"] if c["supported"]]
    kernels = {c["kernel"] for c in supported}
    # Only the kernels a figure claim judges (cuda.flash2's claim is relative to
    # torch.sdpa_flash, listed for when the peer exists; the flash3 stages stand beside
    # cuda.flash3), each at one shape except cuda.flash3 and cudnn.sdpa (their seqlen 16k pairs
    # too: cuda.flash3's causal is judged against cudnn.sdpa's) and cuda.flash3_fp8 (at bf16
    # too, beside cuda.flash3_fp8_incoherent: the rotation's cost).
    assert kernels <= set(FIGURE_DTYPE)
    assert {"cudnn.sdpa", "cudnn.sdpa_fp8", "cuda.flash2", *FLASH3_STAGES} <= kernels
    assert sum(c["kernel"] == "cuda.flash3" for c in supported) == 3
    long_context = [c["kernel"] for c in supported if ",sq=16384," in c["shape"]]
    assert sorted(long_context) == ["cuda.flash3", "cuda.flash3", "cudnn.sdpa", "cudnn.sdpa"]
    assert sum(c["kernel"] == "cuda.flash3_fp8" for c in supported) == 2
    # The backward beside its peers at the figure shape: cudnn.sdpa and torch.sdpa_cudnn (issue
    # 36), cuda.flash2 and torch.sdpa_flash, and cuda.flash2_deterministic (issue 37).
    backward = [c["kernel"] for c in supported if c["shape"].endswith(",pass=bwd")]
    assert sorted(backward) == ["cuda.flash2", "cuda.flash2_deterministic", "cudnn.sdpa",
                                "torch.sdpa_cudnn", "torch.sdpa_flash"]
    forwards = {c["kernel"] for c in supported if not c["shape"].endswith(",pass=bwd")}
    assert figures.calls[1].cases == len(forwards) + 5 + len(backward)


def test_makespan_puts_the_longest_first():
    assert plan.lanes_makespan([30, 30, 30, 30, 10], 4) == 40
    assert plan.lanes_makespan([5, 5, 5], 1) == 15


# ---- the runner, with fake steps -----------------------------------------------------------------

def fake_step(name, predicted_s, needs=()):
    step = plan.Step(name, f"fake {name}", needs=list(needs))
    step.predicted_s = predicted_s
    return step


def make_check(tmp_path, budget_s):
    check = run.Check(ROOT, tmp_path / "out", budget_s)
    check.prechecks.update({"attnbench": "ok", "compute-sanitizer": "missing: not on PATH"})
    return check


def test_a_step_that_does_not_fit_is_recorded_not_reached(tmp_path, rng):
    budget = rng.uniform(40, 60)
    check = make_check(tmp_path, budget)
    ran = []
    functions = {name: (lambda c, s, name=name: (ran.append(name) or ("pass", "")))
                 for name in ("figures", "ctest", "gpu-smoke")}
    steps = [fake_step("figures", 5), fake_step("ctest", 4 * budget), fake_step("gpu-smoke", 5)]
    run.run_steps(check, steps, functions)
    results = {s["name"]: s["result"] for s in check.evidence["steps"]}
    assert results == {"figures": "pass", "ctest": "not reached: budget", "gpu-smoke": "pass"}
    assert ran == ["figures", "gpu-smoke"]
    summary = (check.outdir / "summary.md").read_text()
    assert "not reached: budget" in summary


def test_a_missing_tool_disables_only_its_step(tmp_path):
    check = make_check(tmp_path, 100)
    functions = {"sanitizer": lambda c, s: ("pass", ""), "gpu-smoke": lambda c, s: ("pass", "")}
    run.run_steps(check, [fake_step("sanitizer", 1, needs=["compute-sanitizer"]),
                          fake_step("gpu-smoke", 1, needs=["attnbench"])], functions)
    results = {s["name"]: s["result"] for s in check.evidence["steps"]}
    assert results["sanitizer"] == "disabled: compute-sanitizer: missing: not on PATH"
    assert results["gpu-smoke"] == "pass"


def test_a_step_over_its_time_is_stopped_with_its_process_group(tmp_path):
    check = make_check(tmp_path, 100)
    start = time.monotonic()
    code = check.run(["bash", "-c", "sleep 30 & sleep 30"], "slow.log", timeout_s=1)
    assert code is None
    assert time.monotonic() - start < 10
    assert "stopped after" in (check.logs / "slow.log").read_text()


INTERRUPTED_RUN = textwrap.dedent("""
    import sys
    from gpucheck import plan, run
    check = run.Check(sys.argv[1], sys.argv[2], 200)
    import signal
    signal.signal(signal.SIGTERM, check.on_signal)
    check.prechecks["attnbench"] = "ok"
    steps = []
    for name in ("figures", "ctest", "gpu-smoke"):
        step = plan.Step(name, "fake", needs=["attnbench"])
        step.predicted_s = 1
        steps.append(step)
    functions = {
        "figures": lambda c, s: ("pass", "fake figures"),
        "ctest": lambda c, s: ("pass" if c.run(["sleep", sys.argv[3]], "ctest.log", 100) == 0
                               else "fail", ""),
        "gpu-smoke": lambda c, s: ("pass", ""),
    }
    run.run_steps(check, steps, functions)
""")


def start_interrupted_run(tmp_path, sleep):
    """The fake run, its ctest step sleeping `sleep` seconds (a number no other process uses)."""
    outdir = tmp_path / "out"
    script = tmp_path / "interrupted_run.py"
    script.write_text(INTERRUPTED_RUN)
    environment = dict(os.environ, PYTHONPATH=f"{ROOT / 'ci'}:{ROOT}")
    process = subprocess.Popen([sys.executable, str(script), str(ROOT), str(outdir), sleep],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=environment)
    deadline = time.monotonic() + 60
    while not (outdir / "logs" / "ctest.log").exists():  # the fake ctest step's command started
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "the fake ctest step never started"
        time.sleep(0.05)
    return process, outdir


def unique_sleep(rng):
    return f"{rng.uniform(60, 70):.6f}"


def test_a_terminated_run_leaves_a_summary_naming_the_step_it_hit(tmp_path, rng):
    sleep = unique_sleep(rng)
    process, outdir = start_interrupted_run(tmp_path, sleep)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM, output
    evidence = json.loads((outdir / "evidence.json").read_text())
    assert evidence["interrupted"] == {"signal": "TERM", "step": "ctest"}
    assert [s["name"] for s in evidence["steps"]] == ["figures"]
    summary = (outdir / "summary.md").read_text()
    assert re.search(r"interrupted.*TERM.*ctest|interrupted.*ctest", summary, flags=re.I | re.S)
    assert "fake figures" in summary
    # The logs are packed, and the step's command went with the run: no sleep is left running.
    with tarfile.open(outdir / run.LOGS_ARCHIVE) as archive:
        assert "logs/ctest.log" in archive.getnames()
    assert not (outdir / "logs").exists()
    left = subprocess.run(["pgrep", "-f", f"^sleep {sleep}$"], capture_output=True, text=True).stdout
    assert left.strip() == "", left


def test_a_killed_run_still_has_the_summary_of_its_finished_steps(tmp_path, rng):
    sleep = unique_sleep(rng)
    process, outdir = start_interrupted_run(tmp_path, sleep)
    process.kill()  # SIGKILL: no handler runs
    process.communicate(timeout=30)
    summary = (outdir / "summary.md").read_text()
    assert "fake figures" in summary
    subprocess.run(["pkill", "-f", f"^sleep {sleep}$"], check=False)  # SIGKILL left it orphaned


def test_the_conformance_data_travels_in_two_archives_mma_first(tmp_path, rng, monkeypatch):
    check = make_check(tmp_path, 100)
    folder = check.outdir / run.CONFORMANCE_DIR
    folder.mkdir()
    monkeypatch.setattr(run, "CONFORMANCE_ARCHIVE_LIMIT", 1000)
    sizes = {"ldmatrix_form0_device_u32.bin": 300, "mma_bf16_d_device_f32.bin": 700,
             "mma_f16_d_device_f32.bin": 600, "manifest.json": 50, "tma_boxes_device_u16.bin": 900}
    for name, size in sizes.items():
        (folder / name).write_bytes(rng.randbytes(size))
    check.pack_conformance()
    assert not folder.exists()
    names = {}
    for n in (1, 2):
        with tarfile.open(check.outdir / f"{run.CONFORMANCE_DIR}-{n}.tar.gz") as archive:
            names[n] = sorted(Path(m).name for m in archive.getnames())
    # manifest and the bf16 mma fill the first, the f16 mma and ldmatrix the second; the TMA
    # boxes fit nowhere and are named in the first's skipped.txt.
    assert names[1] == ["manifest.json", "mma_bf16_d_device_f32.bin", "skipped.txt"]
    assert names[2] == ["ldmatrix_form0_device_u32.bin", "mma_f16_d_device_f32.bin"]
    with tarfile.open(check.outdir / f"{run.CONFORMANCE_DIR}-1.tar.gz") as archive:
        skipped = archive.extractfile(f"{run.CONFORMANCE_DIR}/skipped.txt").read().decode()
    assert skipped == "tma_boxes_device_u16.bin 900 bytes\n"


def test_conformance_files_too_large_for_any_archive_are_still_listed(tmp_path, rng, monkeypatch):
    check = make_check(tmp_path, 100)
    folder = check.outdir / run.CONFORMANCE_DIR
    folder.mkdir()
    monkeypatch.setattr(run, "CONFORMANCE_ARCHIVE_LIMIT", 100)
    (folder / "wgmma_big_d_device_f32.bin").write_bytes(rng.randbytes(500))
    check.pack_conformance()
    with tarfile.open(check.outdir / f"{run.CONFORMANCE_DIR}-1.tar.gz") as archive:
        skipped = archive.extractfile(f"{run.CONFORMANCE_DIR}/skipped.txt").read().decode()
    assert skipped == "wgmma_big_d_device_f32.bin 500 bytes\n"
    assert not (check.outdir / f"{run.CONFORMANCE_DIR}-2.tar.gz").exists()


# ---- the bundle's identity -----------------------------------------------------------------------

def test_the_manifest_uses_gits_blob_ids_and_catches_a_changed_file(tmp_path, rng):
    (tmp_path / "harness").mkdir()
    source = tmp_path / "harness" / "timing.cpp"
    source.write_text(f"// {rng.random()}\n")
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    built = setup.source_manifest(tmp_path)
    expected = subprocess.run(["git", "hash-object", str(source)], capture_output=True,
                              text=True).stdout.strip()
    if expected:  # git is on every build machine; the GPU host computes the same without it
        assert built["harness/timing.cpp"] == expected
    assert setup.parse_manifest(setup.manifest_text(built)) == built
    assert setup.manifest_difference(built, setup.source_manifest(tmp_path)) == []
    source.write_text(source.read_text() + "// changed\n")
    (tmp_path / "harness" / "new.h").write_text("#pragma once\n")
    assert setup.manifest_difference(built, setup.source_manifest(tmp_path)) == [
        "harness/new.h", "harness/timing.cpp"]


def test_a_checkout_and_its_copy_without_git_have_the_same_manifest(tmp_path, rng):
    # The build machine lists what git tracks or would track; the GPU host, which gets those
    # files without .git, walks its folders: an ignored file on the build machine must not count.
    checkout, copy = tmp_path / "checkout", tmp_path / "copy"
    (checkout / "harness").mkdir(parents=True)
    (checkout / "harness" / "a.cpp").write_text(f"// {rng.random()}\n")
    (checkout / "harness" / "untracked.h").write_text("#pragma once\n")
    (checkout / "harness" / "scratch.o").write_text("ignored build output\n")
    (checkout / ".gitignore").write_text("*.o\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", ".gitignore", "harness/a.cpp"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    built = setup.source_manifest(checkout)
    assert sorted(built) == ["harness/a.cpp", "harness/untracked.h"]
    (copy / "harness").mkdir(parents=True)
    for name in built:
        (copy / name).write_bytes((checkout / name).read_bytes())
    assert setup.manifest_difference(built, setup.source_manifest(copy)) == []


# ---- --experiment flash3 (issue 38) --------------------------------------------------------------

@needs_cli
@pytest.mark.parametrize("model", ["h100", "h200"])
def test_the_flash3_experiment_plans_its_variants_beside_cudnn_inside_its_limit(model):
    done = subprocess.run([str(ROOT / "ci" / "gpu-check.sh"), "--plan", "--experiment", "flash3",
                           "--device-model", model],
                          capture_output=True, text=True, env=dict(os.environ, ATTNBENCH_CLI=CLI))
    assert done.returncode == 0, done.stdout + done.stderr
    text = done.stdout
    order = [m.group(1) for m in re.finditer(r"^(\S+)\s+[\d.]+s\s+[\d.]+s", text, flags=re.M)]
    assert order == ["setup", "flash3-rounds", "flash3-ncu"], text
    assert "figures done" not in text
    assert float(re.search(r"predicted total ([\d.]+) s", text).group(1)) <= plan.PLAN_LIMIT_S
    # Every stage and variant at both shapes, cudnn.sdpa beside them; the variants are named.
    for kernel in ("cudnn.sdpa", "cuda.flash3", "cuda.flash3[stages=2]",
                   "cuda.flash3[pingpong=off]", "cuda.flash3[rescale=after_pv]",
                   "cuda.flash3[stages=2,block_n=176]", "cuda.flash3[persistent=on]",
                   "cuda.flash3_ws", "cuda.flash3_pingpong"):
        assert re.search(rf"{re.escape(kernel)} b=2,hq=16,hkv=16,sq=8192,sk=8192,d=128", text), kernel
        assert re.search(rf"{re.escape(kernel)} b=1,hq=4,hkv=4,sq=16384,sk=16384,d=128,"
                         r"dtype=bf16,mask=causal", text), kernel
    assert "run --suite gpu-flash3-experiment --kernels *,cuda.flash3[*]" in text
    refused = subprocess.run([str(ROOT / "ci" / "gpu-check.sh"), "--plan", "--experiment", "fa4"],
                             capture_output=True, text=True, env=dict(os.environ, ATTNBENCH_CLI=CLI))
    assert refused.returncode == 2 and "invalid choice: 'fa4'" in refused.stderr, refused.stderr


# What `ncu --csv --page raw` writes (Nsight Compute 2025): a header of metric names, a row of
# units, a row per profiled launch; numbers may carry thousands separators.
NCU_RAW = textwrap.dedent('''\
    ==PROF== Connected to process 4242
    "ID","Process ID","Kernel Name","gpu__time_duration.sum","sm__cycles_elapsed.avg.per_second","sm__throughput.avg.pct_of_peak_sustained_elapsed","lts__throughput.avg.pct_of_peak_sustained_elapsed","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio","smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio"
    "","","","usecond","Ghz","%","%","%","inst","inst","inst","inst","inst"
    "0","4242","flash3_forward_kernel","1,412.35","1.74","81.2","43.5","79.9","0.41","0.08","0.95","1.73","0.02"
    ''')


def test_ncu_raw_csv_gives_the_shown_metrics_and_the_largest_stalls():
    from gpucheck import experiment
    launches = experiment.parse_ncu_raw(NCU_RAW)
    assert len(launches) == 1
    findings = dict(experiment.ncu_findings(launches[0]))
    assert findings["duration"] == "1,412.35 usecond"
    assert findings["SM clock"] == "1.74 Ghz"
    assert findings["tensor pipe %"] == "79.9 %"
    assert findings["L2 throughput %"] == "43.5 %"
    stalls = [label for label, _ in experiment.ncu_findings(launches[0]) if label.startswith("stall")]
    assert stalls == ["stall math_pipe_throttle_per_issue_active.ratio",
                      "stall wait_per_issue_active.ratio", "stall barrier_per_issue_active.ratio",
                      "stall long_scoreboard_per_issue_active.ratio"]
    assert experiment.parse_ncu_raw("==PROF== no kernels were profiled\n") == []


def test_the_ncu_step_profiles_each_variant_and_records_what_it_found(tmp_path):
    """The step with a stand-in ncu (it writes the CSV above to --log-file, or nothing for one
    variant): findings per variant in evidence.json, the failure named, the summary shows both."""
    from gpucheck import experiment
    fake = tmp_path / "ncu"
    csv_file = tmp_path / "raw.csv"
    csv_file.write_text(NCU_RAW)
    fake.write_text(textwrap.dedent(f'''\
        #!/usr/bin/env bash
        out=""; prev=""
        for a in "$@"; do [[ $prev == --log-file ]] && out=$a; prev=$a; done
        [[ "$*" == *"flash3_ws "* ]] && exit 3
        cp {csv_file} "$out"
        '''))
    fake.chmod(0o755)
    check = make_check(tmp_path, 300)
    check.tools["ncu"] = str(fake)
    check.evidence["experiment"] = "flash3"
    check.bundle = setup.Bundle(tmp_path, tmp_path, {})  # attnbench itself never starts here
    step = plan.experiment_steps("flash3")[2]
    for call in step.calls:
        call.predicted_s = 1.0
    result, detail = run.step_flash3_ncu(check, step)
    assert result == "fail" and "cuda.flash3_ws exit 3" in detail, detail
    found = check.evidence["ncu"]
    assert set(found) == set(experiment.NCU_KERNELS)
    assert dict(found["cuda.flash3[stages=2]"]["findings"])["tensor pipe %"] == "79.9 %"
    assert found["cuda.flash3_ws"]["error"].startswith("ncu exit 3, 0 launches profiled")
    check.save()
    summary = (check.outdir / "summary.md").read_text()
    assert "## Experiment flash3: Nsight Compute (--clock-control none)" in summary
    assert re.search(r"\| cuda\.flash3\[stages=2\] +\| tensor pipe % +\| 79\.9 % +\|", summary)
