// What CI systems and people read at the end of a run (harness/cli/ci_reports.h,
// summary_table.h): JUnit XML and the Markdown summary escape whatever a message holds (<, &,
// quotes, control characters, pipes, backticks), one test case per result with the right
// outcome, and the end-of-run table's columns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cli/ci_reports.h"
#include "harness/cli/summary_table.h"
#include "harness/core/progress.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

const std::string kHostile = "<script>alert(\"x\" & 'y')</script>\x01\x1f|`a\\b`\r\nline two\ttab";

ResultRecord result(const std::string& kernel, ResultStatus status, double median_s,
                    const std::string& message = "") {
  ResultRecord r;
  r.kernel = kernel;
  r.problem = parsed_shape("b=1,hq=2,s=33,d=16");
  r.distribution = "normal";
  r.device_name = "cpu model";
  r.status = status;
  r.message = message;
  r.repro = "attnbench check --shape b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32 --kernels " + kernel;
  if (median_s > 0) {
    r.timing.timed = true;
    r.timing.median_s = median_s;
    r.flops_per_s = 1e9 / median_s;
    r.check.checked = true;
    r.check.max_abs_error = 1.5e-7;
    r.check.bound = 2.5e-6;
  }
  return r;
}

// No byte below 0x20 but tab, newline and carriage return (what XML 1.0 allows).
void expect_no_forbidden_control_characters(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    EXPECT_FALSE(c < 0x20 && c != '\t' && c != '\n' && c != '\r') << "byte " << int(c) << " at " << i;
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// ---- XML -----------------------------------------------------------------------------------------

TEST(XmlEscape, MarkupQuotesAndControlCharacters) {
  EXPECT_EQ(xml_escape("a<b>&c"), "a&lt;b&gt;&amp;c");
  EXPECT_EQ(xml_escape("\"double\" 'single'"), "&quot;double&quot; &apos;single&apos;");
  EXPECT_EQ(xml_escape("&amp;"), "&amp;amp;");  // escaped again: the text is shown as written
  EXPECT_EQ(xml_escape("tab\tnew\ncr\r"), "tab&#9;new&#10;cr&#13;");
  EXPECT_EQ(xml_escape(std::string("nul\0bell\x07" "esc\x1b", 13)), "nul bell esc ");
  EXPECT_EQ(xml_escape("caf\xc3\xa9 \x7f"), "caf\xc3\xa9 \x7f");  // UTF-8 and DEL as they are
  EXPECT_EQ(xml_escape(""), "");
}

TEST(JunitXml, OneTestCasePerResultWithItsOutcome) {
  const std::vector<ResultRecord> results = {
      result("cpu.flash", ResultStatus::passed, 2e-3),
      result("cpu.naive", ResultStatus::failed, 0, ""),
      result("cpu.masked_fused", ResultStatus::skipped, 0, "mask window not supported"),
      result("cpu.masked_inplace", ResultStatus::crashed, 0, "worker killed by signal 11"),
      result("cpu.masked_outofplace", ResultStatus::timeout, 0, "no result after 60 s"),
      result("cpu.flash", ResultStatus::error, 0, "inputs: out of memory")};
  const std::vector<CiCase> cases = ci_cases_from_results(results);
  ASSERT_EQ(cases.size(), results.size());
  EXPECT_EQ(cases[0].outcome, CiCase::Outcome::passed);
  EXPECT_EQ(cases[0].time_s, 2e-3);
  EXPECT_TRUE(cases[0].details.empty());
  EXPECT_EQ(cases[1].outcome, CiCase::Outcome::failed);
  EXPECT_EQ(cases[1].message, "check failed");
  EXPECT_EQ(cases[1].details, "repro: " + results[1].repro);
  EXPECT_EQ(cases[2].outcome, CiCase::Outcome::skipped);
  EXPECT_EQ(cases[2].message, "mask window not supported");
  EXPECT_EQ(cases[3].outcome, CiCase::Outcome::error);
  EXPECT_EQ(cases[3].message, "crashed: worker killed by signal 11");
  EXPECT_EQ(cases[4].message, "timeout: no result after 60 s");
  EXPECT_EQ(cases[5].message, "error: inputs: out of memory");
  for (const CiCase& c : cases) {
    EXPECT_EQ(c.name, "b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32");
    if (c.outcome != CiCase::Outcome::passed) {
      EXPECT_EQ(c.time_s, 0);
    }
  }
  ResultRecord outliers = results[0];
  outliers.distribution = "outliers";
  EXPECT_EQ(ci_cases_from_results({outliers})[0].name, "b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32 dist=outliers");

  const std::string xml = junit_xml("attnbench smoke", cases);
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"attnbench\" tests=\"6\" "
                      "failures=\"1\" errors=\"3\" skipped=\"1\" time=\"0.002\">\n",
                      0),
            0u)
      << xml;
  EXPECT_NE(xml.find("<testsuite name=\"attnbench smoke\" tests=\"6\" failures=\"1\" errors=\"3\" skipped=\"1\""),
            std::string::npos);
  EXPECT_NE(xml.find("<testcase classname=\"cpu.flash\" name=\"b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32\" "
                     "time=\"0.002\"/>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<failure message=\"check failed\">repro: " + results[1].repro + "</failure>"),
            std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"mask window not supported\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<error message=\"crashed: worker killed by signal 11\">"), std::string::npos);
  const std::regex testcase("<testcase ");
  EXPECT_EQ(std::distance(std::sregex_iterator(xml.begin(), xml.end(), testcase), std::sregex_iterator()), 6);
  EXPECT_NE(xml.find("</testsuite>\n</testsuites>\n"), std::string::npos);
}

