#include "harness/cli/ci_reports.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "harness/core/progress.h"
#include "harness/cli/summary_table.h"

namespace attnbench {

namespace {

bool is_control(char c) { return static_cast<unsigned char>(c) < 0x20; }

// A shape (and distribution) as a code span in a table cell: no backtick ends it early, no pipe
// ends the cell; escapes do not work inside code spans, so nothing else is touched.
std::string markdown_code_cell(const std::string& text) {
  std::string cell = "`";
  for (char c : text) {
    if (c == '|') {
      cell += "\\|";
    } else if (c == '`') {
      cell += '\'';
    } else {
      cell += is_control(c) ? ' ' : c;
    }
  }
  return cell + "`";
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&apos;";
        break;
      // As character references, so attribute values keep them (a parser turns raw ones into
      // spaces there).
      case '\t':
        escaped += "&#9;";
        break;
      case '\n':
        escaped += "&#10;";
        break;
      case '\r':
        escaped += "&#13;";
        break;
      default:
        // XML 1.0 allows no other control character, not even as a reference.
        escaped += is_control(c) ? ' ' : c;
    }
  }
  return escaped;
}

std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '|':  // would end the cell
        cell += "\\|";
        break;
      case '\\':  // would escape what follows
        cell += "\\\\";
        break;
      case '`':  // would open a code span
        cell += "\\`";
        break;
      case '&':  // HTML: as text, not markup
        cell += "&amp;";
        break;
      case '<':
        cell += "&lt;";
        break;
      case '>':
        cell += "&gt;";
        break;
      case '\r':  // a line break, once for \r\n
        if (i + 1 < text.size() && text[i + 1] == '\n') break;
        cell += "<br>";
        break;
      case '\n':
        cell += "<br>";
        break;
      default:
        cell += is_control(c) ? ' ' : c;
    }
  }
  return cell;
}

std::vector<CiCase> ci_cases_from_results(const std::vector<ResultRecord>& results) {
  std::vector<CiCase> cases;
  for (const ResultRecord& r : results) {
    CiCase c;
    c.classname = r.kernel;
    c.name = shape_string(r.problem) + (r.distribution == "normal" ? "" : " dist=" + r.distribution);
    c.time_s = r.timing.timed && std::isfinite(r.timing.median_s) ? r.timing.median_s : 0;
    switch (r.status) {
      case ResultStatus::passed:
        c.outcome = CiCase::Outcome::passed;
        break;
      case ResultStatus::skipped:
        c.outcome = CiCase::Outcome::skipped;
        c.message = r.message;
        break;
      case ResultStatus::failed:
        c.outcome = CiCase::Outcome::failed;
        c.message = r.message.empty() ? "check failed" : r.message;
        break;
      case ResultStatus::crashed:
      case ResultStatus::timeout:
      case ResultStatus::error:
        c.outcome = CiCase::Outcome::error;
        c.message = std::string(result_status_name(r.status)) + ": " + r.message;
        break;
    }
    if (r.status != ResultStatus::passed && !r.repro.empty()) c.details = "repro: " + r.repro;
    cases.push_back(c);
  }
  return cases;
}

std::string junit_xml(const std::string& suite, const std::vector<CiCase>& cases) {
  int failures = 0, errors = 0, skipped = 0;
  double total_time = 0;
  for (const CiCase& c : cases) {
    failures += c.outcome == CiCase::Outcome::failed;
    errors += c.outcome == CiCase::Outcome::error;
    skipped += c.outcome == CiCase::Outcome::skipped;
    total_time += c.time_s;
  }
  std::ostringstream xml;
  xml << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"attnbench\" tests=\"" << cases.size() << "\" failures=\""
      << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\""
      << total_time << "\">\n"
      << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << cases.size()
      << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped
      << "\" time=\"" << total_time << "\">\n";
  for (const CiCase& c : cases) {
    xml << "    <testcase classname=\"" << xml_escape(c.classname) << "\" name=\""
        << xml_escape(c.name) << "\" time=\"" << c.time_s << "\"";
    if (c.outcome == CiCase::Outcome::passed && c.details.empty()) {
      xml << "/>\n";
      continue;
    }
    xml << ">\n";
    switch (c.outcome) {
      case CiCase::Outcome::passed:
        break;
      case CiCase::Outcome::failed:
        xml << "      <failure message=\"" << xml_escape(c.message) << "\">"
            << xml_escape(c.details) << "</failure>\n";
        break;
      case CiCase::Outcome::error:
        xml << "      <error message=\"" << xml_escape(c.message) << "\">"
            << xml_escape(c.details) << "</error>\n";
        break;
      case CiCase::Outcome::skipped:
        xml << "      <skipped message=\"" << xml_escape(c.message) << "\"/>\n";
        break;
    }
    if (c.outcome == CiCase::Outcome::passed || c.outcome == CiCase::Outcome::skipped) {
      if (!c.details.empty()) xml << "      <system-out>" << xml_escape(c.details) << "</system-out>\n";
    }
    xml << "    </testcase>\n";
  }
  xml << "  </testsuite>\n</testsuites>\n";
  return xml.str();
}

std::string run_summary_markdown(int64_t run_id, const std::string& suite,
                                 const std::vector<ResultRecord>& results) {
  std::ostringstream md;
  md << "## attnbench run " << run_id << " (" << suite << ")\n\n" << status_counts(results) << "\n\n";
  bool any_bad = false;
  for (const ResultRecord& r : results) any_bad = any_bad || (r.status != ResultStatus::passed &&
                                                               r.status != ResultStatus::skipped);
  if (any_bad) {
    md << "### Not passed\n\n| kernel | shape | status | message |\n|---|---|---|---|\n";
    for (const ResultRecord& r : results) {
      if (r.status == ResultStatus::passed || r.status == ResultStatus::skipped) continue;
      md << "| " << markdown_cell(r.kernel) << " | " << markdown_code_cell(shape_string(r.problem))
         << " | " << result_status_name(r.status) << " | " << markdown_cell(r.message) << " |\n";
    }
    md << "\n";
  }
  md << "### Results\n\n| kernel | shape | status | median | throughput |\n|---|---|---|---|---|\n";
  for (const ResultRecord& r : results) {
    md << "| " << markdown_cell(r.kernel) << " | "
       << markdown_code_cell(shape_string(r.problem) +
                             (r.distribution == "normal" ? "" : " dist=" + r.distribution))
       << " | " << result_status_name(r.status) << " | "
       << (r.timing.timed ? format_seconds(r.timing.median_s) : "-") << " | "
       << (std::isfinite(r.flops_per_s) ? format_throughput(r.flops_per_s) : "-") << " |\n";
  }
  return md.str();
}

Status write_text_file(const std::string& path, const std::string& text) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::Error("cannot write '" + path + "'");
  out << text;
  out.close();
  return out ? Status::Ok() : Status::Error("error writing '" + path + "'");
}

}  // namespace attnbench
