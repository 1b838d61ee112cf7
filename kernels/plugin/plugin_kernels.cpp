#include "kernels/plugin/plugin_kernels.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include "kernels/cpu/phases.h"

namespace attnbench {
namespace {

// The C ABI numbers dtypes and masks as attnbench does, so a value crosses unchanged.
static_assert(static_cast<int>(DType::f32) == ATTNBENCH_DTYPE_FP32 &&
              static_cast<int>(DType::f16) == ATTNBENCH_DTYPE_FP16 &&
              static_cast<int>(DType::bf16) == ATTNBENCH_DTYPE_BF16 &&
              static_cast<int>(DType::e4m3) == ATTNBENCH_DTYPE_E4M3 &&
              static_cast<int>(DType::e5m2) == ATTNBENCH_DTYPE_E5M2);
static_assert(static_cast<int>(Pass::fwd) == 0 && static_cast<int>(Pass::bwd) == 1 &&
              static_cast<int>(Pass::fwd_bwd) == 2);
static_assert(static_cast<int>(MaskKind::none) == ATTNBENCH_MASK_NONE &&
              static_cast<int>(MaskKind::causal) == ATTNBENCH_MASK_CAUSAL &&
              static_cast<int>(MaskKind::causal_br) == ATTNBENCH_MASK_CAUSAL_BR &&
              static_cast<int>(MaskKind::window) == ATTNBENCH_MASK_WINDOW &&
              static_cast<int>(MaskKind::padding) == ATTNBENCH_MASK_PADDING);

std::vector<std::string> split_names(const char* text) {
  std::vector<std::string> names;
  if (text == nullptr) return names;
  std::string current;
  for (const char* c = text;; ++c) {
    if (*c == ',' || *c == '\0') {
      const size_t first = current.find_first_not_of(' ');
      const size_t last = current.find_last_not_of(' ');
      if (first != std::string::npos) names.push_back(current.substr(first, last - first + 1));
      current.clear();
      if (*c == '\0') break;
    } else {
      current += *c;
    }
  }
  return names;
}

// Each comma-separated name through `parse`; the error names the field and what is accepted.
template <typename T, typename Parse>
Result<std::vector<T>> parse_names(const char* text, const char* field, Parse parse,
                                   const std::string& accepted) {
  std::vector<T> values;
  for (const std::string& name : split_names(text)) {
    const std::optional<T> value = parse(name);
    if (!value) {
      return Status::Error(std::string("support.") + field + ": unknown '" + name + "'; accepted: " +
                           accepted);
    }
    values.push_back(*value);
  }
  return values;
}

// The plugin ABI (attnbench_plugin.h) carries no cu_seqlens: a plugin takes the dense layouts.
std::optional<Layout> parse_plugin_layout(std::string_view name) {
  const std::optional<Layout> layout = parse_layout(name);
  if (layout == Layout::thd) return std::nullopt;
  return layout;
}

Result<SupportTable> support_table(const attnbench_support& c) {
  SupportTable table;
  Result<std::vector<DType>> dtypes =
      parse_names<DType>(c.dtypes, "dtypes", parse_dtype, accepted_dtype_names());
  if (!dtypes) return dtypes.status();
  if (dtypes->empty()) return Status::Error("support.dtypes is empty; name at least one, e.g. \"fp32\"");
  Result<std::vector<MaskKind>> masks =
      parse_names<MaskKind>(c.masks, "masks", parse_mask_kind, accepted_mask_names());
  if (!masks) return masks.status();
  if (masks->empty()) return Status::Error("support.masks is empty; name at least one, e.g. \"none\"");
  Result<std::vector<Layout>> layouts =
      parse_names<Layout>(c.layouts, "layouts", parse_plugin_layout, "bshd, bhsd, qkv_packed");
  if (!layouts) return layouts.status();
  if (layouts->empty()) return Status::Error("support.layouts is empty; name at least one, e.g. \"bshd\"");
  for (const std::string& dim : split_names(c.head_dims)) {
    char* end = nullptr;
    const long value = std::strtol(dim.c_str(), &end, 10);
    if (*end != '\0' || value <= 0) {
      return Status::Error("support.head_dims: '" + dim + "' is not a positive whole number");
    }
    table.head_dims.push_back(value);
  }
  table.input_dtypes = std::move(*dtypes);
  table.outputs_fp32 = c.outputs_fp32 != 0;
  table.max_head_dim = c.max_head_dim;
  table.separate_v_dim = c.separate_v_dim != 0;
  table.masks = std::move(*masks);
  table.layouts = std::move(*layouts);
  table.gqa = c.gqa != 0;
  table.archs = split_names(c.archs);
  table.max_flops = c.max_flops;
  if (c.notes != nullptr) table.notes = c.notes;
  return table;
}

// "namespace.kernel" of letters, digits, '_', '-', '.'; a Python kernel's "py:module:function"
// (its name as --kernels gives it) also has ':'.
bool valid_kernel_name(const std::string& name) {
  const bool python = name.rfind("py:", 0) == 0;
  if (name.empty() || (!python && name.find('.') == std::string::npos)) return false;
  for (const char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                    c == '-' || (python && c == ':');
    if (!ok) return false;
  }
  return true;
}

attnbench_params to_abi(const AttentionParams& p) {
  attnbench_params c{};
  c.q = p.q;
  c.k = p.k;
  c.v = p.v;
  c.out = p.out;
  c.lse = p.lse;
  c.q_batch_stride = p.q_batch_stride, c.q_row_stride = p.q_row_stride, c.q_head_stride = p.q_head_stride;
  c.k_batch_stride = p.k_batch_stride, c.k_row_stride = p.k_row_stride, c.k_head_stride = p.k_head_stride;
  c.v_batch_stride = p.v_batch_stride, c.v_row_stride = p.v_row_stride, c.v_head_stride = p.v_head_stride;
  c.out_batch_stride = p.out_batch_stride, c.out_row_stride = p.out_row_stride;
  c.out_head_stride = p.out_head_stride;
  c.batch = p.batch, c.heads_q = p.heads_q, c.heads_kv = p.heads_kv;
  c.seqlen_q = p.seqlen_q, c.seqlen_k = p.seqlen_k;
  c.head_dim_qk = p.head_dim_qk, c.head_dim_v = p.head_dim_v, c.heads_per_kv = p.heads_per_kv;
  c.scale = p.scale;
  c.mask = static_cast<int32_t>(p.mask);
  c.window_left = p.window_left, c.window_right = p.window_right;
  c.key_lengths = p.key_lengths;
  c.input_dtype = static_cast<int32_t>(p.input_dtype);
  c.output_dtype = static_cast<int32_t>(p.output_dtype);
  c.q_descale = p.q_descale, c.k_descale = p.k_descale, c.v_descale = p.v_descale;
  c.out_scale = p.out_scale;
  c.dout = p.dout;
  c.dq = p.dq, c.dk = p.dk, c.dv = p.dv;
  c.dout_batch_stride = p.dout_batch_stride, c.dout_row_stride = p.dout_row_stride;
  c.dout_head_stride = p.dout_head_stride;
  c.dq_batch_stride = p.dq_batch_stride, c.dq_row_stride = p.dq_row_stride;
  c.dq_head_stride = p.dq_head_stride;
  c.dk_batch_stride = p.dk_batch_stride, c.dk_row_stride = p.dk_row_stride;
  c.dk_head_stride = p.dk_head_stride;
  c.dv_batch_stride = p.dv_batch_stride, c.dv_row_stride = p.dv_row_stride;
  c.dv_head_stride = p.dv_head_stride;
  c.grad_dtype = static_cast<int32_t>(p.grad_dtype);
  c.pass = static_cast<int32_t>(p.pass);
  return c;
}

std::string reason_or(const char* error, const std::string& fallback) {
  return error[0] != '\0' ? std::string(error) : fallback;
}

void* allocate_scratch(void* allocator, size_t bytes) {
  return static_cast<ScratchAllocator*>(allocator)->allocate(bytes);
}
void deallocate_scratch(void* allocator, void* pointer) {
  static_cast<ScratchAllocator*>(allocator)->deallocate(pointer);
}
// The context's phase callback (ABI 2): the phases a profile records (kernels/cpu/phases.h).
void mark_abi_phase(void*, const char* name) { mark_phase(name); }

class AbiPlan final : public Plan {
 public:
  AbiPlan(const attnbench_kernel& described, const attnbench_backward& backward,
          attnbench_plan* plan, std::shared_ptr<void> keep_alive)
      : described_(described), backward_(backward), plan_(plan), keep_alive_(std::move(keep_alive)) {}
  ~AbiPlan() override {
    if (described_.destroy_plan != nullptr) described_.destroy_plan(plan_);
  }

