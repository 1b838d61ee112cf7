"""gpu-check's setup: the GPU, the bundle, the libraries it loads, and the pre-checks.

The GPU host has CUDA, CMake (ctest), compute-sanitizer and python3 with PyTorch and its pip
cuDNN, no -dev packages and no registry: the binaries come as a bundle built elsewhere
(ci/make-gpu-bundle.sh). The bundle records a digest of the sources it was built from, and a
bundle that does not match the checkout is refused: its figures would prove another commit.
Each pre-check that fails disables only the steps that need it (plan.Step.needs), with its
one-line reason; only a GPU that is missing or a bundle that cannot load stops the run.
"""

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

BUNDLE = Path("bundle") / "attnbench-gpu.tar.xz"
# The folders and files whose contents make the bundle's binaries; their digest is the bundle's
# identity. ci/, suites/ and the docs are read from the checkout at run time.
SOURCE_PATHS = ("CMakeLists.txt", "CMakePresets.json", "harness", "kernels", "reference", "tests")
SKIPPED_PARTS = ("__pycache__",)
SKIPPED_SUFFIXES = (".pyc",)
# cuDNN from the wheel PyTorch runs with; cuBLAS, cuBLASLt and NVRTC (cuDNN compiles some
# engines at run time) from the CUDA toolkit, else from the wheels.
LIBRARIES = {"libcudnn.so.9": "wheel", "libcublas.so.13": "toolkit",
             "libcublasLt.so.13": "toolkit", "libnvrtc.so.13": "toolkit",
             # CUPTI for `attnbench profile` (dlopen'ed): the toolkit's, else PyTorch's
             # nvidia-cuda-cupti wheel's.
             "libcupti.so.13": "toolkit"}
PINNED_WHEELS = Path("ci") / "gpu-host-wheels.txt"  # relative to the checkout
CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))


# ---- the bundle's identity ---------------------------------------------------------------------

