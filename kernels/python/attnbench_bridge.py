"""The Python side of attnbench's Python kernels; kernels/python/bridge.cpp calls it.

A Python kernel is a function `f(q, k, v, out, problem)` with a support table attached:

    def my_attention(q, k, v, out, problem):
        ...                                  # fill `out`, or return an array shaped like it
    my_attention.attnbench = dict(dtypes=["fp32"], masks=["none", "causal"])

q, k, v and out are views of attnbench's own buffers, indexed (batch, seqlen, heads, head_dim)
whatever the layout (the strides say it): numpy arrays on the CPU (q, k, v read-only), torch
tensors where the table says arrays="torch" and always on a GPU, where the call runs on
attnbench's stream. `problem` carries the fields below; `problem.lse` is the (batch, heads_q,
seqlen_q) float32 LSE to fill when the table says returns_lse, `problem.key_lengths` the
padding mask's valid keys per batch (int32), and `problem.cache` a dict the kernel may keep
anything in for the next calls of the same plan.

A kernel may also compute the backward: give the function a `backward` attribute,

    def my_backward(q, k, v, out, dout, dq, dk, dv, problem):
        ...                                  # fill dq, dk, dv (or return the three arrays)
    my_attention.backward = my_backward

called after a forward of the same plan, with out (and problem.lse, with returns_lse) holding
that forward's outputs; dout is the upstream gradient, dq, dk and dv
(batch, seqlen, heads, head_dim) are written, dk and dv summed over each GQA group's query heads.
`problem.backward` is True when the case's pass has a backward, so the forward knows to keep what
the backward needs (an autograd graph, say) in problem.cache. The table's backward_deterministic
says whether two backwards give identical bytes.

A kernel may mark where its time goes for `attnbench profile` with attnbench_bridge.phase("scores"),
phase("softmax"), ... (None ends the phase); on the CPU the profile shows them as it shows
attnbench's own kernels' phases.

Errors come back to attnbench as one line: the exception's last traceback line and where it was
raised, so a kernel that raises fails its case and nothing else in the run is lost.
"""

import ctypes
import hashlib
import importlib
import json
import os
import sys
import traceback
import types
import warnings

TABLE_KEYS = {
    "summary": "one line: what the kernel is",
    "devices": 'where it runs: ["cpu"] (default), ["cuda"] or both',
    "arrays": '"numpy" (default on the CPU) or "torch" (always on a GPU)',
    "dtypes": 'input dtypes, e.g. ["fp32", "fp16"] (required)',
    "outputs_fp32": "an fp32 output accepted besides the input dtype (default False)",
    "head_dims": "exact head dims, e.g. [64, 128] (default: any up to max_head_dim)",
    "max_head_dim": "largest head dim (default: no limit)",
    "separate_v_dim": "head_dim_v may differ from head_dim_qk (default False)",
    "masks": 'e.g. ["none", "causal"] (default ["none"])',
    "layouts": 'e.g. ["bshd"] (default: bshd, bhsd, qkv_packed; strides describe each)',
    "gqa": "heads_q a multiple of heads_kv (default True)",
    "returns_lse": "fills problem.lse (default False)",
    "deterministic": "two runs give identical bytes (default False)",
    "backward_deterministic": "with a .backward: two backwards give identical bytes (default False)",
    "max_flops": "size limit in FLOP over every (query, key) pair, the pass's FLOPs per pair "
                 "(reference/flops.h; default: none), or one per device: {\"cpu\": 3e11}",
    "notes": "one line",
    "refuse": "optional function(problem) -> None or the reason this problem is declined",
}

try:
    from _attnbench_native import phase as _native_phase  # made by bridge.cpp inside attnbench
except ImportError:  # imported outside attnbench
    _native_phase = None