TEST(JunitXml, HostileTextStaysInsideItsAttributeAndElement) {
  ResultRecord hostile = result("cpu.<flash>&\"", ResultStatus::failed, 0, kHostile);
  hostile.repro = kHostile;
  const std::string xml = junit_xml("suite \"" + kHostile, ci_cases_from_results({hostile}));
  expect_no_forbidden_control_characters(xml);
  EXPECT_EQ(xml.find("<script>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testcase classname=\"cpu.&lt;flash&gt;&amp;&quot;\""), std::string::npos) << xml;
  const std::string escaped = xml_escape(kHostile);
  EXPECT_NE(xml.find("<failure message=\"" + escaped + "\">repro: " + escaped + "</failure>"),
            std::string::npos)
      << xml;
  // Every attribute value is closed by the quote that opened it: the quotes balance per line.
  for (const std::string& line : lines_of(xml)) {
    EXPECT_EQ(std::count(line.begin(), line.end(), '"') % 2, 0) << line;
  }
}

// ---- Markdown ------------------------------------------------------------------------------------

TEST(MarkdownCell, EverythingThatWouldLeaveTheCellIsEscaped) {
  EXPECT_EQ(markdown_cell("a|b"), "a\\|b");
  EXPECT_EQ(markdown_cell("a\\|b"), "a\\\\\\|b");  // the backslash shown, the pipe escaped
  EXPECT_EQ(markdown_cell("`code`"), "\\`code\\`");
  EXPECT_EQ(markdown_cell("<b>&amp;</b>"), "&lt;b&gt;&amp;amp;&lt;/b&gt;");
  EXPECT_EQ(markdown_cell("\"quoted\" 'single'"), "\"quoted\" 'single'");  // quotes are plain text
  EXPECT_EQ(markdown_cell("one\ntwo\r\nthree\rfour"), "one<br>two<br>three<br>four");
  EXPECT_EQ(markdown_cell(std::string("nul\0bell\x07tab\t", 13)), "nul bell tab ");
  EXPECT_EQ(markdown_cell("caf\xc3\xa9"), "caf\xc3\xa9");
  const std::string cell = markdown_cell(kHostile);
  EXPECT_EQ(cell.find('\n'), std::string::npos);
  EXPECT_EQ(cell.find("<script>"), std::string::npos);
  expect_no_forbidden_control_characters(cell);
  EXPECT_EQ(cell.find('\t'), std::string::npos);
}