def git_blob_id(path):
    """The id git gives the file's contents (sha1 of "blob <size>\\0<bytes>"), computed without
    git: the GPU host's copy of the tree has no .git."""
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def source_files(root):
    """The files under SOURCE_PATHS that travel with a checkout: in a git checkout what git
    tracks or would track (ignored files stay behind: they never reach the GPU host); in a
    copy without .git (the GPU host's) every file there."""
    root = Path(root)
    if (root / ".git").exists():
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard", "--", *SOURCE_PATHS],
                                capture_output=True, check=True).stdout.decode()
        return sorted(root / p for p in set(listed.split("\0")) if p and (root / p).is_file())
    files = []
    for name in SOURCE_PATHS:
        top = root / name
        files += [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
    return sorted(p for p in files if not any(part in SKIPPED_PARTS for part in p.parts)
                  and p.suffix not in SKIPPED_SUFFIXES)


def source_manifest(root):
    """{relative path: blob id} of every source file (source_files)."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): git_blob_id(p) for p in source_files(root)}


def manifest_text(manifest):
    return "".join(f"{blob}  {path}\n" for path, blob in sorted(manifest.items()))


def parse_manifest(text):
    return {line[42:]: line[:40] for line in text.splitlines() if len(line) > 42}


def manifest_difference(built, checkout):
    """The paths that differ between two manifests, sorted; empty when they match."""
    return sorted(p for p in set(built) | set(checkout) if built.get(p) != checkout.get(p))


class Bundle:
    """Where the binaries are: an unpacked bundle, or a build folder."""

    def __init__(self, folder, ctest_dir, info):
        self.folder = Path(folder)
        self.cli = str(self.folder / "bin" / "attnbench")
        self.ctest_dir = str(ctest_dir)
        self.info = info

    def test_binary(self, name):
        return str(self.folder / "bin" / name)

    def binaries(self):
        return sorted(p for p in (self.folder / "bin").iterdir() if p.is_file())


def read_info(path):
    return dict(line.split("=", 1) for line in Path(path).read_text().splitlines() if "=" in line)


def unpack_bundle(check):
    """Unpacks, verifies against the checkout and relocates the bundle's ctest file."""
    archive = check.root / BUNDLE
    work = Path(tempfile.mkdtemp(prefix="attnbench-gpu-check."))
    with tarfile.open(archive) as tar:  # python's tarfile: the host may have no xz
        tar.extractall(work, filter="data")
    folder = work / "attnbench-gpu"
    info = read_info(folder / "BUNDLE-INFO")
    built = parse_manifest((folder / "MANIFEST").read_text()) if (folder / "MANIFEST").exists() else {}
    if not built:
        raise SetupError(f"{archive} has no MANIFEST (built by an older make-gpu-bundle.sh): "
                         "rebuild it with ci/make-gpu-bundle.sh")
    differ = manifest_difference(built, source_manifest(check.root))
    if differ:
        raise SetupError(f"{archive} was built from other sources than this checkout "
                         f"(git {info.get('git_sha', '?')[:12]}): {len(differ)} files differ, "
                         f"first {differ[0]}; rebuild it with ci/make-gpu-bundle.sh")
    ctest_file = folder / "CTestTestfile.cmake"
    ctest_file.write_text(ctest_file.read_text().replace("@BUNDLE@", str(folder))
                          .replace("@WORKDIR@", str(work)))
    return Bundle(folder, folder, info)


class SetupError(Exception):
    pass


# ---- libraries -----------------------------------------------------------------------------------

def cuda_home():
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    return Path(os.path.realpath(nvcc)).parent.parent


def toolkit_dirs():
    home = cuda_home()
    return [home / "lib64", home / "targets" / "x86_64-linux" / "lib", Path("/usr/local/cuda/lib64")]


def wheel_dirs(root, rehearse):
    """The nvidia.* wheel folders: python3's (PyTorch's, on the GPU host), or on a rehearsal
    the pinned wheels installed into a cache on the build machine (one per set of pins)."""
    if rehearse:
        pins = Path(root) / PINNED_WHEELS
        cache = CACHE_HOME / f"attnbench-gpu-host-wheels-{hashlib.sha1(pins.read_bytes()).hexdigest()[:12]}"
        if not (cache / "nvidia").exists():
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                            "--target", str(cache), "-r", str(pins)], check=True)
        return [cache / "nvidia"]
    try:
        import nvidia  # namespace package of the CUDA wheels PyTorch brings
        return [Path(p) for p in nvidia.__path__]
    except ImportError:
        return []


def find_library(name, order, wheels):
    searches = {"wheel": lambda: [p.parent for w in wheels for p in w.rglob(name)],
                "toolkit": lambda: [d for d in toolkit_dirs() if (d / name).exists()]}
    for where in order:
        found = searches[where]()
        if found:
            return found[0]
    return None


def resolve_libraries(check, log):
    """LD_LIBRARY_PATH for the bundle: {library: folder}; a library not found is absent."""
    wheels = wheel_dirs(check.root, check.rehearse)
    folders = {}
    for name, first in LIBRARIES.items():
        # A rehearsal resolves against the GPU host's wheels alone: that is what it rehearses.
        order = ["wheel"] if check.rehearse else [first, "toolkit" if first == "wheel" else "wheel"]
        folder = find_library(name, order, wheels)
        log.write(f"{name}: {os.path.realpath(folder / name) if folder else 'not found'}\n")
        if folder:
            folders[name] = folder
    unique = list(dict.fromkeys(str(f) for f in folders.values()))
    old = check.environment.get("LD_LIBRARY_PATH", "")
    check.environment["LD_LIBRARY_PATH"] = ":".join(unique + ([old] if old else []))
    return folders