def phase(name):
    """Starts the phase `name` of the running forward on the calling thread, ending the one
    before; None ends it (attnbench ends it after the forward too). Recorded only while
    `attnbench profile` records a CPU forward; otherwise it costs a call."""
    if _native_phase is not None:
        _native_phase(name)


ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "e4m3": 1, "e5m2": 1}
DTYPE_NAMES = ["fp32", "fp16", "bf16", "e4m3", "e5m2"]  # attnbench's numbering
MASK_NAMES = ["none", "causal", "causal_br", "window", "padding"]


def last_line(error):
    """ "ValueError: message (mylib.py:12 in forward)": the traceback's last line and place."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()
    line = text[-1] if text else type(error).__name__
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith("<frozen") and "importlib" not in f.filename
              and os.path.abspath(f.filename) != os.path.abspath(__file__)]
    if frames:
        frame = frames[-1]
        line += f" ({os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"
    return line


def _origin(module, function):
    path = getattr(module, "__file__", None) or "(no file)"
    try:
        with open(path, "rb") as source:
            digest = hashlib.sha256(source.read()).hexdigest()[:16]
    except OSError:
        digest = "unknown"
    origin = f"python {os.path.abspath(path)}:{function.__name__}, sha256 {digest}"
    version = getattr(module, "__version__", None)
    if version is None:
        package = sys.modules.get(module.__name__.split(".")[0])
        version = getattr(package, "__version__", None)
    if version is not None:
        origin += f", version {version}"
    return origin


def _names(table, key, accepted, default):
    values = table.get(key, default)
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"support table: {key} must be a list of names, e.g. {default or accepted[:1]}")
    for value in values:
        if value not in accepted:
            raise ValueError(f"support table: {key}: unknown '{value}'; accepted: {', '.join(accepted)}")
    return ",".join(values)


def _max_flops(value, devices):
    """{device: limit} from a number (every device) or a dict by device (others: no limit)."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"cpu", "cuda"})
        if unknown:
            raise ValueError(f"support table: max_flops: unknown device(s) {', '.join(unknown)}; "
                             "accepted: cpu, cuda")
        return {device: float(value.get(device, 0)) for device in devices}
    return {device: float(value) for device in devices}


def describe(target):
    """(the kernel's description for the C ABI as JSON, the function, None), or (None, None, the
    one-line reason it cannot be loaded)."""
    try:
        text, function = _describe(target)
    except ValueError as error:
        return None, None, str(error)
    return text, function, None


def _describe(target):
    module_name, _, function_name = target.partition(":")
    if not module_name or not function_name:
        raise ValueError(f"'{target}' is not module:function, e.g. py:mylib.attention:forward")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # the user's module: any exception is its own one-line reason
        raise ValueError(f"import {module_name}: {last_line(error)}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"module {module_name} ({getattr(module, '__file__', '?')}) has no function {function_name}")
    table = getattr(function, "attnbench", None)
    if not isinstance(table, dict):
        raise ValueError(
            f"{function_name} declares no support table: set {function_name}.attnbench = "
            'dict(dtypes=["fp32"], masks=["none"]) (see examples/python/)')
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise ValueError(f"support table: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(TABLE_KEYS)}")
    if "dtypes" not in table:
        raise ValueError('support table: dtypes is required, e.g. dtypes=["fp32"]')
    devices = table.get("devices", ["cpu"])
    for device in devices:
        if device not in ("cpu", "cuda"):
            raise ValueError(f"support table: devices: unknown '{device}'; accepted: cpu, cuda")
    arrays = table.get("arrays", "numpy")
    if arrays not in ("numpy", "torch"):
        raise ValueError(f"support table: arrays: unknown '{arrays}'; accepted: numpy, torch")
    if "refuse" in table and not callable(table["refuse"]):
        raise ValueError("support table: refuse must be a function(problem) -> None or a reason")
    description = {
        "summary": str(table.get("summary", (function.__doc__ or "").strip().split("\n")[0])),
        "devices": devices,
        "dtypes": _names(table, "dtypes", DTYPE_NAMES, ["fp32"]),
        "outputs_fp32": int(bool(table.get("outputs_fp32", False))),
        "head_dims": ",".join(str(int(d)) for d in table.get("head_dims", [])),
        "max_head_dim": int(table.get("max_head_dim", 0)),
        "separate_v_dim": int(bool(table.get("separate_v_dim", False))),
        "masks": _names(table, "masks", MASK_NAMES, ["none"]),
        "layouts": _names(table, "layouts", ["bshd", "bhsd", "qkv_packed"], ["bshd", "bhsd", "qkv_packed"]),
        "gqa": int(bool(table.get("gqa", True))),
        "returns_lse": int(bool(table.get("returns_lse", False))),
        "deterministic": int(bool(table.get("deterministic", False))),
        "backward": int(callable(getattr(function, "backward", None))),
        "backward_deterministic": int(bool(table.get("backward_deterministic", False))),
        "max_flops": _max_flops(table.get("max_flops", 0), devices),
        "notes": str(table.get("notes", "")),
        "origin": _origin(module, function),
    }
    return json.dumps(description), function


# ---- arrays over attnbench's buffers -------------------------------------------------------------

def _extent(shape, strides):
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


class _CudaMemory:
    """Device bytes as __cuda_array_interface__ describes them, for torch.as_tensor."""

    def __init__(self, pointer, size):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 3}


