#!/usr/bin/env bash
# ci/gpu-check.sh OUTDIR [--filter REGEX]
#
# The one command that proves the GPU side on a host with a GPU and no package registry (CUDA 13,
# CMake, ninja, python3 with PyTorch and its pip cuDNN; no -dev packages), in under 5 minutes:
#   setup      the bundle from ci/make-gpu-bundle.sh (bundle/attnbench-gpu.tar.xz) when present,
#              else a build from source (says what is missing when it cannot); cuDNN from
#              PyTorch's wheel, cuBLAS from the toolkit; nvidia-smi basics
#   ctest      `ctest -L gpu`: every GPU kernel over the ctest suite, the executor, isolation of
#              a faulting kernel, then the timer cross-check alone on an idle GPU
#   memcheck   compute-sanitizer memcheck of `attnbench check` on small shapes, workers included
#   calibrate  cuBLASLt GEMMs (fp16, bf16, e4m3) and a device-to-device copy
#   gpu-smoke  `attnbench run --suite gpu-smoke`, then one figure case with its energy
#   figures    the issue's claims against what was measured (H200 only)
# OUTDIR gets attnbench.sqlite, one log per step and summary.md (date, git sha, device,
# calibrations, key figures, each step's result); a short table is printed last.
# --filter REGEX limits the cases of the memcheck and gpu-smoke steps (case names
# kernel/shape/distribution); ctest always runs every gpu test.
# Exit: 0 every step passed; 1 a step failed or a claim was missed; 2 no GPU, bad usage, or
# nothing to run with.
set -uo pipefail