def unresolved_libraries(bundle, environment):
    """`ldd` of every bundled binary: the libraries it cannot find."""
    missing = set()
    for binary in bundle.binaries():
        done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=environment)
        missing |= set(re.findall(r"^\s*(\S+) => not found", done.stdout, flags=re.M))
    return sorted(missing)


# ---- pre-checks ----------------------------------------------------------------------------------

def version_call(path, function):
    library = ctypes.CDLL(str(path))
    call = getattr(library, function)
    call.restype = ctypes.c_size_t
    return int(call())


def check_cudnn(folders):
    folder = folders.get("libcudnn.so.9")
    if not folder:
        return "missing: libcudnn.so.9 in neither the wheels nor the toolkit"
    path = folder / "libcudnn.so.9"
    version = version_call(path, "cudnnGetVersion")
    cudart = version_call(path, "cudnnGetCudartVersion")
    return (f"ok {version // 10000}.{version % 10000 // 100}.{version % 100} (built for CUDA "
            f"{cudart // 1000}.{cudart % 1000 // 10}) from {folder}")


def check_cublas(folders):
    folder = folders.get("libcublasLt.so.13")
    if not folder or "libcublas.so.13" not in folders:
        return "missing: libcublas.so.13 / libcublasLt.so.13"
    return f"ok cuBLASLt {version_call(folder / 'libcublasLt.so.13', 'cublasLtGetVersion')} from {folder}"


def check_cupti(folders):
    folder = folders.get("libcupti.so.13")
    if not folder:
        return "missing: libcupti.so.13 in neither the toolkit nor the wheels"
    version = ctypes.c_uint32(0)
    code = ctypes.CDLL(str(folder / "libcupti.so.13")).cuptiGetVersion(ctypes.byref(version))
    return f"ok API {version.value} from {folder}" if code == 0 else f"missing: cuptiGetVersion returned {code}"


def check_nvml(rehearse):
    if rehearse:
        return "missing: no driver on the build machine (rehearsal)"
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as error:
        return f"missing: {error}"
    code = nvml.nvmlInit_v2()
    return "ok" if code == 0 else f"missing: nvmlInit_v2 returned {code}"


def guarded(pre_check, *arguments):
    """A pre-check that raised (a library that will not load, a symbol it lacks) reports the
    error as its reason instead of ending the run."""
    try:
        return pre_check(*arguments)
    except Exception as error:  # ctypes and subprocess raise many kinds; all mean "missing"
        return f"missing: {type(error).__name__}: {error}"


def find_tool(name):
    found = shutil.which(name)
    if not found and (cuda_home() / "bin" / name).exists():
        found = str(cuda_home() / "bin" / name)
    return found


def attnbench_json(check, log, *arguments):
    """(parsed JSON, None) of `attnbench ARGUMENTS`, or (None, the reason it is missing)."""
    done = subprocess.run([check.bundle.cli, *arguments], capture_output=True, text=True,
                          env=check.environment)
    log.write(done.stdout + done.stderr)
    command = "attnbench " + " ".join(arguments)
    if done.returncode != 0:
        return None, f"missing: {command} exited {done.returncode}: {done.stderr.strip()[:200]}"
    try:
        return json.loads(done.stdout), None
    except ValueError as error:
        return None, f"missing: {command}: unreadable ({error})"


def check_attnbench(check, log):
    """The binary starts, and (on a GPU host) sees the GPU. What the claims judge by goes into the
    evidence as attnbench states it: the GPU's device model (harness/measure/cost_model.h), whose
    thresholds a figure is judged against, and the registry's kernels (which are the in-house
    ones, each with its correctness suite), so no claim keeps a list of its own."""
    kernels, missing = attnbench_json(check, log, "list", "kernels", "--json")
    if missing:
        return missing
    check.evidence["kernels"] = kernels
    if check.rehearse:
        return "ok (rehearsal: loads, no GPU)"
    listed, missing = attnbench_json(check, log, "list", "devices", "--json")
    if missing:
        return missing
    gpus = [d for d in listed.get("devices", []) if d.get("backend") == "cuda"]
    if not gpus:
        return "missing: nvidia-smi sees a GPU, attnbench does not"
    check.evidence["device_model"] = gpus[0].get("device_model") or ""
    return "ok"


