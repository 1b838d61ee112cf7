// libattnbench_python.so: the embedded Python interpreter behind Python kernels. attnbench opens
// it only when a Python kernel is asked for (kernels/python/python_kernels.cpp), after the
// libpython of the python3 on PATH; built against Python's stable ABI (3.10 and later) and
// linked against no libpython, it runs with whichever Python the host has, a GPU host's too. It hands each kernel over through the plugin C
// ABI; the Python side (attnbench_bridge.py, next to this file) does the work of making arrays
// over attnbench's buffers, calling the function and reporting errors as one line, so this file
// only moves calls across: every call takes the GIL, and nothing here knows a kernel's rules.
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030A0000
#include <Python.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kernels/plugin/attnbench_plugin.h"

namespace {

using nlohmann::json;

void write_text(char* destination, size_t size, const std::string& text) {
  if (size == 0) return;
  std::snprintf(destination, size, "%s", text.c_str());
}

// Holds the GIL for a scope (the interpreter releases it between calls).
class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

std::string utf8_of(PyObject* object) {
  const char* text = object == nullptr ? nullptr : PyUnicode_AsUTF8AndSize(object, nullptr);
  if (text == nullptr) {
    PyErr_Clear();
    return {};
  }
  return text;
}

// The pending Python exception as "Type: message", cleared; for errors of the bridge module
// itself (the user's exceptions come back as text from attnbench_bridge.py).
std::string take_python_error() {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  std::string text = "unknown Python error";
  if (value != nullptr) {
    PyObject* string = PyObject_Str(value);
    if (string != nullptr) {
      text = utf8_of(string);
      Py_DECREF(string);
    }
  }
  if (type != nullptr) {
    PyObject* name = PyObject_GetAttrString(type, "__name__");
    if (name != nullptr) {
      text = utf8_of(name) + ": " + text;
      Py_DECREF(name);
    }
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  PyErr_Clear();
  return text;
}


void add_native_module();

// Starts the interpreter once (the worker thread that asks first) as `python_executable` would
// start (its prefix, its virtual environment's site-packages), puts the bridge's folder and the
// working directory on sys.path, imports attnbench_bridge and releases the GIL.
PyObject* bridge_module(const char* python_executable, const char* helper_dir, std::string& error) {
  static std::once_flag started;
  static PyObject* module = nullptr;
  static std::string start_error;
  std::call_once(started, [&] {
    if (!Py_IsInitialized()) {
      // Deprecated since 3.11 for PyConfig, which the stable ABI does not offer.
      static wchar_t* program = Py_DecodeLocale(python_executable, nullptr);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      if (program != nullptr) Py_SetProgramName(program);
#pragma GCC diagnostic pop
      Py_InitializeEx(0);  // no signal handlers: attnbench keeps its own
    } else {
      PyGILState_Ensure();
    }
    PyObject* path = PySys_GetObject("path");  // borrowed
    char cwd[4096];
    if (path != nullptr && getcwd(cwd, sizeof cwd) != nullptr) {
      PyObject* here = PyUnicode_FromString(cwd);
      PyList_Insert(path, 0, here);
      Py_DECREF(here);
    }
    if (path != nullptr) {
      PyObject* helpers = PyUnicode_FromString(helper_dir);
      PyList_Append(path, helpers);
      Py_DECREF(helpers);
    }
    add_native_module();
    module = PyImport_ImportModule("attnbench_bridge");
    if (module == nullptr) start_error = "cannot import attnbench_bridge from " + std::string(helper_dir) + ": " + take_python_error();
    PyEval_SaveThread();
  });
  error = start_error;
  return module;
}

// One Python kernel as the C ABI sees it; its strings live as long as the process.
struct PythonKernel {
  PyObject* function = nullptr;
  int device_kind = ATTNBENCH_BACKEND_CPU;
  std::string name, summary, dtypes, head_dims, masks, layouts, archs, notes;
  attnbench_kernel described{};
  attnbench_backward backward{};  // run_backward null: the function has no .backward
};

struct PythonPlan {
  PyObject* plan = nullptr;
  std::string details;
  void (*phase)(void*, const char*) = nullptr;  // the context's phase callback (ABI 2)
  void* phase_host = nullptr;
};

// The plan whose forward runs on this thread: attnbench_bridge.phase marks its phases.
thread_local const PythonPlan* t_running = nullptr;

// A phase name as a string that lives as long as the process (the ABI keeps the pointer).
const char* interned(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

// The interned name of a Python str, found by its text without allocating (the str keeps its
// UTF-8), from this thread's cache: a mark costs a lookup, not a lock, once a name was seen.
const char* interned_name(PyObject* name) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(name, &size);
  if (text == nullptr) {
    PyErr_Clear();
    return interned("?");
  }
  const std::string_view key(text, static_cast<size_t>(size));
  thread_local std::map<std::string, const char*, std::less<>> seen;
  if (const auto found = seen.find(key); found != seen.end()) return found->second;
  const char* stable = interned(std::string(key));
  seen.emplace(std::string(key), stable);
  return stable;
}

// _attnbench_native.phase(name or None), which attnbench_bridge.phase calls: the running plan's
// phase starts (None ends it). Outside a forward, or on a host without the callback, nothing.
PyObject* native_phase(PyObject*, PyObject* name) {
  const PythonPlan* plan = t_running;
  if (plan != nullptr && plan->phase != nullptr) {
    plan->phase(plan->phase_host, name == Py_None ? nullptr : interned_name(name));
  }
  Py_INCREF(Py_None);
  return Py_None;
}

PyMethodDef g_native_methods[] = {
    {"phase", native_phase, METH_O, "Marks the start of a phase of the running forward."},
    {nullptr, nullptr, 0, nullptr}};
PyModuleDef g_native_module = {PyModuleDef_HEAD_INIT,
                               "_attnbench_native",
                               "attnbench's C side of the Python bridge",
                               -1,
                               g_native_methods,
                               nullptr,
                               nullptr,
                               nullptr,
                               nullptr};

// Makes _attnbench_native importable (in sys.modules) before attnbench_bridge is imported.
void add_native_module() {
  PyObject* module = PyModule_Create(&g_native_module);
  if (module == nullptr) {
    PyErr_Clear();
    return;
  }
  PyDict_SetItemString(PyImport_GetModuleDict(), "_attnbench_native", module);
  Py_DECREF(module);
}

json shape_json(const attnbench_params& s) {
  return json{{"batch", s.batch},
              {"heads_q", s.heads_q},
              {"heads_kv", s.heads_kv},
              {"seqlen_q", s.seqlen_q},
              {"seqlen_k", s.seqlen_k},
              {"head_dim_qk", s.head_dim_qk},
              {"head_dim_v", s.head_dim_v},
              {"scale", s.scale},
              {"mask", s.mask},
              {"window_left", s.window_left},
              {"window_right", s.window_right},
              {"input_dtype", s.input_dtype},
              {"output_dtype", s.output_dtype},
              {"q_batch_stride", s.q_batch_stride},
              {"q_row_stride", s.q_row_stride},
              {"q_head_stride", s.q_head_stride},
              {"k_batch_stride", s.k_batch_stride},
              {"k_row_stride", s.k_row_stride},
              {"k_head_stride", s.k_head_stride},
              {"v_batch_stride", s.v_batch_stride},
              {"v_row_stride", s.v_row_stride},
              {"v_head_stride", s.v_head_stride},
              {"out_batch_stride", s.out_batch_stride},
              {"out_row_stride", s.out_row_stride},
              {"out_head_stride", s.out_head_stride},
              {"dout_batch_stride", s.dout_batch_stride},
              {"dout_row_stride", s.dout_row_stride},
              {"dout_head_stride", s.dout_head_stride},
              {"dq_batch_stride", s.dq_batch_stride},
              {"dq_row_stride", s.dq_row_stride},
              {"dq_head_stride", s.dq_head_stride},
              {"dk_batch_stride", s.dk_batch_stride},
              {"dk_row_stride", s.dk_row_stride},
              {"dk_head_stride", s.dk_head_stride},
              {"dv_batch_stride", s.dv_batch_stride},
              {"dv_row_stride", s.dv_row_stride},
              {"dv_head_stride", s.dv_head_stride},
              {"grad_dtype", s.grad_dtype},
              {"pass", s.pass}};
}

// The imported attnbench_bridge module, once the first kernel was described.
PyObject* g_bridge = nullptr;
PyObject* bridge() { return g_bridge; }

// Every Python kernel described in this process (a deque: descriptions point into it).
std::deque<PythonKernel>& kernels() {
  static std::deque<PythonKernel> all;
  return all;
}

unsigned long long address(const void* pointer) {
  return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pointer));
}

