// The case matrix (harness/suite/case_matrix.h), step by step: expand, filter, dedupe, order,
// shard, and every message of the selection flags (--shape, exact cases, --filter, --kernels,
// --shard). Pure functions over the registry's CPU kernels: no store, no processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/series_key.h"
#include "harness/suite/case_matrix.h"
#include "kernels/registry.h"
#include "tests/support/problems.h"
#include "tests/support/result_support.h"

namespace attnbench {
namespace {

const std::vector<MatrixDevice> kCpu = {{Backend::cpu, "cpu"}};

SuiteEntry entry(std::vector<std::string> globs, const std::string& shape_text,
                 const std::string& distribution = "normal") {
  return SuiteEntry{std::move(globs), parsed_shape(shape_text), distribution, 0};
}

Suite suite_of(std::vector<SuiteEntry> entries) {
  Suite suite;
  suite.name = "test";
  suite.entries = std::move(entries);
  return suite;
}

// The registry's CPU kernels whose names match `glob`, in registry order.
std::vector<std::string> cpu_kernels(const std::string& glob) {
  std::vector<std::string> names;
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.backend == Backend::cpu && kernel_selected(glob, kernel)) names.push_back(kernel.name);
  }
  return names;
}

std::vector<std::string> names(const std::vector<CaseSpec>& cases) {
  std::vector<std::string> out;
  for (const CaseSpec& spec : cases) out.push_back(spec.name);
  return out;
}

// (device, name): what identifies a case in a matrix.
std::vector<std::pair<size_t, std::string>> identities(const std::vector<CaseSpec>& cases) {
  std::vector<std::pair<size_t, std::string>> out;
  for (const CaseSpec& spec : cases) out.emplace_back(spec.device_index, spec.name);
  return out;
}

bool is_subsequence(const std::vector<std::pair<size_t, std::string>>& part,
                    const std::vector<std::pair<size_t, std::string>>& whole) {
  size_t at = 0;
  for (const auto& item : part) {
    while (at < whole.size() && whole[at] != item) ++at;
    if (at == whole.size()) return false;
    ++at;
  }
  return true;
}

// Every group's cases are one contiguous run.
void expect_groups_back_to_back(const std::vector<CaseSpec>& cases) {
  std::set<std::string> closed;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_FALSE(closed.count(cases[i].group)) << "group " << cases[i].group << " resumes at " << i;
    if (i + 1 < cases.size() && cases[i + 1].group != cases[i].group) closed.insert(cases[i].group);
  }
}

// Shapes x distributions on the CPU kernels: 6 shapes, 2 distributions, 2 devices.
Suite wide_suite() {
  std::vector<SuiteEntry> entries;
  for (const char* s : {"b=1,hq=2,s=16,d=16", "b=1,hq=2,s=17,d=16", "b=2,hq=2,s=16,d=16",
                        "b=1,hq=4,hkv=2,s=16,d=16", "b=1,hq=2,sq=8,sk=24,d=16,mask=causal_br",
                        "b=1,hq=2,s=16,d=32,mask=window(4,0)"}) {
    for (const char* distribution : {"normal", "outliers"}) entries.push_back(entry({"cpu.*"}, s, distribution));
  }
  return suite_of(entries);
}

const std::vector<MatrixDevice> kTwoCpus = {{Backend::cpu, "cpu"}, {Backend::cpu, "cpu-b"}};

// ---- globs ---------------------------------------------------------------------------------------

TEST(CaseMatrixGlob, FnmatchGlobs) {
  EXPECT_TRUE(glob_match("cpu.*", "cpu.flash"));
  EXPECT_TRUE(glob_match("cpu.masked_*", "cpu.masked_fused"));
  EXPECT_TRUE(glob_match("cpu.?aive", "cpu.naive"));
  EXPECT_TRUE(glob_match("cpu.[fn]*", "cpu.flash"));
  EXPECT_TRUE(glob_match("*", "anything at all"));
  EXPECT_FALSE(glob_match("cpu.*", "cuda.flash2"));
  EXPECT_FALSE(glob_match("cpu.flash", "cpu.flash2"));  // whole names, not prefixes
  EXPECT_FALSE(glob_match("cpu.[!f]*", "cpu.flash"));
}

