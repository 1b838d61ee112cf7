// What CI systems read: JUnit XML (one test case per kernel x shape) and a Markdown summary,
// for `run`/`check` (--junit, --summary-md) and for `regressions`.
#pragma once

#include <string>
#include <vector>

#include "harness/core/records.h"
#include "reference/status.h"

namespace attnbench {

struct CiCase {
  std::string classname;  // the kernel
  std::string name;       // the shape (and distribution when not normal)
  enum class Outcome { passed, failed, skipped, error } outcome = Outcome::passed;
  std::string message;  // one line: why it failed or was skipped
  std::string details;  // more lines (environment, numbers)
  double time_s = 0;
};

// One test case per result: passed; failed (a failed check); skipped (the kernel's reason);
// error (crashed, timeout, error).
std::vector<CiCase> ci_cases_from_results(const std::vector<ResultRecord>& results);

// A <testsuites> document with one <testsuite> named `suite`.
std::string junit_xml(const std::string& suite, const std::vector<CiCase>& cases);
// Text for XML content and attribute values: & < > " ' as entities; tab, newline and carriage
// return as character references (kept in attributes); other control characters, which XML 1.0
// cannot hold, as spaces.
std::string xml_escape(const std::string& text);
// Text for one cell of a (GitHub) Markdown table, shown as written: | \ ` escaped, & < > as
// entities (no HTML), line breaks as <br>, other control characters as spaces.
std::string markdown_cell(const std::string& text);

// A run's Markdown summary: counts, the cases that did not pass, and every result's median.
std::string run_summary_markdown(int64_t run_id, const std::string& suite,
                                 const std::vector<ResultRecord>& results);

// Writes the whole text, or says which file could not be written.
Status write_text_file(const std::string& path, const std::string& text);

}  // namespace attnbench