usage() {
  echo "usage: ci/gpu-check.sh OUTDIR [--filter REGEX]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
outdir=$1
shift
filter=""
while [ $# -gt 0 ]; do
  case $1 in
    --filter) [ $# -ge 2 ] || usage; filter=$2; shift 2 ;;
    --filter=*) filter=${1#--filter=}; shift ;;
    *) usage ;;
  esac
done

# ---- no GPU: say so before anything expensive ------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: no GPU: nvidia-smi is not on PATH (no NVIDIA driver here)" >&2
  exit 2
fi
gpu_list=$(nvidia-smi -L 2>&1)
if ! grep -q '^GPU [0-9]' <<<"$gpu_list"; then
  echo "gpu-check: no GPU: nvidia-smi -L: $(head -n 1 <<<"$gpu_list")" >&2
  exit 2
fi

start=$(date +%s)
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$outdir" || usage
outdir=$(cd "$outdir" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/attnbench-gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
db="$outdir/attnbench.sqlite"
rm -f "$db" "$db-wal" "$db-shm"
steps="$work/steps.tsv"  # name, result, seconds, detail: read by the summary
: >"$steps"
filter_args=()
[ -z "$filter" ] || filter_args=(--filter "$filter")

say() { echo "gpu-check: $*"; }
# record STEP RESULT SECONDS DETAIL
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$steps"; say "$1: $2 ($3 s) $4"; }
# The end of a failed step's log, so the device tool's reply shows why.
show_tail() { echo "---- last lines of $1 ----"; tail -n "${2:-25}" "$1"; echo "----"; }
max_run_id() {
  python3 - "$db" <<'PYTHON'
import os, sqlite3, sys
if not os.path.exists(sys.argv[1]):
    print(0)
else:
    print(sqlite3.connect(sys.argv[1]).execute("SELECT coalesce(max(id), 0) FROM runs").fetchone()[0])
PYTHON
}

# ---- setup -------------------------------------------------------------------------------------
setup_log="$outdir/setup.log"
step_start=$(date +%s)
{
  echo "gpu-check.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), repository $root"
  echo "$gpu_list"
} >"$setup_log" 2>&1
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit,persistence_mode,ecc.mode.current,temperature.gpu \
  --format=csv 2>&1 | tee -a "$setup_log"

bundle="$root/bundle/attnbench-gpu.tar.xz"
bundle_info=""
if [ -f "$bundle" ]; then
  say "setup: unpacking $bundle"
  # python3's tarfile where the host has no xz.
  if ! { if command -v xz >/dev/null; then tar -C "$work" -xJf "$bundle"; else
           python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
             "$bundle" "$work"; fi; } >>"$setup_log" 2>&1; then
    record setup fail $(( $(date +%s) - step_start )) "cannot unpack $bundle"
    show_tail "$setup_log"
    exit 2
  fi
  bin="$work/attnbench-gpu/bin"
  ctest_dir="$work/attnbench-gpu"
  bundle_info="$work/attnbench-gpu/BUNDLE-INFO"
  # The bundle's ctest file names @BUNDLE@ for wherever it is unpacked.
  sed -i -e "s|@BUNDLE@|$work/attnbench-gpu|g" -e "s|@WORKDIR@|$work|g" "$ctest_dir/CTestTestfile.cmake"
  cat "$bundle_info" >>"$setup_log"
  # The GPU host's copy of the tree has no .git: the runs record the commit the bundle was built from.
  ATTNBENCH_GIT_SHA=$(sed -n 's/^git_sha=//p' "$bundle_info")
  ATTNBENCH_GIT_DIRTY=$(sed -n 's/^git_dirty=//p' "$bundle_info")
  export ATTNBENCH_GIT_SHA ATTNBENCH_GIT_DIRTY
else
  # No bundle: build here, if the headers a build needs are present (a host without -dev
  # packages usually lacks them: then say which, and how to bring a bundle).
  say "setup: no $bundle; trying a build from source"
  missing=()
  for header in sqlite3.h benchmark/benchmark.h gtest/gtest.h cblas.h toml++/toml.h CLI/CLI.hpp \
    nlohmann/json.hpp cudnn.h; do
    echo "#include <$header>" | c++ -std=c++20 -E -x c++ - -I/usr/include/x86_64-linux-gnu/openblas-openmp \
      -I/usr/include/openblas -I/usr/local/cuda/include >/dev/null 2>&1 || missing+=("$header")
  done
  python3 "$root/kernels/cudnn/locate_frontend.py" >/dev/null 2>&1 ||
    missing+=("cudnn_frontend.h (pip nvidia-cudnn-frontend)")
  if [ "${#missing[@]}" -gt 0 ]; then
    record setup fail $(( $(date +%s) - step_start )) "no bundle and no build possible"
    echo "gpu-check: cannot build here: missing headers: ${missing[*]}" >&2
    echo "gpu-check: on a build machine run ci/make-gpu-bundle.sh and carry bundle/ (it prints the call)" >&2
    exit 2
  fi
  build="$root/build-gpu-check"
  if ! { cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNBENCH_CUDA=ON &&
         cmake --build "$build" --parallel "$(nproc)"; } >>"$setup_log" 2>&1; then
    record setup fail $(( $(date +%s) - step_start )) "build from source failed (setup.log)"
    show_tail "$setup_log" 40
    exit 2
  fi
  bin="$build/bin"
  ctest_dir="$build"
fi
cli="$bin/attnbench"
export ATTNBENCH_CLI="$cli"
export ATTNBENCH_SUITES_DIR="$root/suites"
export ATTNBENCH_REQUIRE_GPU=1

# cuDNN 9 from PyTorch's pip wheel; cuBLAS, cuBLASLt and NVRTC (cuDNN compiles some engines at
# run time) from the CUDA toolkit, else from the pip wheels PyTorch brings.
library_dirs=()
nvidia_dirs=$(python3 -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null)
cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")
toolkit_dir() {  # NAME: the CUDA toolkit's folder holding it
  local candidate
  for candidate in "$cuda_home/lib64" "$cuda_home/targets/x86_64-linux/lib" /usr/local/cuda/lib64; do
    [ -e "$candidate/$1" ] && { echo "$candidate"; return; }
  done
}
wheel_dir() {  # NAME: the pip wheel's folder holding it (python3's nvidia.* packages)
  local found
  # shellcheck disable=SC2086
  found=$(find $nvidia_dirs -name "$1" 2>/dev/null | head -n 1)
  [ -n "$found" ] && dirname "$found"
}
for library in libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13; do
  if [ "$library" = libcudnn.so.9 ]; then
    dir=$(wheel_dir "$library")  # the cuDNN PyTorch runs with
    [ -n "$dir" ] || dir=$(toolkit_dir "$library")
  else
    dir=$(toolkit_dir "$library")
    [ -n "$dir" ] || dir=$(wheel_dir "$library")
  fi
  if [ -n "$dir" ]; then
    library_dirs+=("$dir")
    echo "$library: $(readlink -f "$dir/$library")" >>"$setup_log"
  else
    echo "$library: not found" >>"$setup_log"
  fi
done
library_path=$(printf '%s\n' "${library_dirs[@]}" | awk '!seen[$0]++' | paste -sd:)
export LD_LIBRARY_PATH="$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>"$setup_log"

unresolved=$(ldd "$cli" 2>&1 | grep 'not found')
"$cli" list devices >>"$setup_log" 2>&1
"$cli" list kernels >>"$setup_log" 2>&1
if [ -n "$unresolved" ]; then
  record setup fail $(( $(date +%s) - step_start )) "attnbench cannot load: $(tr '\n\t' '  ' <<<"$unresolved")"
  show_tail "$setup_log"
  exit 2
fi
if ! "$cli" list devices 2>&1 | grep -q '^cuda:'; then
  record setup fail $(( $(date +%s) - step_start )) "nvidia-smi sees a GPU, attnbench does not"
  show_tail "$setup_log"
  exit 2
fi
record setup pass $(( $(date +%s) - step_start )) "$([ -n "$bundle_info" ] && echo bundle || echo "built from source")"
failed=0

# ---- ctest -L gpu ------------------------------------------------------------------------------
# Everything but the timer in parallel (the reference checks are CPU work), then the timer
# cross-check alone, so nothing else runs on the GPU while it measures.
ctest_log="$outdir/ctest.log"
step_start=$(date +%s)
timer_tests='GpuTimer\.'
timeout 150 ctest --test-dir "$ctest_dir" --label-regex '^gpu$' --exclude-regex "$timer_tests" \
  --parallel 4 --verbose --timeout 140 >"$ctest_log" 2>&1
ctest_status=$?
GTEST_OUTPUT="xml:$work/timer.xml" timeout 60 ctest --test-dir "$ctest_dir" --label-regex '^gpu$' \
  --tests-regex "$timer_tests" --verbose --timeout 55 >>"$ctest_log" 2>&1
timer_status=$?
# A gpu test that skips for want of a GPU on a GPU host proved nothing (a GPU outside a kernel's
# architectures, an A100 for the FP8 kernel, is a fair skip). The tests' skip reasons are in the
# verbose log, behind ctest's "N: " prefix.
skipped=$(grep -c '(Skipped)' "$ctest_log")
no_gpu_skips=$(grep -cE '^([0-9]+: )?no GPU' "$ctest_log")
# "100% tests passed, 0 tests failed out of 14", once per ctest call.
read -r tests failed_tests < <(sed -nE 's/^[0-9]+% tests passed, ([0-9]+) tests? failed out of ([0-9]+)$/\2 \1/p' \
  "$ctest_log" | awk '{total += $1; failed += $2} END {print total + 0, failed + 0}')
ctest_detail="$tests tests: $failed_tests failed, $skipped skipped ($no_gpu_skips for want of a GPU)"
if [ "$ctest_status" -eq 0 ] && [ "$timer_status" -eq 0 ] && [ "$no_gpu_skips" -eq 0 ]; then
  record ctest pass $(( $(date +%s) - step_start )) "$ctest_detail"
else
  record ctest fail $(( $(date +%s) - step_start )) "$ctest_detail; exit $ctest_status, timer $timer_status"
  show_tail "$ctest_log" 40
  failed=1
fi

# ---- compute-sanitizer memcheck on small shapes --------------------------------------------------
memcheck_log="$outdir/memcheck.log"
step_start=$(date +%s)
sanitizer=$(command -v compute-sanitizer)
for candidate in "$cuda_home/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer; do
  [ -n "$sanitizer" ] || { [ -x "$candidate" ] && sanitizer=$candidate; }
done
if [ -z "$sanitizer" ]; then
  record memcheck fail 0 "compute-sanitizer not found"
  failed=1
else
  # The cases run in worker processes (--target-processes all follows them); a worker's stdout
  # is its pipe to the parent, so the tool writes to files, one per process.
  mkdir -p "$work/memcheck"
  runs_before=$(max_run_id)
  timeout 90 "$sanitizer" --tool memcheck --target-processes all --leak-check no \
    --log-file "$work/memcheck/process-%p.log" \
    "$cli" check --kernels 'cuda.*,cudnn.*' --devices gpu --db "$db" "${filter_args[@]}" \
    --shape b=2,hq=4,hkv=2,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br \
    --shape b=2,hq=4,s=128,d=128,dtype=fp16,mask=padding \
    --shape 'b=1,hq=2,s=200,d=64,dtype=bf16,mask=window(32,8)' \
    --shape b=1,hq=4,hkv=1,sq=1,sk=257,d=128,dtype=bf16 \
    --shape b=2,hq=4,s=128,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor,mask=causal \
    >"$memcheck_log" 2>&1
  memcheck_status=$?
  for process_log in "$work"/memcheck/process-*.log; do
    [ -e "$process_log" ] || continue
    echo "==== $(basename "$process_log")" >>"$memcheck_log"
    cat "$process_log" >>"$memcheck_log"
  done
  errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$memcheck_log" | awk '{sum += $3} END {print sum + 0}')
  processes=$(grep -c 'ERROR SUMMARY' "$memcheck_log")
  echo "memcheck_run_after=$runs_before" >>"$work/runs"
  if [ "$memcheck_status" -eq 0 ] && [ "$errors" -eq 0 ] && [ "$processes" -gt 0 ]; then
    record memcheck pass $(( $(date +%s) - step_start )) "0 errors in $processes processes"
  else
    record memcheck fail $(( $(date +%s) - step_start )) "$errors errors in $processes processes (exit $memcheck_status)"
    show_tail "$memcheck_log" 40
    failed=1
  fi
fi

# ---- calibrate ---------------------------------------------------------------------------------
calibrate_log="$outdir/calibrate.log"
step_start=$(date +%s)
timeout 60 "$cli" calibrate --devices gpu --db "$db" >"$calibrate_log" 2>&1
calibrate_status=$?
if [ "$calibrate_status" -eq 0 ]; then
  record calibrate pass $(( $(date +%s) - step_start )) ""
else
  record calibrate fail $(( $(date +%s) - step_start )) "exit $calibrate_status"
  show_tail "$calibrate_log"
  failed=1
fi

# ---- the gpu-smoke suite, then one figure case with its energy ---------------------------------
smoke_log="$outdir/smoke.log"
step_start=$(date +%s)
runs_before=$(max_run_id)
timeout 120 "$cli" run --suite gpu-smoke --devices gpu --require-gpu --db "$db" "${filter_args[@]}" \
  >"$smoke_log" 2>&1
smoke_status=$?
echo "smoke_run_after=$runs_before" >>"$work/runs"
if [ "$smoke_status" -eq 0 ]; then
  record gpu-smoke pass $(( $(date +%s) - step_start )) ""
else
  record gpu-smoke fail $(( $(date +%s) - step_start )) "exit $smoke_status"
  show_tail "$smoke_log" 40
  failed=1
fi

step_start=$(date +%s)
runs_before=$(max_run_id)
{
  echo
  echo "==== energy: back-to-back forwards for at least 1 s"
} >>"$smoke_log"
timeout 30 "$cli" run --shape b=2,hq=16,s=8192,d=128,dtype=bf16 --kernels cudnn.sdpa --devices 0 \
  --energy --repetitions 3 --db "$db" >>"$smoke_log" 2>&1
energy_status=$?
echo "energy_run_after=$runs_before" >>"$work/runs"
if [ "$energy_status" -eq 0 ]; then
  record energy pass $(( $(date +%s) - step_start )) ""
else
  record energy fail $(( $(date +%s) - step_start )) "exit $energy_status"
  show_tail "$smoke_log"
  failed=1
fi

# ---- summary: figures against the claims, summary.md, the table ---------------------------------
python3 - "$db" "$steps" "$work/runs" "$work/timer.xml" "${bundle_info:-none}" "$root" \
  "$outdir/summary.md" "$(( $(date +%s) - start ))" "$filter" "$(head -n 1 <<<"$gpu_list")" <<'PYTHON'
import datetime, os, sqlite3, subprocess, sys
import xml.etree.ElementTree as ElementTree

(db_path, steps_path, runs_path, timer_xml, bundle_info, root, summary_path, seconds,
 case_filter, first_gpu) = sys.argv[1:]

# The claims of issue 3 on an H200 (GPU-CLAIMS.md): a figure, the least that passes.
TERA = 1e12
CLAIMS = [
    ("calibrate: bf16 GEMM (cuBLASLt)", "gemm bf16", 700 * TERA, "TFLOP/s"),
    ("calibrate: device-to-device copy", "copy bytes", 4 * TERA, "TB/s"),
    ("cudnn.sdpa bf16 d128 s8192 16k tokens", "cudnn.sdpa bf16", 600 * TERA, "TFLOP/s"),
    ("cudnn.sdpa_fp8 e4m3 d128 s8192 16k tokens", "cudnn.sdpa_fp8 e4m3", 900 * TERA, "TFLOP/s"),
]
TIMER_TOLERANCE_PERCENT = 5.0

steps = [line.rstrip("\n").split("\t") for line in open(steps_path) if line.strip()]
runs_after = {}
if os.path.exists(runs_path):
    for line in open(runs_path):
        key, value = line.strip().split("=")
        runs_after[key] = int(value)

db = sqlite3.connect(db_path) if os.path.exists(db_path) else None
query = (lambda sql, *args: db.execute(sql, args).fetchall()) if db else (lambda *a: [])

def first_run_after(key):
    if key not in runs_after:
        return None
    rows = query("SELECT id FROM runs WHERE id > ? ORDER BY id LIMIT 1", runs_after[key])
    return rows[0][0] if rows else None

RESULT_COLUMNS = ("c.kernel, c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k, c.head_dim_qk,"
                  " c.input_dtype, c.output_dtype, c.mask_kind, c.window_left, c.window_right,"
                  " r.status, r.message, r.median_s, r.flops_per_s, r.fraction_of_peak_flops,"
                  " r.max_abs_error, r.bound, r.energy_j, r.launches, r.extra_memory_bytes,"
                  " r.details_json")
def results(run_id):
    if run_id is None:
        return []
    rows = query(f"SELECT {RESULT_COLUMNS} FROM results r JOIN cases c ON c.id = r.case_id "
                 "WHERE r.run_id = ? ORDER BY r.id", run_id)
    names = [c.strip().split(".")[1] for c in RESULT_COLUMNS.split(",")]
    return [dict(zip(names, row)) for row in rows]

def shape(r):
    text = (f"b={r['batch']},hq={r['heads_q']},hkv={r['heads_kv']},sq={r['seqlen_q']},"
            f"sk={r['seqlen_k']},d={r['head_dim_qk']},{r['input_dtype']}")
    mask = r["mask_kind"]
    if mask == "window":
        mask = f"window({r['window_left']},{r['window_right']})"
    return f"{text},{mask}"

def is_figure_shape(r, dtype):
    return (r["batch"] * r["seqlen_q"] == 16384 and r["seqlen_q"] == 8192 and r["seqlen_k"] == 8192
            and r["heads_q"] == 16 and r["head_dim_qk"] == 128 and r["mask_kind"] == "none"
            and r["input_dtype"] == dtype)

run_row = lambda run_id: query("SELECT cuda_runtime, cuda_driver, cudnn, cudnn_frontend, cublas,"
                               " host FROM runs WHERE id = ?", run_id) if run_id else []
device_rows = lambda run_id: query("SELECT name, uuid, sm_version, sm_count, memory_bytes, l2_bytes,"
                                   " clock_mhz, power_limit_w, ecc, persistence FROM devices"
                                   " WHERE run_id = ? AND kind != 'cpu'", run_id) if run_id else []

smoke_run = first_run_after("smoke_run_after")
memcheck_run = first_run_after("memcheck_run_after")
energy_run = first_run_after("energy_run_after")
smoke = results(smoke_run)
any_run = smoke_run or memcheck_run or energy_run
environment = run_row(any_run)
devices = device_rows(any_run)

# Calibrations: the newest per device, kind and dtype.
calibrations = {}
for name, kind, dtype, value, details in query(
        "SELECT device_name, kind, dtype, value, details FROM calibrations ORDER BY id"):
    calibrations[f"{kind} {dtype}"] = (name, value, details)

measured = {}
if "gemm bf16" in calibrations:
    measured["gemm bf16"] = calibrations["gemm bf16"][1]
if "copy bytes" in calibrations:
    measured["copy bytes"] = calibrations["copy bytes"][1]
for r in smoke:
    for kernel, dtype in (("cudnn.sdpa", "bf16"), ("cudnn.sdpa_fp8", "e4m3")):
        if r["kernel"] == kernel and is_figure_shape(r, dtype) and r["status"] == "passed":
            measured[f"{kernel} {dtype}"] = r["flops_per_s"]

# The timer cross-check, from the test's recorded properties (attributes in older GoogleTest).
timer = {}
try:
    for case in ElementTree.parse(timer_xml).getroot().iter("testcase"):
        timer.update({k: v for k, v in case.attrib.items() if k.endswith(("_us", "_percent"))})
        for prop in case.iter("property"):
            timer[prop.get("name")] = prop.get("value")
except (OSError, ElementTree.ParseError):
    pass  # the test did not run or did not finish: the claim stays "not measured"

energy = [r for r in results(energy_run) if r["energy_j"] is not None]

claims_apply = "H200" in first_gpu  # nvidia-smi's line: known even when every step failed
figure_rows, claims_failed = [], 0
for label, key, needed, unit in CLAIMS:
    value = measured.get(key)
    if not claims_apply:
        verdict = "n/a (claims are for an H200)"
    elif value is None:
        verdict = "not measured" + (" (filtered)" if case_filter else "")
        claims_failed += 0 if case_filter else 1
    else:
        verdict = "met" if value >= needed else "MISSED"
        claims_failed += value < needed
    shown = "-" if value is None else f"{value / TERA:.1f} {unit}"
    figure_rows.append((label, shown, f">= {needed / TERA:g} {unit}", verdict))
if "difference_percent" in timer:
    difference = float(timer["difference_percent"])
    ok = difference <= TIMER_TOLERANCE_PERCENT
    figure_rows.append(("timer: harness vs host-clock loop (cudnn.sdpa)",
                        f"{difference:.2f} % ({float(timer['harness_median_us']):.1f} vs "
                        f"{float(timer['host_loop_us']):.1f} us)",
                        f"<= {TIMER_TOLERANCE_PERCENT:g} %", "met" if ok else "MISSED"))
    claims_failed += not ok
else:
    figure_rows.append(("timer: harness vs host-clock loop (cudnn.sdpa)", "-",
                        f"<= {TIMER_TOLERANCE_PERCENT:g} %", "not measured"))
    claims_failed += 1
steps.append(["figures", "fail" if claims_failed else "pass", "0",
              f"{len(figure_rows) - claims_failed}/{len(figure_rows)} claims met"
              if claims_apply else "claims apply to an H200 only"])

# Git: the bundle's build, else this checkout.
info = {}
if bundle_info != "none" and os.path.exists(bundle_info):
    info = dict(line.rstrip("\n").split("=", 1) for line in open(bundle_info) if "=" in line)
if "git_sha" not in info:
    try:
        info["git_sha"] = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], text=True,
                                         capture_output=True, check=True).stdout.strip()
        info["git_dirty"] = "yes" if subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"], text=True,
            capture_output=True).stdout.strip() else "no"
    except (OSError, subprocess.CalledProcessError):
        info["git_sha"], info["git_dirty"] = "unknown", "unknown"

