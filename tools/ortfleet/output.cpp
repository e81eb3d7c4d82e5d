#include "output.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/report/html_report.hpp"

namespace ortfleet::cli {

int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const SettingRefused& e) {
    std::cerr << "ortfleet: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const Error& e) {
    std::cerr << "ortfleet: error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "ortfleet: error: " << terminal_text(e.what()) << "\n";
  }
  return kExitError;
}

void end_process(int code) {
  std::cout.flush();
  std::cerr.flush();
  try {
    if (auto logger = spdlog::default_logger()) logger->flush();
  } catch (...) {  // nothing more can be said: the exit code stands
  }
  std::fflush(nullptr);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  std::exit(code);
#else
  ::_exit(code);
#endif
}

std::string one_line(const std::string& text, const std::string& whole_text_in) {
  std::vector<std::string> lines;
  std::string line;
  for (char c : text + "\n") {
    if (c != '\n' && c != '\r') {
      line += c;
      continue;
    }
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(line);
    line.clear();
  }
  if (lines.size() <= 1) return lines.empty() ? std::string() : lines.front();
  std::string last = lines.back();
  last.erase(0, last.find_first_not_of(" \t"));
  return last + " (" + whole_text_in + " has all " + std::to_string(lines.size()) + " lines)";
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

std::string shell_line(int argc, const char* const* argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,*+@%") == std::string::npos;
    if (!plain) {
      std::string quoted = "'";
      for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      arg = quoted + "'";
    }
    line += (i == 0 ? "" : " ") + arg;
  }
  return line;
}

std::string stamped(const std::string& result_json, const Globals& globals, const std::vector<Device>& devices) {
  return stamp_result(result_json, globals.command_line, devices, globals.ort_lib);
}

CLI::Option* add_output_option(CLI::App* app, const std::string& name, std::string& path, const std::string& help, bool folder) {
  CLI::Option* option = app->add_option(name, path, help);
  const std::string flag = option->get_positional() ? "the output path" : option->get_name();
  const std::string what = folder ? "a folder" : "a file";
  option->check(CLI::Validator(
      [flag, what](std::string& text) -> std::string { return text.empty() ? flag + " is empty: give the path of " + what + " to write" : std::string(); },
      ""));
  return option;
}

void add_html_option(CLI::App* app, std::string& path) {
  add_output_option(app, "--html", path, "Also draw the results as one self-contained HTML page here (as `ortfleet report` does)");
}

void write_html(const std::string& path, const std::string& stamped_json, const Globals& globals) {
  if (path.empty()) return;
  write_html_report(path, {parse_result(stamped_json, "this run")});
  if (!globals.json) std::cout << "report: " << path << "\n";
}

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO) != 0) {}
ProgressLine::~ProgressLine() { clear(); }

namespace {
/// The progress line's own redraw ("\r\033[K" and its text) straight to the terminal: stderr's stream
/// escapes every control character (terminal_lines), the line's own included.
void redraw_progress(const std::string& text) {
  std::cerr << std::flush;
  const std::string line = "\r\033[K" + terminal_text(text);
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}
}  // namespace

void ProgressLine::update(const std::string& text) {
  if (!enabled_) return;
  redraw_progress(text);
  shown_ = true;
}

void ProgressLine::clear() {
  if (shown_) redraw_progress("");
  shown_ = false;
}

Table::Table(std::vector<std::string> headers, std::vector<bool> right_aligned)
    : headers_(std::move(headers)), right_(std::move(right_aligned)) {
  right_.resize(headers_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(headers_.size());
  for (auto& cell : row) cell = terminal_text(cell);  // a name with a newline or an escape stays in its cell
  rows_.push_back(std::move(row));
}

namespace {
size_t visible(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;  // count UTF-8 code points (×, …)
  return n;
}

/// The width of each column over `headers` and `rows`, the first `columns` of them.
std::vector<size_t> column_widths(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows, size_t columns) {
  std::vector<size_t> width(columns);
  for (size_t i = 0; i < columns; ++i) width[i] = visible(headers[i]);
  for (const auto& r : rows) {
    for (size_t i = 0; i < columns; ++i) width[i] = std::max(width[i], visible(r[i]));
  }
  return width;
}

size_t table_width(const std::vector<size_t>& width) {
  size_t sum = 2 * (width.size() - 1);
  for (size_t w : width) sum += w;
  return sum;
}
}  // namespace

void Table::print(std::ostream& out, const std::string& when_empty) const {
  if (rows_.empty()) {
    if (!when_empty.empty()) out << when_empty << "\n";
    return;
  }
  size_t columns = headers_.size();
  std::vector<size_t> width = column_widths(headers_, rows_, columns);
  // Too wide: the last columns of free text go under the table, the last first, so that each row keeps one line.
  while (table_width(width) > kMaxWidth && columns > 1 && !right_[columns - 1]) width = column_widths(headers_, rows_, --columns);
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < columns; ++i) {
      const std::string pad(width[i] - std::min(width[i], visible(cells[i])), ' ');
      text += right_[i] ? pad + cells[i] : cells[i] + (i + 1 < columns ? pad : "");
      if (i + 1 < columns) text += "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line(headers_);
  std::vector<std::string> rule;
  for (size_t w : width) rule.emplace_back(w, '-');
  line(rule);
  for (const auto& r : rows_) line(r);
  // Each row below is named by the cells that name it (name_rows_by), as in the table.
  const auto row_name = [&](const std::vector<std::string>& r) {
    std::string name;
    for (size_t i = 0; i < std::min(naming_columns_, columns); ++i) {
      const std::string& cell = r[i];
      name += (i > 0 ? " " : "") + cell.substr(std::min(cell.size(), cell.find_first_not_of(' ')));
    }
    return name;
  };
  for (size_t column = columns; column < headers_.size(); ++column) {
    const bool any = std::any_of(rows_.begin(), rows_.end(), [&](const auto& r) { return !r[column].empty(); });
    if (!any) continue;
    out << "\n" << headers_[column] << ":\n";
    for (const auto& r : rows_) {
      if (!r[column].empty()) out << "  " << row_name(r) << ": " << r[column] << "\n";
    }
  }
}

}  // namespace ortfleet::cli