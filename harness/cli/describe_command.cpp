#include "harness/cli/describe_command.h"

#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <utility>
#include <variant>

#include "harness/cli/runner.h"
#include "harness/core/series_key.h"
#include "harness/measure/environment.h"
#include "harness/store/rows.h"
#include "harness/suite/case_matrix.h"
#include "kernels/registry.h"
#include "reference/flops.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

// The registry's kernels the globs name, each name once, in registry order. A name the registry
// holds for several backends (cuda.flash2 on cuda and on emu) is one kernel built from one source:
// the first entry speaks for it.
std::vector<const Kernel*> named_kernels(const std::vector<std::string>& globs) {
  std::vector<const Kernel*> kernels;
  std::set<std::string> seen;
  for (const Kernel& kernel : all_kernels()) {
    if (seen.count(kernel.name)) continue;
    for (const std::string& glob : globs) {
      if (kernel_selected(glob, kernel)) {
        seen.insert(kernel.name);
        kernels.push_back(&kernel);
        break;
      }
    }
  }
  return kernels;
}

struct Parsed {
  std::string input;
  Problem problem;
};

Result<std::vector<Parsed>> parse_shapes(const std::vector<std::string>& shapes) {
  std::vector<Parsed> parsed;
  for (const std::string& text : shapes) {
    Parsed one{text, Problem{}};
    if (Status status = parse_shape(text, one.problem); !status) {
      return Status::Error("--shape '" + text + "': " + status.message);
    }
    parsed.push_back(std::move(one));
  }
  return parsed;
}

Result<std::vector<Distribution>> parse_distributions(const std::vector<std::string>& names) {
  std::vector<Distribution> distributions;
  for (const std::string& name : names) {
    Distribution distribution = Distribution::normal;
    if (!parse_distribution(name, distribution)) {
      return Status::Error("--dist '" + name + "': accepted: " + accepted_distribution_names());
    }
    distributions.push_back(distribution);
  }
  if (distributions.empty()) distributions.push_back(Distribution::normal);
  return distributions;
}

json sql_value_json(const sql::SqlValue& value) {
  return std::visit(
      [](const auto& v) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::nullptr_t>) {
          return nullptr;
        } else {
          return v;
        }
      },
      value);
}

// One kernel (by name; `kernel` null outside the registry) on one shape in one distribution: the
// cases row the store writes for it, its series key on each device model, and the kernel's
// expectation where the shape is inside its table.
json describe_case(const std::string& name, const Kernel* kernel, const Parsed& shape,
                   Distribution distribution, const std::vector<std::string>& devices,
                   const std::string& build) {
  const sql::StoredCase stored{name, shape.problem, std::string(distribution_name(distribution))};
  SeriesKey key{name, shape_string(shape.problem), stored.distribution, "", build};
  json series_keys = json::object();
  json kernel_wide_keys = json::object();  // the kernel's aggregate on each device model
  for (const std::string& device : devices) {
    key.device = device;
    series_keys[device] = key.text();
    kernel_wide_keys[device] = key.kernel_wide().text();
  }
  json case_row = json::object();
  for (const sql::Column& column : sql::case_row(stored)) {
    case_row[column.name] = sql_value_json(column.value);
  }
  json described = {{"input", shape.input},
                    {"kernel", name},
                    {"in_registry", kernel != nullptr},
                    {"shape", key.shape},
                    {"distribution", key.distribution},
                    {"case_label", key.case_label()},
                    {"case_key", sql::case_key(stored)},
                    {"case_row", case_row},
                    {"series_keys", series_keys},
                    {"kernel_wide_keys", kernel_wide_keys}};
  if (kernel == nullptr) return described;
  const std::string reason = skip_reason(*kernel, shape.problem);
  described["supported"] = reason.empty();
  described["reason"] = reason;
  if (reason.empty()) {
    described["expected"] = expectation_json(expected_resources(*kernel, shape.problem));
  }
  return described;
}

void print_text(const json& described, std::ostream& out) {
  for (const json& shape : described["shapes"]) {
    out << shape["shape"].get<std::string>() << "  " << shape["flops"].get<double>() << " FLOPs  "
        << shape["bytes"].get<double>() << " bytes\n";
  }
  for (const json& one : described["cases"]) {
    out << one["kernel"].get<std::string>() << "  " << one["case_label"].get<std::string>();
    if (!one["in_registry"].get<bool>()) {
      out << "  (not in the registry: no expectation)\n";
    } else if (!one["supported"].get<bool>()) {
      out << "  skip: " << one["reason"].get<std::string>() << "\n";
      continue;
    } else {
      out << "  expected " << one["expected"].dump() << "\n";
    }
    for (const auto& [device, key] : one["series_keys"].items()) {
      out << "    " << device << ": " << key.get<std::string>() << "\n";
    }
  }
}

}  // namespace

int describe_command(const DescribeOptions& options, std::ostream& out, std::ostream& err) {
  const auto fail = [&err](const std::string& message) {
    err << "error: " << message << "\n";
    return kExitUsage;
  };
  if (options.shapes.empty()) return fail("nothing to describe: give --shape ... (repeatable)");
  const Result<std::vector<Parsed>> shapes = parse_shapes(options.shapes);
  if (!shapes) return fail(shapes.status().message);
  const Result<std::vector<Distribution>> distributions =
      parse_distributions(options.distributions);
  if (!distributions) return fail(distributions.status().message);
  if (Status known = check_kernel_globs(options.kernel_globs); !known) return fail(known.message);

  const std::string build = series_build(compiled_environment());
  json described = {{"build", build}, {"shapes", json::array()}, {"cases", json::array()}};
  for (const Parsed& shape : *shapes) {
    described["shapes"].push_back({{"input", shape.input},
                                   {"shape", shape_string(shape.problem)},
                                   {"flops", attention_flops(shape.problem)},
                                   {"bytes", attention_bytes(shape.problem)}});
  }
  std::vector<std::pair<std::string, const Kernel*>> kernels;
  for (const Kernel* kernel : named_kernels(options.kernel_globs)) {
    kernels.emplace_back(kernel->name, kernel);
  }
  for (const std::string& name : options.kernel_names) {
    const std::vector<const Kernel*> known = named_kernels({name});
    kernels.emplace_back(name, known.size() == 1 && known[0]->name == name ? known[0] : nullptr);
  }
  for (const auto& [name, kernel] : kernels) {
    for (const Parsed& shape : *shapes) {
      for (Distribution distribution : *distributions) {
        described["cases"].push_back(
            describe_case(name, kernel, shape, distribution, options.device_names, build));
      }
    }
  }
  if (options.json) {
    out << described.dump(1) << "\n";
  } else {
    print_text(described, out);
  }
  return kExitClean;
}

}  // namespace attnbench