// ---- expand --------------------------------------------------------------------------------------

TEST(CaseMatrixExpand, EntriesThenKernelsThenDevicesInOrder) {
  const Suite suite = suite_of({entry({"cpu.flash", "cpu.naive"}, "b=1,hq=2,s=16,d=16"),
                                entry({"cpu.naive"}, "b=1,hq=2,s=17,d=16", "outliers")});
  const std::vector<CaseSpec> cases = expand_matrix(suite, {}, kTwoCpus);
  // cpu.naive comes before cpu.flash in the registry, whatever order the globs name them.
  const std::vector<std::string> expected = {
      "cpu.naive/b=1,hq=2,hkv=2,sq=16,sk=16,d=16,dtype=fp32/normal",
      "cpu.naive/b=1,hq=2,hkv=2,sq=16,sk=16,d=16,dtype=fp32/normal",
      "cpu.flash/b=1,hq=2,hkv=2,sq=16,sk=16,d=16,dtype=fp32/normal",
      "cpu.flash/b=1,hq=2,hkv=2,sq=16,sk=16,d=16,dtype=fp32/normal",
      "cpu.naive/b=1,hq=2,hkv=2,sq=17,sk=17,d=16,dtype=fp32/outliers",
      "cpu.naive/b=1,hq=2,hkv=2,sq=17,sk=17,d=16,dtype=fp32/outliers"};
  EXPECT_EQ(names(cases), expected);
  ASSERT_EQ(cases.size(), 6u);
  EXPECT_EQ(cases[0].device_index, 0u);
  EXPECT_EQ(cases[1].device_index, 1u);
  EXPECT_EQ(cases[0].kernel, find_kernel("cpu.naive"));
  EXPECT_EQ(cases[0].inputs, "b=1,hq=2,hkv=2,sq=16,sk=16,d=16,dtype=fp32|normal");
  EXPECT_EQ(cases[0].group, "cpu|b=1,hq=2,hkv=2,sq=16,sk=16,d=16,dtype=fp32|normal");
  EXPECT_EQ(cases[1].group, "cpu-b|b=1,hq=2,hkv=2,sq=16,sk=16,d=16,dtype=fp32|normal");
  EXPECT_EQ(cases[4].distribution, Distribution::outliers);
  EXPECT_EQ(cases[4].problem, parsed_shape("b=1,hq=2,s=17,d=16"));
}

TEST(CaseMatrixExpand, KernelFlagIntersectsTheEntryGlobs) {
  const Suite suite = suite_of({entry({"cpu.masked_*", "cpu.flash"}, "b=1,hq=2,s=16,d=16")});
  std::vector<std::string> kernels;
  for (const CaseSpec& spec : expand_matrix(suite, {"cpu.masked_in*", "cpu.flash", "cpu.naive"}, kCpu)) {
    kernels.push_back(spec.kernel->name);
  }
  EXPECT_EQ(kernels, (std::vector<std::string>{"cpu.masked_inplace", "cpu.flash"}));
  // No --kernels: everything the entry names.
  EXPECT_EQ(expand_matrix(suite, {}, kCpu).size(), cpu_kernels("cpu.masked_*").size() + 1);
}