// The Python plan's answer to one step: None, or the one-line reason it failed.
int step_result(PyObject* result, char* error, size_t error_size) {
  if (result == nullptr) {
    write_text(error, error_size, "python: " + take_python_error());
    return 1;
  }
  const bool failed = result != Py_None;
  if (failed) write_text(error, error_size, "python: " + utf8_of(result));
  Py_DECREF(result);
  return failed ? 1 : 0;
}

int run_plan(attnbench_plan* opaque, const attnbench_params* p, char* error, size_t error_size) {
  auto* plan = reinterpret_cast<PythonPlan*>(opaque);
  Gil gil;
  t_running = plan;
  PyObject* result = PyObject_CallMethod(plan->plan, "run", "KKKKKK", address(p->q), address(p->k),
                                         address(p->v), address(p->out), address(p->lse),
                                         address(p->key_lengths));
  t_running = nullptr;
  return step_result(result, error, error_size);
}

int run_plan_backward(attnbench_plan* opaque, const attnbench_params* p, char* error,
                      size_t error_size) {
  auto* plan = reinterpret_cast<PythonPlan*>(opaque);
  Gil gil;
  t_running = plan;
  PyObject* result = PyObject_CallMethod(
      plan->plan, "run_backward", "KKKKKKKKKK", address(p->q), address(p->k), address(p->v),
      address(p->out), address(p->lse), address(p->key_lengths), address(p->dout),
      address(p->dq), address(p->dk), address(p->dv));
  t_running = nullptr;
  return step_result(result, error, error_size);
}