def _torch_dtype(name):
    import torch
    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    for fp8, attribute in (("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2")):
        if hasattr(torch, attribute):
            dtypes[fp8] = getattr(torch, attribute)
    if name not in dtypes:
        raise ValueError(f"torch has no dtype for {name}")
    return dtypes[name]


def _numpy_dtype(name):
    import numpy
    if name == "fp32":
        return numpy.float32
    if name == "fp16":
        return numpy.float16
    try:
        import ml_dtypes  # bf16 and fp8 for numpy, where installed
        return {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[name]
    except ImportError:
        raise ValueError(f'numpy has no {name} dtype (pip install ml_dtypes, or declare arrays="torch")') from None


def _view(pointer, dtype, shape, strides, arrays, device, writable):
    """The (shape, strides) tensor at `pointer`: strides in elements, as attnbench keeps them."""
    size = _extent(shape, strides) * ITEMSIZE[dtype]
    if device >= 0:
        import torch
        flat = torch.as_tensor(_CudaMemory(pointer, size), device=f"cuda:{device}")
        return flat.view(_torch_dtype(dtype)).as_strided(shape, strides)
    raw = (ctypes.c_byte * size).from_address(pointer)
    if arrays == "torch":
        import torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # frombuffer warns about buffers it cannot resize
            flat = torch.frombuffer(raw, dtype=_torch_dtype(dtype))
        return flat.as_strided(shape, strides)
    import numpy
    element = _numpy_dtype(dtype)
    flat = numpy.frombuffer(raw, dtype=element)
    item = numpy.dtype(element).itemsize
    return numpy.lib.stride_tricks.as_strided(flat, shape, [s * item for s in strides], writeable=writable)


# ---- plans -----------------------------------------------------------------------------------------

class Plan:
    """One problem's plan: the function, the problem, and the arrays of the last buffers seen."""

    def __init__(self, function, shape, device, stream):
        self.function = function
        self.table = function.attnbench
        self.device = device
        self.arrays = "torch" if device >= 0 else self.table.get("arrays", "numpy")
        self.stream = stream
        self.shape = shape
        self.views_for = None
        self.views = None
        self.peak_bytes = -1
        s = shape
        self.problem = types.SimpleNamespace(
            batch=s["batch"], heads_q=s["heads_q"], heads_kv=s["heads_kv"], seqlen_q=s["seqlen_q"],
            seqlen_k=s["seqlen_k"], head_dim_qk=s["head_dim_qk"], head_dim_v=s["head_dim_v"],
            scale=s["scale"], mask=MASK_NAMES[s["mask"]], window_left=s["window_left"],
            window_right=s["window_right"], dtype=DTYPE_NAMES[s["input_dtype"]],
            out_dtype=DTYPE_NAMES[s["output_dtype"]], grad_dtype=DTYPE_NAMES[s["grad_dtype"]],
            backward=s["pass"] != 0,
            device="cpu" if device < 0 else f"cuda:{device}", lse=None, key_lengths=None, cache={})
        self.gradient_views_for = None
        self.gradient_views = None

    def refusal(self):
        refuse = self.table.get("refuse")
        if refuse is None:
            return None
        try:
            reason = refuse(self.problem)
        except Exception as error:
            return f"refuse() raised {last_line(error)}"
        return None if reason is None else str(reason)

    def _make_views(self, pointers):
        s, p = self.shape, self.problem
        dtype, out_dtype = p.dtype, p.out_dtype
        q_shape = (p.batch, p.seqlen_q, p.heads_q, p.head_dim_qk)
        k_shape = (p.batch, p.seqlen_k, p.heads_kv, p.head_dim_qk)
        v_shape = (p.batch, p.seqlen_k, p.heads_kv, p.head_dim_v)
        o_shape = (p.batch, p.seqlen_q, p.heads_q, p.head_dim_v)

        def strides(name):
            return (s[name + "_batch_stride"], s[name + "_row_stride"], s[name + "_head_stride"], 1)

        def view(pointer, dtype, shape, strides, writable):
            return _view(pointer, dtype, shape, strides, self.arrays, self.device, writable)

        q = view(pointers[0], dtype, q_shape, strides("q"), False)
        k = view(pointers[1], dtype, k_shape, strides("k"), False)
        v = view(pointers[2], dtype, v_shape, strides("v"), False)
        out = view(pointers[3], out_dtype, o_shape, strides("out"), True)
        lse_shape = (p.batch, p.heads_q, p.seqlen_q)
        lse = None if not pointers[4] else view(pointers[4], "fp32", lse_shape,
                                                 (p.heads_q * p.seqlen_q, p.seqlen_q, 1), True)
        lengths = None
        if pointers[5]:
            if self.device >= 0:
                import torch
                lengths = torch.as_tensor(_CudaMemory(pointers[5], 4 * p.batch),
                                          device=f"cuda:{self.device}").view(torch.int32)
            else:
                lengths = (ctypes.c_int32 * p.batch).from_address(pointers[5])
                lengths = [int(n) for n in lengths]
        return q, k, v, out, lse, lengths

    def _make_gradient_views(self, pointers):
        s, p = self.shape, self.problem

        def view(pointer, name, shape, writable):
            strides = (s[name + "_batch_stride"], s[name + "_row_stride"], s[name + "_head_stride"], 1)
            return _view(pointer, p.grad_dtype, shape, strides, self.arrays, self.device, writable)

        dout = view(pointers[0], "dout", (p.batch, p.seqlen_q, p.heads_q, p.head_dim_v), False)
        dq = view(pointers[1], "dq", (p.batch, p.seqlen_q, p.heads_q, p.head_dim_qk), True)
        dk = view(pointers[2], "dk", (p.batch, p.seqlen_k, p.heads_kv, p.head_dim_qk), True)
        dv = view(pointers[3], "dv", (p.batch, p.seqlen_k, p.heads_kv, p.head_dim_v), True)
        return dout, dq, dk, dv

    def run_backward(self, q, k, v, out, lse, key_lengths, dout, dq, dk, dv):
        """One backward (the function's .backward); None, or the one-line reason it failed."""
        try:
            forward_pointers = (q, k, v, out, lse, key_lengths)
            if forward_pointers != self.views_for:
                self.views = self._make_views(forward_pointers)
                self.views_for = forward_pointers
            gradient_pointers = (dout, dq, dk, dv)
            if gradient_pointers != self.gradient_views_for:
                self.gradient_views = self._make_gradient_views(gradient_pointers)
                self.gradient_views_for = gradient_pointers
            return self._call_backward(*self.views, *self.gradient_views)
        except Exception as error:
            return last_line(error)

    def _call_backward(self, q, k, v, out, lse, lengths, dout, dq, dk, dv):
        p = self.problem
        p.lse, p.key_lengths = lse, lengths
        backward = self.function.backward
        if self.device < 0:
            return self._check_gradients(backward(q, k, v, out, dout, dq, dk, dv, p), dq, dk, dv)
        import torch
        with torch.cuda.device(self.device), torch.cuda.stream(torch.cuda.ExternalStream(self.stream)):
            return self._check_gradients(backward(q, k, v, out, dout, dq, dk, dv, p), dq, dk, dv)

    @staticmethod
    def _check_gradients(result, dq, dk, dv):
        """Copies returned gradients (dq, dk, dv) into attnbench's buffers; None or the reason."""
        if result is None:
            return None
        if not isinstance(result, tuple) or len(result) != 3:
            return "a backward returns None (dq, dk, dv filled) or the tuple (dq, dk, dv)"
        for name, got, buffer in zip(("dq", "dk", "dv"), result, (dq, dk, dv)):
            if tuple(got.shape) != tuple(buffer.shape):
                return f"returned {name} of shape {tuple(got.shape)}; attnbench's is {tuple(buffer.shape)}"
            _copy(buffer, got)
        return None

    def run(self, q, k, v, out, lse, key_lengths):
        """One forward; None, or the one-line reason it failed."""
        pointers = (q, k, v, out, lse, key_lengths)
        try:
            if pointers != self.views_for:
                self.views = self._make_views(pointers)
                self.views_for = pointers
            return self._call(*self.views)
        except Exception as error:
            return last_line(error)

    def _call(self, q, k, v, out, lse, lengths):
        p = self.problem
        p.lse, p.key_lengths = lse, lengths
        if self.device < 0:
            return self._check_result(self.function(q, k, v, out, p), out, lse)
        import torch
        with torch.cuda.device(self.device), torch.cuda.stream(torch.cuda.ExternalStream(self.stream)):
            torch.cuda.reset_peak_memory_stats(self.device)
            before = torch.cuda.memory_allocated(self.device)
            failure = self._check_result(self.function(q, k, v, out, p), out, lse)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device) - before
        return failure

    def _check_result(self, result, out, lse):
        """Copies a returned output (and LSE) into attnbench's buffers; None or the reason."""
        if result is None:
            return None
        result_lse = None
        if isinstance(result, tuple):
            if len(result) != 2:
                return f"returned a tuple of {len(result)}; accepted: out or (out, lse)"
            result, result_lse = result
        if tuple(result.shape) != tuple(out.shape):
            return (f"returned an output of shape {tuple(result.shape)}; attnbench's out is "
                    f"{tuple(out.shape)} (batch, seqlen_q, heads_q, head_dim_v)")
        _copy(out, result)
        if result_lse is not None and lse is not None:
            if tuple(result_lse.shape) != tuple(lse.shape):
                return (f"returned an LSE of shape {tuple(result_lse.shape)}; expected "
                        f"{tuple(lse.shape)} (batch, heads_q, seqlen_q)")
            _copy(lse, result_lse)
        return None

    def extra_memory_bytes(self):
        return self.peak_bytes

    def details(self):
        if self.device >= 0:
            memory = "torch.cuda.max_memory_allocated around the forward (torch's caching allocator bypasses attnbench's tracking allocator)"
        else:
            memory = f"not measured: {self.arrays} allocations on the CPU bypass attnbench's tracking allocator"
        return json.dumps({"python": {"arrays": self.arrays, "memory": memory}})


def _copy(destination, source):
    if hasattr(destination, "copy_"):
        destination.copy_(source)
    else:
        import numpy
        numpy.copyto(destination, numpy.asarray(source), casting="same_kind")


def make_plan(function, shape_json, device, stream):
    """(plan, None), or (None, the reason): "unsupported: ..." where the kernel declines."""
    try:
        plan = Plan(function, json.loads(shape_json), device, stream)
    except Exception as error:
        return None, last_line(error)
    reason = plan.refusal()
    if reason is not None:
        return None, "unsupported: " + reason
    return plan, None