// Variants (cpu.flash[...]) run only where --kernels names them: by name or through their
// family's "[*]"; a suite entry naming the family admits them, no glob of kernels does.
TEST(CaseMatrixExpand, AVariantIsACaseOnlyWhereNamed) {
  const Suite suite = suite_of({entry({"cpu.flash"}, "b=1,hq=2,s=16,d=16")});
  const auto kernels_of = [&](const std::vector<std::string>& globs) {
    std::vector<std::string> kernels;
    for (const CaseSpec& spec : expand_matrix(suite, globs, kCpu)) {
      kernels.push_back(spec.kernel->name);
    }
    return kernels;
  };
  const std::vector<const Kernel*> variants = variants_of("cpu.flash");
  ASSERT_FALSE(variants.empty());
  EXPECT_EQ(kernels_of({}), std::vector<std::string>{"cpu.flash"});
  EXPECT_EQ(kernels_of({"cpu.*", "*"}), std::vector<std::string>{"cpu.flash"});
  EXPECT_EQ(kernels_of({variants[0]->name}), std::vector<std::string>{variants[0]->name});
  EXPECT_EQ(kernels_of({"cpu.flash[*]"}).size(), variants.size());
  EXPECT_EQ(kernels_of({"cpu.fla*[*]", "cpu.flash"}).size(), variants.size() + 1);
  // An entry for another family admits none of them, named or not.
  const Suite naive = suite_of({entry({"cpu.naive"}, "b=1,hq=2,s=16,d=16")});
  EXPECT_TRUE(expand_matrix(naive, {variants[0]->name}, kCpu).empty());
  for (const Kernel* variant : variants) {
    EXPECT_EQ(variant->variant_of, "cpu.flash");
    EXPECT_EQ(variant->name.rfind("cpu.flash[", 0), 0u) << variant->name;
    EXPECT_EQ(family_name(*variant), "cpu.flash");
  }
}

TEST(CaseMatrixExpand, KernelsOnlyOnDevicesOfTheirBackend) {
  const Suite suite = suite_of({entry({"*"}, "b=1,hq=2,s=16,d=16")});
  const std::vector<MatrixDevice> devices = {{Backend::cuda, "cuda:0"}, {Backend::cpu, "cpu"}};
  const std::vector<CaseSpec> cases = expand_matrix(suite, {}, devices);
  size_t on_cpu = 0;
  for (const CaseSpec& spec : cases) {
    EXPECT_EQ(spec.kernel->backend, devices[spec.device_index].backend) << spec.name;
    on_cpu += spec.device_index == 1;
  }
  EXPECT_EQ(on_cpu, cpu_kernels("*").size());  // "*" selects no variant
  EXPECT_TRUE(expand_matrix(suite, {}, {}).empty());
  EXPECT_TRUE(expand_matrix(Suite{}, {}, kCpu).empty());
}

// ---- filter --------------------------------------------------------------------------------------

TEST(CaseMatrixFilter, RegexSearchOnNamesKeepsOrder) {
  const std::vector<CaseSpec> all = expand_matrix(wide_suite(), {}, kCpu);
  std::optional<std::regex> filter = value_of(parse_case_filter("flash/.*outliers"));
  const std::vector<CaseSpec> kept = filter_cases(all, filter);
  ASSERT_EQ(kept.size(), 6u);  // one per shape
  for (const CaseSpec& spec : kept) {
    EXPECT_EQ(spec.kernel->name, "cpu.flash");
    EXPECT_EQ(spec.distribution, Distribution::outliers);
  }
  EXPECT_TRUE(is_subsequence(identities(kept), identities(all)));
  // A search, not a whole match; no filter keeps everything.
  filter = value_of(parse_case_filter("causal_br"));
  EXPECT_EQ(filter_cases(all, filter).size(), 2 * cpu_kernels("*").size());
  EXPECT_EQ(filter_cases(all, std::nullopt).size(), all.size());
  filter = value_of(parse_case_filter("^nothing$"));
  EXPECT_TRUE(filter_cases(all, filter).empty());
}

TEST(CaseMatrixFilter, EmptyTextIsNoFilterAndBadRegexesSayWhy) {
  EXPECT_FALSE(value_of(parse_case_filter("")).has_value());
  const Result<std::optional<std::regex>> bad = parse_case_filter("cpu.(flash");
  EXPECT_FALSE(bad.ok());
  const std::string& message = bad.status().message;
  EXPECT_EQ(message.rfind("--filter 'cpu.(flash' is not a valid regular expression: ", 0), 0u)
      << message;
}