void destroy_plan(attnbench_plan* opaque) {
  auto* plan = reinterpret_cast<PythonPlan*>(opaque);
  {
    Gil gil;
    Py_XDECREF(plan->plan);
  }
  delete plan;
}

const char* plan_details(attnbench_plan* opaque) {
  auto* plan = reinterpret_cast<PythonPlan*>(opaque);
  Gil gil;
  PyObject* text = PyObject_CallMethod(plan->plan, "details", nullptr);
  plan->details = text == nullptr ? json{{"python", {{"details_error", take_python_error()}}}}.dump()
                                  : utf8_of(text);
  Py_XDECREF(text);
  return plan->details.c_str();
}

int64_t plan_extra_memory_bytes(attnbench_plan* opaque) {
  auto* plan = reinterpret_cast<PythonPlan*>(opaque);
  Gil gil;
  PyObject* bytes = PyObject_CallMethod(plan->plan, "extra_memory_bytes", nullptr);
  if (bytes == nullptr) {
    PyErr_Clear();
    return -1;
  }
  const long long value = PyLong_AsLongLong(bytes);
  Py_DECREF(bytes);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  return value;
}

// make_plan for the kernel whose description is `kernel`.
int make_python_plan(const PythonKernel& kernel, const attnbench_params* shape,
                     const attnbench_plan_context* context, attnbench_plan** plan, char* error,
                     size_t error_size) {
  Gil gil;
  const std::string text = shape_json(*shape).dump();
  PyObject* made = PyObject_CallMethod(bridge(), "make_plan", "OsiK", kernel.function, text.c_str(),
                                       static_cast<int>(context->device),
                                       static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(context->stream)));
  if (made == nullptr) {
    write_text(error, error_size, "python: " + take_python_error());
    return 1;
  }
  PyObject* made_plan = PyTuple_GetItem(made, 0);  // borrowed
  PyObject* reason = PyTuple_GetItem(made, 1);
  if (made_plan == nullptr || made_plan == Py_None) {
    const std::string why = utf8_of(reason);
    // "unsupported: ..." stays as it is (the case is skipped); anything else is the kernel's error.
    write_text(error, error_size, why.rfind("unsupported", 0) == 0 ? why : "python: " + why);
    Py_DECREF(made);
    return 1;
  }
  auto* result = new PythonPlan;
  result->plan = made_plan;
  result->phase = context->phase;
  result->phase_host = context->phase_host;
  Py_INCREF(made_plan);
  Py_DECREF(made);
  *plan = reinterpret_cast<attnbench_plan*>(result);
  return 0;
}

// The C ABI's make_plan: `kernel_data` is the PythonKernel the description was made from.
int make_plan(void* kernel_data, const attnbench_params* shape, const attnbench_plan_context* context,
              attnbench_plan** plan, char* error, size_t error_size) {
  return make_python_plan(*static_cast<const PythonKernel*>(kernel_data), shape, context, plan, error,
                          error_size);
}