TEST(RunSummaryMarkdown, CountsNotPassedAndEveryResultsColumns) {
  std::vector<ResultRecord> results = {result("cpu.flash", ResultStatus::passed, 2e-3),
                                       result("cpu.naive", ResultStatus::crashed, 0, kHostile),
                                       result("cpu.masked_fused", ResultStatus::skipped, 0, "no")};
  results[2].distribution = "outliers";
  const std::string md = run_summary_markdown(7, "smoke", results);
  const std::vector<std::string> lines = lines_of(md);
  ASSERT_GE(lines.size(), 14u) << md;
  EXPECT_EQ(lines[0], "## attnbench run 7 (smoke)");
  EXPECT_EQ(lines[2], "1 passed, 1 skipped, 1 crashed");
  EXPECT_EQ(lines[4], "### Not passed");
  EXPECT_EQ(lines[6], "| kernel | shape | status | message |");
  EXPECT_EQ(lines[7], "|---|---|---|---|");
  EXPECT_EQ(lines[8], "| cpu.naive | `b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32` | crashed | " +
                          markdown_cell(kHostile) + " |");
  EXPECT_EQ(lines[10], "### Results");
  EXPECT_EQ(lines[12], "| kernel | shape | status | median | throughput |");
  EXPECT_EQ(lines[13], "|---|---|---|---|---|");
  ASSERT_EQ(lines.size(), 17u) << md;
  EXPECT_EQ(lines[14], "| cpu.flash | `b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32` | passed | " +
                           format_seconds(2e-3) + " | " + format_throughput(1e9 / 2e-3) + " |");
  EXPECT_EQ(lines[15], "| cpu.naive | `b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32` | crashed | - | - |");
  EXPECT_EQ(lines[16],
            "| cpu.masked_fused | `b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32 dist=outliers` | skipped | - | - |");
  // Every table row has its columns and no more: unescaped pipes would add cells.
  for (size_t i : {6, 7, 8, 12, 13, 14, 15, 16}) {
    const std::string& line = lines[i];
    const std::regex cell_separator("(^|[^\\\\])\\|");
    const auto separators = std::distance(std::sregex_iterator(line.begin(), line.end(), cell_separator),
                                          std::sregex_iterator());
    EXPECT_EQ(separators, i < 12 ? 5 : 6) << line;
  }
}

TEST(RunSummaryMarkdown, NoNotPassedSectionWhenAllPassed) {
  const std::string md = run_summary_markdown(1, "s", {result("cpu.flash", ResultStatus::passed, 1e-3)});
  EXPECT_EQ(md.find("Not passed"), std::string::npos);
  EXPECT_NE(md.find("1 passed"), std::string::npos);
  EXPECT_NE(run_summary_markdown(2, "s", {}).find("no results"), std::string::npos);
}

// ---- the end-of-run table ------------------------------------------------------------------------

TEST(SummaryTable, ColumnsAndTheRatioToTheFastestOnTheShape) {
  std::vector<ResultRecord> results = {result("cpu.flash", ResultStatus::passed, 1e-3),
                                       result("cpu.naive", ResultStatus::passed, 2e-3),
                                       result("cpu.a_much_longer_kernel_name", ResultStatus::failed, 0,
                                              "max error 3e-1 > bound 2e-3")};
  std::ostringstream out;
  print_summary_table(results, out);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 7u) << out.str();
  const std::regex header(
      "kernel +shape +status +error / bound +median +throughput +vs best");
  EXPECT_TRUE(std::regex_match(lines[0], header)) << lines[0];
  EXPECT_EQ(lines[1], std::string(lines[1].size(), '-'));
  EXPECT_EQ(lines[1].size(), lines[0].size());
  // The kernel column is as wide as its longest name: every row's shape starts in one place.
  const size_t shape_column = lines[0].find("shape");
  EXPECT_EQ(shape_column, std::string("cpu.a_much_longer_kernel_name").size() + 2);
  for (size_t i : {2, 3, 4}) EXPECT_EQ(lines[i].find("b=1,hq=2"), shape_column) << lines[i];
  EXPECT_NE(lines[2].find("passed"), std::string::npos);
  EXPECT_NE(lines[2].find("1.5e-07 / 2.5e-06"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find(format_seconds(1e-3)), std::string::npos);
  EXPECT_NE(lines[2].find(format_throughput(1e12)), std::string::npos);
  EXPECT_EQ(lines[2].substr(lines[2].size() - 5), "1.00x");
  EXPECT_EQ(lines[3].substr(lines[3].size() - 5), "2.00x");
  EXPECT_NE(lines[4].find("failed"), std::string::npos);
  EXPECT_EQ(lines[4].substr(lines[4].size() - 1), "-");
  EXPECT_EQ(lines[5], "    max error 3e-1 > bound 2e-3");
  EXPECT_EQ(lines[6], "2 passed, 1 failed");
}

TEST(SummaryTable, MessagesAreIndentedLineByLineWithoutControlCharacters) {
  std::ostringstream out;
  print_summary_table({result("cpu.naive", ResultStatus::error, 0, "first\r\nsecond\x1b[31m red\x07")}, out);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 6u) << out.str();
  EXPECT_EQ(lines[3], "    first");
  EXPECT_EQ(lines[4], "    second [31m red ");
  EXPECT_EQ(lines[5], "1 error");
}

TEST(SummaryTable, StatusCountsNameEveryStatusThatOccurred) {
  EXPECT_EQ(status_counts({}), "no results");
  EXPECT_EQ(status_counts({result("k", ResultStatus::timeout, 0), result("k", ResultStatus::passed, 1),
                           result("k", ResultStatus::timeout, 0)}),
            "1 passed, 2 timeout");
}

}  // namespace
}  // namespace attnbench