// ---- dedupe --------------------------------------------------------------------------------------

TEST(CaseMatrixDedupe, ACaseNamedTwiceOnOneDeviceRunsOnce) {
  // The same problem from two entries (cpu.flash twice) and on two devices (kept on each).
  const Suite suite = suite_of({entry({"cpu.flash"}, "b=1,hq=2,s=16,d=16"),
                                entry({"cpu.naive"}, "b=1,hq=2,s=17,d=16"),
                                entry({"cpu.*"}, "b=1,hq=2,s=16,d=16")});
  const std::vector<CaseSpec> all = expand_matrix(suite, {}, kTwoCpus);
  const std::vector<CaseSpec> unique = dedupe_cases(all);
  EXPECT_EQ(unique.size(), all.size() - 2);
  std::set<std::pair<size_t, std::string>> seen;
  for (const auto& identity : identities(unique)) EXPECT_TRUE(seen.insert(identity).second) << identity.second;
  EXPECT_TRUE(is_subsequence(identities(unique), identities(all)));
  // The first occurrence stays where it was: cpu.flash of the first entry leads.
  ASSERT_GE(unique.size(), 2u);
  EXPECT_EQ(unique[0].kernel->name, "cpu.flash");
  EXPECT_EQ(unique[1].kernel->name, "cpu.flash");
  EXPECT_NE(unique[0].device_index, unique[1].device_index);
  EXPECT_TRUE(dedupe_cases({}).empty());
}

// ---- order ---------------------------------------------------------------------------------------

TEST(CaseMatrixOrder, GroupsBackToBackInOrderOfFirstCaseStable) {
  std::vector<CaseSpec> cases;
  for (const auto& [group, name] : std::vector<std::pair<std::string, std::string>>{
           {"a", "1"}, {"b", "2"}, {"a", "3"}, {"c", "4"}, {"b", "5"}, {"a", "6"}}) {
    CaseSpec spec;
    spec.group = group;
    spec.name = name;
    cases.push_back(spec);
  }
  EXPECT_EQ(names(order_by_group(cases)), (std::vector<std::string>{"1", "3", "6", "2", "5", "4"}));
  EXPECT_TRUE(order_by_group({}).empty());
}

TEST(CaseMatrixOrder, ExpandCasesComposesTheSteps) {
  Suite suite = wide_suite();
  suite.entries.push_back(suite.entries.front());  // a duplicate entry
  const std::optional<std::regex> filter = value_of(parse_case_filter("^cpu\\.(flash|naive)/"));
  const std::vector<CaseSpec> cases = expand_cases(suite, {}, filter, kTwoCpus);
  EXPECT_EQ(names(cases), names(order_by_group(dedupe_cases(filter_cases(
                              expand_matrix(suite, {}, kTwoCpus), filter)))));
  EXPECT_EQ(cases.size(), 12u * 2 * 2);  // 12 inputs x 2 kernels x 2 devices, duplicates gone
  expect_groups_back_to_back(cases);
  // Within a group: the kernels in registry order.
  ASSERT_GE(cases.size(), 2u);
  EXPECT_EQ(cases[0].group, cases[1].group);
  EXPECT_EQ(cases[0].kernel->name, "cpu.naive");
  EXPECT_EQ(cases[1].kernel->name, "cpu.flash");
}

// ---- shard ---------------------------------------------------------------------------------------