// Fills a PythonKernel's description from attnbench_bridge.describe()'s JSON.
void describe_kernel(PythonKernel& kernel, const json& d) {
  kernel.summary = d.value("summary", "");
  kernel.dtypes = d.value("dtypes", "");
  kernel.head_dims = d.value("head_dims", "");
  kernel.masks = d.value("masks", "");
  kernel.layouts = d.value("layouts", "");
  kernel.archs = kernel.device_kind == ATTNBENCH_BACKEND_CPU ? "cpu" : "any CUDA GPU PyTorch supports";
  kernel.notes = d.value("notes", "");
  attnbench_kernel& c = kernel.described;
  c.name = kernel.name.c_str();
  c.summary = kernel.summary.c_str();
  c.backend = kernel.device_kind;
  c.deterministic = d.value("deterministic", 0);
  c.returns_lse = d.value("returns_lse", 0);
  c.support.dtypes = kernel.dtypes.c_str();
  c.support.outputs_fp32 = d.value("outputs_fp32", 0);
  c.support.head_dims = kernel.head_dims.c_str();
  c.support.max_head_dim = d.value("max_head_dim", 0);
  c.support.separate_v_dim = d.value("separate_v_dim", 0);
  c.support.masks = kernel.masks.c_str();
  c.support.layouts = kernel.layouts.c_str();
  c.support.gqa = d.value("gqa", 1);
  c.support.archs = kernel.archs.c_str();
  // One limit per device (attnbench_bridge._max_flops): the CPU's is not a GPU's.
  const std::string device = kernel.device_kind == ATTNBENCH_BACKEND_CPU ? "cpu" : "cuda";
  c.support.max_flops = d.contains("max_flops") && d["max_flops"].is_object()
                            ? d["max_flops"].value(device, 0.0)
                            : 0.0;
  c.support.notes = kernel.notes.c_str();
  c.make_plan = make_plan;
  c.kernel_data = &kernel;
  c.run = run_plan;
  c.destroy_plan = destroy_plan;
  c.details = plan_details;
  c.extra_memory_bytes = plan_extra_memory_bytes;
  kernel.backward.run_backward = d.value("backward", 0) != 0 ? run_plan_backward : nullptr;
  kernel.backward.deterministic = d.value("backward_deterministic", 0);
}

}  // namespace

// Describes the Python kernel `target` ("module:function") under `name`: one C ABI kernel per
// device its table declares, in *kernels (valid for the life of the process).
extern "C" __attribute__((visibility("default"))) int attnbench_python_kernels(
    const char* python_executable, const char* target, const char* name, const char* helper_dir,
    const attnbench_kernel** out, const attnbench_backward** backwards, int* count, char* origin,
    size_t origin_size, char* error, size_t error_size) {
  static std::mutex mutex;
  static std::vector<std::vector<attnbench_kernel>> handed_out;
  static std::vector<std::vector<attnbench_backward>> handed_out_backwards;
  std::lock_guard<std::mutex> lock(mutex);
  std::string start_error;
  g_bridge = bridge_module(python_executable, helper_dir, start_error);
  if (g_bridge == nullptr) {
    write_text(error, error_size, start_error);
    return 1;
  }
  Gil gil;
  PyObject* described = PyObject_CallMethod(g_bridge, "describe", "s", target);
  if (described == nullptr) {
    write_text(error, error_size, "attnbench_bridge.describe: " + take_python_error());
    return 1;
  }
  if (PyObject* reason = PyTuple_GetItem(described, 2); reason != nullptr && reason != Py_None) {
    write_text(error, error_size, utf8_of(reason));  // the module, function or table is wrong
    Py_DECREF(described);
    return 1;
  }
  const json description = json::parse(utf8_of(PyTuple_GetItem(described, 0)), nullptr, false);
  PyObject* function = PyTuple_GetItem(described, 1);
  if (description.is_discarded() || function == nullptr) {
    Py_DECREF(described);
    write_text(error, error_size, "attnbench_bridge.describe returned no description");
    return 1;
  }
  std::vector<attnbench_kernel> listed;
  std::vector<attnbench_backward> listed_backwards;
  for (const std::string& device : description.value("devices", std::vector<std::string>{"cpu"})) {
    PythonKernel& kernel = kernels().emplace_back();
    kernel.function = function;
    Py_INCREF(function);
    kernel.name = name;
    kernel.device_kind = device == "cuda" ? ATTNBENCH_BACKEND_CUDA : ATTNBENCH_BACKEND_CPU;
    describe_kernel(kernel, description);
    listed.push_back(kernel.described);
    listed_backwards.push_back(kernel.backward);
  }
  Py_DECREF(described);
  write_text(origin, origin_size, description.value("origin", "python"));
  handed_out.push_back(std::move(listed));
  *out = handed_out.back().data();
  handed_out_backwards.push_back(std::move(listed_backwards));
  *backwards = handed_out_backwards.back().data();
  *count = static_cast<int>(handed_out.back().size());
  return 0;
}