  Status run(const AttentionParams& params) override {
    return call(described_.run, params, "run");
  }
  Status run_backward(const AttentionParams& params) override {
    if (backward_.run_backward == nullptr) return Plan::run_backward(params);
    return call(backward_.run_backward, params, "run_backward");
  }

  std::string details() const override {
    if (described_.details == nullptr) return {};
    const char* text = described_.details(plan_);
    return text == nullptr ? std::string() : std::string(text);
  }

  std::optional<int64_t> own_extra_memory_bytes() const override {
    if (described_.extra_memory_bytes == nullptr) return std::nullopt;
    const int64_t bytes = described_.extra_memory_bytes(plan_);
    return bytes < 0 ? -1 : bytes;  // -1: not known
  }

 private:
  using Entry = int (*)(attnbench_plan*, const attnbench_params*, char*, size_t);
  Status call(Entry entry, const AttentionParams& params, const char* what) {
    const attnbench_params arguments = to_abi(params);
    char error[1024] = "";
    const int failed = entry(plan_, &arguments, error, sizeof error);
    mark_phase(nullptr);  // a phase the plugin left open ends with its step
    if (failed != 0) {
      error[sizeof error - 1] = '\0';
      return Status::Error(
          reason_or(error, std::string(described_.name) + ": " + what + " failed and gave no reason"));
    }
    return Status::Ok();
  }