TEST(CaseMatrixShard, ShardsPartitionTheCasesExactlyOnce) {
  const std::vector<CaseSpec> all = expand_cases(wide_suite(), {}, std::nullopt, kTwoCpus);
  ASSERT_FALSE(all.empty());
  for (int count = 1; count <= 13; ++count) {  // 13 > the 12 input groups: some shards are empty
    std::map<std::pair<size_t, std::string>, int> times;
    std::map<std::string, int> shard_of_inputs;
    std::vector<size_t> groups_per_shard;
    for (int index = 1; index <= count; ++index) {
      const std::vector<CaseSpec> part = shard_cases(all, Shard{index, count});
      EXPECT_TRUE(is_subsequence(identities(part), identities(all))) << index << "/" << count;
      expect_groups_back_to_back(part);
      std::set<std::string> inputs;
      for (const CaseSpec& spec : part) {
        ++times[{spec.device_index, spec.name}];
        inputs.insert(spec.inputs);
        const auto [it, inserted] = shard_of_inputs.emplace(spec.inputs, index);
        EXPECT_EQ(it->second, index) << spec.inputs << " split across shards of " << count;
      }
      groups_per_shard.push_back(inputs.size());
    }
    EXPECT_EQ(times.size(), all.size()) << count;
    for (const auto& [identity, n] : times) EXPECT_EQ(n, 1) << identity.second << " in " << count << " shards";
    // Round-robin: shards differ by at most one input group.
    const auto [fewest, most] = std::minmax_element(groups_per_shard.begin(), groups_per_shard.end());
    EXPECT_LE(*most - *fewest, 1u) << count;
  }
  EXPECT_EQ(identities(shard_cases(all, Shard{})), identities(all));
}

TEST(CaseMatrixShard, TheSplitDependsOnTheInputsNotOnTheDevices) {
  const Suite suite = wide_suite();
  const std::vector<CaseSpec> one = shard_cases(expand_cases(suite, {}, std::nullopt, kCpu), Shard{2, 3});
  const std::vector<CaseSpec> renamed =
      shard_cases(expand_cases(suite, {}, std::nullopt, {{Backend::cpu, "another-host"}}), Shard{2, 3});
  const std::vector<CaseSpec> two = shard_cases(expand_cases(suite, {}, std::nullopt, kTwoCpus), Shard{2, 3});
  EXPECT_EQ(names(one), names(renamed));
  std::set<std::string> inputs_one, inputs_two;
  for (const CaseSpec& spec : one) inputs_one.insert(spec.inputs);
  for (const CaseSpec& spec : two) inputs_two.insert(spec.inputs);
  EXPECT_EQ(inputs_one, inputs_two);
  EXPECT_FALSE(inputs_one.empty());
}

TEST(CaseMatrixShard, ParseAcceptsIOfNAndSaysWhatIsAccepted) {
  Shard shard = value_of(parse_shard("2/4"));
  EXPECT_EQ(shard.index, 2);
  EXPECT_EQ(shard.count, 4);
  ASSERT_TRUE(parse_shard("1/1").ok());
  shard = value_of(parse_shard("12/12"));
  EXPECT_EQ(shard.index, 12);
  for (const std::string text : {"", "2", "/", "2/", "/4", "0/4", "5/4", "1/0", "-1/4", "1/-4", "+1/4",
                                 " 1/4", "1/4 ", "1/4x", "a/b", "1.0/4", "1//4", "99999999999/4"}) {
    const Result<Shard> refused = parse_shard(text);
    EXPECT_FALSE(refused.ok()) << "'" << text << "'";
    EXPECT_EQ(refused.status().message,
              "--shard '" + text + "': accepted: i/n with 1 <= i <= n, e.g. 2/4");
  }
}

// ---- the selection flags -------------------------------------------------------------------------