# ---- the step ------------------------------------------------------------------------------------

def find_gpu(check, log):
    smi = shutil.which("nvidia-smi")
    if not smi:
        raise SetupError("no GPU: nvidia-smi is not on PATH (no NVIDIA driver here)")
    listing = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout
    gpus = [line for line in listing.splitlines() if line.startswith("GPU ")]
    if not gpus:
        raise SetupError(f"no GPU: nvidia-smi -L: {listing.strip()[:200]}")
    check.evidence["gpu"] = gpus[0]
    query = subprocess.run([smi, "--query-gpu=index,name,uuid,driver_version,memory.total,"
                            "clocks.max.sm,clocks.sm,power.limit,persistence_mode,ecc.mode.current,"
                            "temperature.gpu", "--format=csv"], capture_output=True, text=True)
    log.write(listing + query.stdout)


def export_environment(check):
    info = check.bundle.info
    check.environment.update({
        "ATTNBENCH_CLI": check.bundle.cli,
        "ATTNBENCH_SUITES_DIR": str(check.root / "suites"),
        "ATTNBENCH_REQUIRE_GPU": "1",
        # The GPU host's tree has no .git: the runs record the commit the bundle was built from.
        "ATTNBENCH_GIT_SHA": info.get("git_sha", "unknown"),
        "ATTNBENCH_GIT_DIRTY": info.get("git_dirty", "unknown"),
    })
    check.evidence["bundle"] = info
    check.evidence["git_sha"] = info.get("git_sha", "")


def run_setup(check):
    """Returns ("pass", detail) or ("fail", the one-line reason)."""
    with open(check.logs / "setup.log", "a") as log:
        try:
            if not check.rehearse:
                find_gpu(check, log)
            if not (check.root / BUNDLE).exists():
                raise SetupError(f"no {BUNDLE}: build it on a build machine with "
                                 "ci/make-gpu-bundle.sh and carry bundle/ with the checkout")
            check.bundle = unpack_bundle(check)
            log.write("".join(f"{k}={v}\n" for k, v in check.bundle.info.items()))
            export_environment(check)
            folders = resolve_libraries(check, log)
            missing = unresolved_libraries(check.bundle, check.environment)
            if missing:
                raise SetupError(f"the bundle cannot load {', '.join(missing)} "
                                 f"(LD_LIBRARY_PATH={check.environment['LD_LIBRARY_PATH']})")
        except (SetupError, OSError, subprocess.CalledProcessError, tarfile.TarError) as error:
            return "fail", str(error)
        check.tools = {name: find_tool(name) for name in ("ctest", "compute-sanitizer", "ncu")}
        check.prechecks.update({
            "attnbench": guarded(check_attnbench, check, log),
            "python3": f"ok {sys.version.split()[0]}",
            "cudnn": guarded(check_cudnn, folders),
            "cublas": guarded(check_cublas, folders),
            "nvml": guarded(check_nvml, check.rehearse),
            "cupti": guarded(check_cupti, folders),
            **{name: f"ok {path}" if path else f"missing: {name} is not on PATH nor in {cuda_home()}/bin"
               for name, path in check.tools.items()},
        })
        log.write("".join(f"pre-check {k}: {v}\n" for k, v in check.prechecks.items()))
    if not check.prechecks["attnbench"].startswith("ok"):
        return "fail", check.prechecks["attnbench"]
    absent = [f"{k} ({v})" for k, v in check.prechecks.items() if not v.startswith("ok")]
    return "pass", "bundle " + check.bundle.info.get("git_sha", "?")[:12] + (
        "; missing: " + ", ".join(absent) if absent else "")