  attnbench_kernel described_;
  attnbench_backward backward_;
  attnbench_plan* plan_;
  std::shared_ptr<void> keep_alive_;
};

}  // namespace

Result<Kernel> wrap_abi_kernel(const attnbench_kernel& described, std::string origin,
                               std::shared_ptr<void> keep_alive,
                               const attnbench_backward* backward_entry) {
  const attnbench_backward backward =
      backward_entry != nullptr ? *backward_entry : attnbench_backward{nullptr, 0};
  const std::string name = described.name == nullptr ? "" : described.name;
  if (!valid_kernel_name(name)) {
    return Status::Error("kernel name '" + name +
                         "' is not accepted: namespace.kernel of letters, digits, '_', '-', '.'");
  }
  if (described.make_plan == nullptr || described.run == nullptr) {
    return Status::Error(name + ": make_plan and run are required");
  }
  if (described.backend != ATTNBENCH_BACKEND_CPU && described.backend != ATTNBENCH_BACKEND_CUDA) {
    return Status::Error(name + ": backend " + std::to_string(described.backend) +
                         " is not accepted: 0 (cpu) or 1 (cuda)");
  }
  Result<SupportTable> support = support_table(described.support);
  if (!support) return Status::Error(name + ": " + support.status().message);

  Kernel kernel;
  kernel.name = name;
  kernel.summary = described.summary == nullptr ? "" : described.summary;
  kernel.backend = described.backend == ATTNBENCH_BACKEND_CUDA ? Backend::cuda : Backend::cpu;
  kernel.deterministic = described.deterministic != 0;
  kernel.returns_lse = described.returns_lse != 0;
  kernel.support = std::move(*support);
  if (backward.run_backward != nullptr) {
    kernel.support.passes = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
    kernel.backward_deterministic = backward.deterministic != 0;
  }
  kernel.origin = std::move(origin);
  kernel.make_plan = [described, backward, keep_alive](const Problem& problem,
                                                       const PlanContext& context)
      -> Result<std::unique_ptr<Plan>> {
    const attnbench_params shape = to_abi(shape_params(problem));
    const attnbench_plan_context abi_context{allocate_scratch, deallocate_scratch, &context.scratch,
                                             context.stream, context.device, mark_abi_phase,
                                             nullptr};
    attnbench_plan* plan = nullptr;
    char error[1024] = "";
    if (described.make_plan(described.kernel_data, &shape, &abi_context, &plan, error, sizeof error) != 0 || plan == nullptr) {
      error[sizeof error - 1] = '\0';
      return Status::Error(reason_or(error, std::string(described.name) + ": make_plan failed and gave no reason"));
    }
    return std::unique_ptr<Plan>(std::make_unique<AbiPlan>(described, backward, plan, keep_alive));
  };
  return kernel;
}

Result<std::vector<Kernel>> load_plugin_kernels(const std::string& path) {
  const std::string where = "--plugin " + path;
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return Status::Error(where + ": no such file (a shared library built against kernels/plugin/attnbench_plugin.h)");
  }
  const std::string absolute = std::filesystem::absolute(path, error).string();
  // Loaded for the life of the process: a plugin's static state and CUDA registrations are
  // never unloaded from under a plan.
  void* library = dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return Status::Error(where + ": cannot load: " + dlerror());
  const auto entry =
      reinterpret_cast<attnbench_plugin_entry_fn>(dlsym(library, ATTNBENCH_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    return Status::Error(where + ": exports no " ATTNBENCH_PLUGIN_ENTRY_SYMBOL "() (see kernels/plugin/attnbench_plugin.h)");
  }
  const attnbench_plugin* plugin = entry();
  if (plugin == nullptr) return Status::Error(where + ": " ATTNBENCH_PLUGIN_ENTRY_SYMBOL "() returned null");
  // Version 2 only appended the context's phase callback, version 3 the params' gradient fields
  // and the plugin's backwards table (read only from a version-3 plugin): an older plugin reads
  // the first fields of the context and the params, which are unchanged.
  if (plugin->abi_version < 1 || plugin->abi_version > ATTNBENCH_PLUGIN_ABI_VERSION) {
    return Status::Error(where + ": plugin ABI version " + std::to_string(plugin->abi_version) +
                         ", this attnbench accepts 1 to " + std::to_string(ATTNBENCH_PLUGIN_ABI_VERSION) +
                         "; rebuild the plugin against this attnbench's kernels/plugin/attnbench_plugin.h");
  }
  if (plugin->kernel_count <= 0 || plugin->kernels == nullptr) {
    return Status::Error(where + ": the plugin lists no kernels");
  }
  const std::string origin = "plugin " + absolute + ", version " +
                             (plugin->version != nullptr ? plugin->version : "(not given)");
  std::vector<Kernel> kernels;
  for (int i = 0; i < plugin->kernel_count; ++i) {
    const attnbench_backward* backward =
        plugin->abi_version >= 3 && plugin->backwards != nullptr ? &plugin->backwards[i] : nullptr;
    Result<Kernel> kernel = wrap_abi_kernel(plugin->kernels[i], origin, nullptr, backward);
    if (!kernel) return Status::Error(where + ": " + kernel.status().message);
    kernels.push_back(std::move(*kernel));
  }
  return kernels;
}

}  // namespace attnbench