TEST(CaseMatrixSelection, ShapeEntryRunsEveryKernelAndNamesABadShape) {
  const SuiteEntry e = value_of(shape_entry("b=1,hq=2,s=33,d=16,mask=causal"));
  EXPECT_EQ(e.kernel_globs, (std::vector<std::string>{"*"}));
  EXPECT_EQ(e.problem, parsed_shape("b=1,hq=2,s=33,d=16,mask=causal"));
  for (const std::string text : {"b=1,hq=3,hkv=2,s=8,d=16", "b=1,hq=2,s=8,d=16,mask=nope", "b=1,hq=2,s=8,x=3", ""}) {
    const Result<SuiteEntry> refused = shape_entry(text);
    EXPECT_FALSE(refused.ok()) << text;
    const std::string& message = refused.status().message;
    EXPECT_EQ(message.rfind("--shape '" + text + "': ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(CaseMatrixSelection, CaseEntryIsOneKernelOneShapeOneDistribution) {
  const SuiteEntry e = value_of(
      case_entry("cpu.flash|b=1,hq=2,hkv=2,sq=8,sk=24,d=16,dtype=fp32,mask=window(2,0)|outliers"));
  EXPECT_EQ(e.kernel_globs, (std::vector<std::string>{"cpu.flash"}));
  EXPECT_EQ(e.problem, parsed_shape("b=1,hq=2,sq=8,sk=24,d=16,mask=window(2,0)"));
  EXPECT_EQ(e.distribution, "outliers");
  const std::vector<CaseSpec> cases = expand_matrix(suite_of({e}), {}, kCpu);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].name, "cpu.flash/b=1,hq=2,hkv=2,sq=8,sk=24,d=16,dtype=fp32,mask=window(2,0)/outliers");
  for (const std::string text : {"cpu.flash", "cpu.flash|b=1,hq=2,s=8,d=16", "|b=1,hq=2,s=8,d=16|normal",
                                 "cpu.flash|b=1,hq=2,s=8,d=16|uniform", "cpu.flash|nonsense|normal",
                                 "cpu.flash||normal", ""}) {
    const Result<SuiteEntry> refused = case_entry(text);
    EXPECT_FALSE(refused.ok()) << text;
    EXPECT_EQ(refused.status().message, "case '" + text + "': accepted: kernel|shape|distribution");
  }
}

// --pass selects the suite's cases of the passes named and runs each --shape in each of them; the
// cases of each pass are apart (their names and series differ), and a kernel without a backward
// is told apart by its reason, not by the matrix.
TEST(CaseMatrixSelection, PassOptionSelectsTheSuitesPassesAndSetsTheShapes) {
  const std::string shape = "b=1,hq=2,s=33,d=16";
  const Suite all = value_of(selection_suite("", {shape}, "", "all", {}, "nothing"));
  std::vector<std::string> names;
  for (const CaseSpec& spec : expand_matrix(all, {"cpu.flash"}, kCpu)) names.push_back(spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "cpu.flash/b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32/normal",
                       "cpu.flash/b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32,pass=bwd/normal",
                       "cpu.flash/b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32,pass=fwd_bwd/normal"}));
  // The three passes of one shape share one input group.
  const std::vector<CaseSpec> cases = expand_matrix(all, {"cpu.flash"}, kCpu);
  EXPECT_EQ(cases[0].group, cases[2].group);
  // Without --pass a shape is its own pass=, else fwd.
  EXPECT_EQ(value_of(selection_suite("", {shape + ",pass=bwd"}, "", "", {}, "x")).entries[0].problem.pass,
            Pass::bwd);
  EXPECT_EQ(value_of(selection_suite("", {shape}, "", "", {}, "x")).entries[0].problem.pass, Pass::fwd);
  // A backward shape's dO distribution follows it into each backward pass, not into the forward.
  const Suite small = value_of(selection_suite("", {shape + ",pass=bwd,dout=small"}, "", "all", {}, "x"));
  ASSERT_EQ(small.entries.size(), 3u);
  EXPECT_EQ(small.entries[0].problem.dout, UpstreamGradient::normal);
  EXPECT_EQ(small.entries[1].problem.dout, UpstreamGradient::small);
  EXPECT_EQ(small.entries[2].problem.dout, UpstreamGradient::small);
  // A suite's cases of the passes named only: ctest's forward and backward blocks.
  const Suite ctest = value_of(selection_suite("ctest", {}, "", "", {}, "x"));
  const Suite forward = value_of(selection_suite("ctest", {}, "", "fwd", {}, "x"));
  const Suite backward = value_of(selection_suite("ctest", {}, "", "bwd", {}, "x"));
  EXPECT_GT(forward.entries.size(), 0u);
  EXPECT_GT(backward.entries.size(), 0u);
  EXPECT_LT(forward.entries.size() + backward.entries.size(), ctest.entries.size() + 1);
  for (const SuiteEntry& entry : forward.entries) EXPECT_EQ(entry.problem.pass, Pass::fwd);
  for (const SuiteEntry& entry : backward.entries) EXPECT_EQ(entry.problem.pass, Pass::bwd);
  const Result<Suite> bad = selection_suite("", {shape}, "", "backward", {}, "x");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message,
            "--pass 'backward': accepted: fwd, bwd, fwd_bwd, all, or a comma-separated list of "
            "passes");
  // A list: each pass once, in its order; a bad item names the whole option.
  EXPECT_EQ(value_of(parse_pass_option("bwd,fwd,bwd")), (std::vector<Pass>{Pass::bwd, Pass::fwd}));
  EXPECT_FALSE(parse_pass_option("fwd,").ok());
  const Suite two = value_of(selection_suite("ctest", {}, "", "fwd,bwd", {}, "x"));
  for (const SuiteEntry& entry : two.entries) EXPECT_NE(entry.problem.pass, Pass::fwd_bwd);
  Problem backward_problem = parsed_shape(shape + ",pass=bwd");
  EXPECT_NE(skip_reason(*find_kernel("cpu.masked_fused"), backward_problem).find("the kernel has no backward"),
            std::string::npos);
  EXPECT_EQ(skip_reason(*find_kernel("cpu.flash"), backward_problem), "");
}