def table(header, rows):
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(r) for r in rows])

def status_counts(rows):
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no results"

now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
md = [f"# attnbench GPU check, {now}", ""]
md.append(f"- git: {info.get('git_sha', 'unknown')}"
          + (" (dirty)" if info.get("git_dirty") == "yes" else "")
          + (f"; bundle built {info['built_at']} on {info.get('built_on', '?')}"
             if "built_at" in info else "; built from source on this host"))
def number(value, scale=1, spec=".0f"):
    return "?" if value is None else format(value / scale, spec)

for name, uuid, sm, sms, memory, l2, clock, power, ecc, persistence in devices:
    md.append(f"- device: {name} ({uuid}), sm_{sm}, {sms} SMs, {number(memory, 2**30)} GiB, "
              f"L2 {number(l2, 2**20)} MiB, max SM clock {number(clock)} MHz, power limit "
              f"{number(power)} W, ECC {ecc}, persistence {persistence}")
if environment:
    cuda_runtime, cuda_driver, cudnn, cudnn_frontend, cublas, host = environment[0]
    md.append(f"- host {host}; CUDA runtime {cuda_runtime}, driver {cuda_driver}, cuBLAS {cublas}; "
              f"cuDNN {cudnn}, cudnn-frontend {cudnn_frontend}")
