// Every kernel attnbench knows, in one explicit list (registry.cpp). No static-initialization
// magic: to add a kernel to the build, add one line there. Kernels from outside the build
// (plugins, Python kernels, the shipped PyTorch peers) join the same list at run time, before
// anything reads it, through add_requested_kernels.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

const std::vector<Kernel>& all_kernels();
// The kernel of that name; with `backend`, the one for that backend (a Python kernel may be
// listed once per backend under one name).
const Kernel* find_kernel(std::string_view name, std::optional<Backend> backend = std::nullopt);

// Adds the kernels from outside the build that a command asks for: every plugin's kernels,
// the Python kernel of each "py:module:function" among `kernel_globs`, and the shipped Python
// kernels (torch.*) that some glob matches. A plugin or Python kernel that cannot be loaded is a
// one-line error; a shipped one whose Python side is missing (no PyTorch) joins as unavailable,
// with the reason. Call it before anything keeps a Kernel pointer; loading the same source
// twice adds nothing.
Status add_requested_kernels(const std::vector<std::string>& plugins,
                             const std::vector<std::string>& kernel_globs);

// The sources added so far, for a worker process to load the same kernels.
struct ExternalKernelSources {
  std::vector<std::string> plugins;       // library paths
  std::vector<std::string> kernel_globs;  // the globs that asked for Python kernels
};
const ExternalKernelSources& external_kernel_sources();

// fnmatch(3) globs without flags: `*`, `?` and `[...]`; the one glob rule of attnbench.
bool glob_match(const std::string& pattern, const std::string& text);

// Whether a --kernels glob selects `kernel`: its exact name always; a variant otherwise only
// through "<family glob>[*]" ("cpu.flash[*]": every variant of cpu.flash); any other glob
// (fnmatch, so "cpu.*" or "*") selects kernels that are not variants. Suite entries name
// families (a variant is a case of every entry whose globs match its family), so a suite runs
// variants only when --kernels names them.
bool kernel_selected(const std::string& glob, const Kernel& kernel);
// The variants of `family`, in registry order.
std::vector<const Kernel*> variants_of(const std::string& family);

// A "py:..." kernel name: a Python kernel given by module and function.
bool is_python_kernel_spec(std::string_view name);

}  // namespace attnbench
