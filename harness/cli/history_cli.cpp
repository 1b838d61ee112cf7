#include "harness/cli/history_cli.h"

#include <iostream>
#include <memory>

#include "harness/cli/history.h"

namespace attnbench {
namespace {

constexpr const char* kDatabaseHelp = "SQLite database (default results/attnbench.sqlite)";

// Everything the parsed options land in; the dispatcher outlives add_history_commands.
struct HistoryCommands {
  CLI::App* regressions = nullptr;
  CLI::App* rerun = nullptr;
  CLI::App* annotate = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* export_run = nullptr;
  CLI::App* history = nullptr;
  CLI::App* merge = nullptr;

  RegressionOptions regression;
  std::string run_text = "latest";
  std::string fail_on = "confirmed";
  bool suspects = false;
  RerunOptions rerun_options;
  AnnotateOptions annotate_options;
  std::string compare_a, compare_b;
  std::string export_format = "gbench-json";
  std::string export_output;
  HistoryOptions history_options;
  std::vector<std::string> merge_sources;
  std::string merge_into;
  double detect_target_percent = 0;  // 0: not given
};

void add_detector_options(CLI::App* sub, HistoryCommands& c) {
  sub->add_option("--window", c.regression.detector.window,
                  "Baseline runs K: the last K good runs since the latest reset (default 10)")
      ->check(CLI::Range(3, 1000));
  sub->add_option("--fail-on", c.fail_on,
                  "Exit 1 on confirmed regressions (default) or on suspected ones too")
      ->check(CLI::IsMember({"confirmed", "suspected"}));
  sub->add_option("--detect-target", c.detect_target_percent,
                  "The slowdown (%) the gate should see within three nightlies; the verdict "
                  "names every kernel it cannot (default: the suite's detect_target, else 5)")
      ->check(CLI::Range(0.01, 100.0));
  sub->add_option("--junit", c.regression.junit_path,
                  "Write JUnit XML here (one test case per kernel x shape)");
  sub->add_option("--summary-md", c.regression.summary_md_path, "Write a Markdown summary here");
}

}  // namespace

std::function<std::optional<int>()> add_history_commands(CLI::App& app, std::string& db_path) {
  auto c = std::make_shared<HistoryCommands>();

  c->regressions = app.add_subcommand(
      "regressions",
      "Judge every result of a run against its series' baseline; store and print the alerts");
  c->regressions->add_option("--run", c->run_text,
                             "latest (default), a run id, ids separated by commas, or "
                             "'unanalysed' (every run not analysed yet)");
  add_detector_options(c->regressions, *c);
  c->regressions->add_option("--db", db_path, kDatabaseHelp);

  c->rerun = app.add_subcommand(
      "rerun", "Re-measure a run's suspects at once on the same chip and confirm or clear them");
  c->rerun->add_flag("--suspects", c->suspects, "Re-measure the suspected cases (required)")
      ->required();
  c->rerun->add_option("--run", c->run_text, "The run whose suspects to re-measure (default latest)");
  c->rerun->add_option("--controls", c->rerun_options.controls,
                       "Unsuspected cases re-measured too, to measure the rerun's level "
                       "(default 12)")
      ->check(CLI::Range(0, 1000));
  add_detector_options(c->rerun, *c);
  c->rerun->add_option("--db", db_path, kDatabaseHelp);

  c->annotate = app.add_subcommand(
      "annotate", "Record an expected change, a baseline reset or an ignore, with its reason");
  c->annotate->add_option("--series", c->annotate_options.series, "A series key (repeatable)");
  c->annotate->add_option("--kernel", c->annotate_options.kernel_glob, "Kernel name or glob");
  c->annotate->add_option("--shape", c->annotate_options.shape_glob,
                          "Shape or glob, as printed (default: every shape of the kernel)");
  c->annotate->add_option("--kind", c->annotate_options.kind,
                          "expected_change | baseline_reset | ignore")
      ->required();
  c->annotate->add_option("--reason", c->annotate_options.reason, "Why (kept and shown)")
      ->required();
  c->annotate->add_option("--run", c->annotate_options.run_text,
                          "The first run it governs (default: each series' newest run)");
  c->annotate->add_option("--db", db_path, kDatabaseHelp);

  c->compare = app.add_subcommand(
      "compare", "Per case change, verdict and per kernel geometric mean between two runs");
  c->compare->add_option("run_a", c->compare_a, "The earlier run (id or latest)")->required();
  c->compare->add_option("run_b", c->compare_b, "The later run (id or latest)")->required();
  c->compare->add_option("--db", db_path, kDatabaseHelp);

  c->export_run = app.add_subcommand(
      "export", "Write a stored run as Google Benchmark JSON (for its tools/compare.py) or CSV");
  c->export_run->add_option("--run", c->run_text, "Run id or latest (default)");
  c->export_run->add_option("--format", c->export_format, "gbench-json (default) | csv")
      ->check(CLI::IsMember({"gbench-json", "csv"}));
  c->export_run->add_option("--output,-o", c->export_output, "File (default: standard output)");
  c->export_run->add_option("--db", db_path, kDatabaseHelp);

  c->history = app.add_subcommand(
      "history", "A series over its runs, with its change points (PELT)");
  c->history->add_option("--series", c->history_options.series, "A series key (repeatable)");
  c->history->add_option("--kernel", c->history_options.kernel_glob, "Kernel name or glob");
  c->history->add_option("--shape", c->history_options.shape_glob, "Shape or glob, as printed");
  c->history->add_option("--max-series", c->history_options.max_series,
                         "Show at most this many series (default 20)")
      ->check(CLI::Range(1, 100000));
  c->history->add_option("--db", db_path, kDatabaseHelp);

  c->merge = app.add_subcommand(
      "merge", "Merge databases from many runners into one (merging a run twice is a no-op)");
  c->merge->add_option("sources", c->merge_sources, "Databases to merge")->required();
  c->merge->add_option("--into", c->merge_into, "The database merged into")->required();

  return [c, &db_path]() -> std::optional<int> {
    c->regression.fail_on_suspected = c->fail_on == "suspected";
    c->regression.detector.detect_target = c->detect_target_percent / 100;
    if (c->regressions->parsed()) {
      return regressions_command(db_path, c->run_text, c->regression, std::cout, std::cerr);
    }
    if (c->rerun->parsed()) {
      c->rerun_options.run_text = c->run_text;
      return rerun_command(db_path, c->rerun_options, c->regression, std::cout, std::cerr);
    }
    if (c->annotate->parsed()) return annotate_command(db_path, c->annotate_options, std::cout, std::cerr);
    if (c->compare->parsed()) {
      return compare_command(db_path, c->compare_a, c->compare_b, c->regression.detector,
                             std::cout, std::cerr);
    }
    if (c->export_run->parsed()) {
      return export_command(db_path, c->run_text, c->export_format, c->export_output, std::cout,
                            std::cerr);
    }
    if (c->history->parsed()) return history_command(db_path, c->history_options, std::cout, std::cerr);
    if (c->merge->parsed()) return merge_command(c->merge_sources, c->merge_into, std::cout, std::cerr);
    return std::nullopt;
  };
}

}  // namespace attnbench