if "cuda_architectures" in info:
    md.append(f"- bundle: CUDA architectures {info['cuda_architectures']}, {info.get('nvcc')}, "
              f"{info.get('compiler')}")
if not devices:
    md.append(f"- device (nvidia-smi): {first_gpu}")
md.append(f"- duration: {seconds} s" + (f"; --filter {case_filter}" if case_filter else ""))
md += ["", "## Steps", "", table(["step", "result", "seconds", "detail"], steps), ""]
md += ["## Claims (issue 3; GPU-CLAIMS.md)", "",
       table(["claim", "measured", "needed", "result"], figure_rows), ""]
md += ["## Calibrations", ""]
calibration_rows = []
for key, (name, value, details) in sorted(calibrations.items()):
    unit = "TB/s" if key.startswith("copy") else "TFLOP/s"
    calibration_rows.append((key, f"{number(value, TERA, '.1f')} {unit}", details))
md += [table(["what", "value", "how"], calibration_rows) if calibration_rows else "none", ""]
md += [f"## gpu-smoke (run {smoke_run}: {status_counts(smoke)})", ""]
smoke_rows = []
for r in smoke:
    tflops = "-" if r["flops_per_s"] is None else f"{r['flops_per_s'] / TERA:.1f}"
    median = "-" if r["median_s"] is None else f"{r['median_s'] * 1e6:.1f}"
    error = ("-" if r["max_abs_error"] is None or r["bound"] is None
             else f"{r['max_abs_error']:.2e} / {r['bound']:.2e}")
    note = (r["message"] or "")[:80]
    launches = "-" if r["launches"] is None or r["launches"] < 0 else r["launches"]
    smoke_rows.append((r["kernel"], shape(r), r["status"], median, tflops, error, launches, note))
md += [table(["kernel", "shape", "status", "median us", "TFLOP/s", "error / bound", "launches",
              "message"], smoke_rows) if smoke_rows else "no results", ""]
if memcheck_run:
    md += [f"memcheck cases (run {memcheck_run}): {status_counts(results(memcheck_run))}", ""]
for r in smoke:
    if r["details_json"] and (is_figure_shape(r, "bf16") or is_figure_shape(r, "e4m3")):
        md += [f"{r['kernel']} {shape(r)} reports: `{r['details_json']}`", ""]
for r in energy:
    md += [f"energy: {r['kernel']} {shape(r)}: {r['energy_j'] * 1e3:.2f} mJ per forward", ""]
open(summary_path, "w").write("\n".join(md))

print()
print(table(["step", "result", "seconds", "detail"], steps))
print()
print(table(["claim", "measured", "needed", "result"], figure_rows))
sys.exit(1 if claims_failed else 0)
PYTHON
summary_status=$?
[ "$summary_status" -eq 0 ] || failed=1
echo
say "$outdir: summary.md, attnbench.sqlite and the step logs; $(( $(date +%s) - start )) s in all"
if [ "$failed" -ne 0 ]; then
  say "FAILED"
  exit 1
fi
say "passed"