// A series' pass is in its shape, so fwd and bwd series never share a key, and each pass has its
// own kernel-wide aggregate; a forward's key reads as before the pass existed.
TEST(SeriesKeys, EachPassHasItsOwnSeriesAndKernelWideAggregate) {
  const SeriesKey forward{"cpu.flash", "b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32", "normal",
                          "cpu", "Release"};
  SeriesKey backward = forward;
  backward.shape += ",pass=bwd";
  EXPECT_EQ(forward.pass(), Pass::fwd);
  EXPECT_EQ(backward.pass(), Pass::bwd);
  EXPECT_EQ(forward.kernel_wide().shape, "*");
  EXPECT_EQ(backward.kernel_wide().shape, "*,pass=bwd");
  EXPECT_TRUE(backward.kernel_wide().is_kernel_wide());
  EXPECT_FALSE(backward.is_kernel_wide());
  EXPECT_EQ(backward.kernel_wide().pass(), Pass::bwd);
  EXPECT_NE(forward.kernel_wide().text(), backward.kernel_wide().text());
  EXPECT_EQ(parse_series_key(backward.text()).value_or(SeriesKey{}).pass(), Pass::bwd);
}

TEST(CaseMatrixSelection, KernelGlobsMustNameAKernel) {
  EXPECT_TRUE(check_kernel_globs({}).ok);
  EXPECT_TRUE(check_kernel_globs({"cpu.*", "cpu.flash"}).ok);
  const Status status = check_kernel_globs({"cpu.flash", "cpu.flsh*"});
  EXPECT_FALSE(status.ok);
  EXPECT_EQ(status.message,
            "--kernels: unknown kernel 'cpu.flsh*'; accepted: " + kernel_names() + " (globs allowed)");
  std::string expected;
  for (const Kernel& kernel : all_kernels()) expected += (expected.empty() ? "" : ", ") + kernel.name;
  EXPECT_EQ(kernel_names(), expected);
  EXPECT_EQ(kernel_names().rfind("cpu.naive, ", 0), 0u);
}

}  // namespace
}  // namespace attnbench
