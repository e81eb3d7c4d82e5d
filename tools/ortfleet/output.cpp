#include "output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <iostream>

#include "ortfleet/base/error.hpp"
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
    std::cerr << "ortfleet: error: " << e.what() << "\n";
  }
  return kExitError;
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

void ProgressLine::update(const std::string& text) {
  if (!enabled_) return;
  std::cerr << "\r\033[K" << text << std::flush;
  shown_ = true;
}

void ProgressLine::clear() {
  if (shown_) std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

Table::Table(std::vector<std::string> headers, std::vector<bool> right_aligned)
    : headers_(std::move(headers)), right_(std::move(right_aligned)) {
  right_.resize(headers_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(headers_.size());
  rows_.push_back(std::move(row));
}

namespace {
size_t visible(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;  // count UTF-8 code points (×, …)
  return n;
}

/// `text` in lines of at most `width` visible characters, broken at spaces where it can be.
std::vector<std::string> wrapped(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  std::string word;
  auto flush_word = [&] {
    while (visible(word) > width) {  // a word longer than the column: cut it
      if (!line.empty()) lines.push_back(std::move(line)), line.clear();
      size_t cut = 0;
      for (size_t seen = 0; cut < word.size() && seen < width; ++cut) seen += (static_cast<unsigned char>(word[cut]) & 0xC0) != 0x80 ? 1 : 0;
      while (cut < word.size() && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) ++cut;
      lines.push_back(word.substr(0, cut));
      word.erase(0, cut);
    }
    if (word.empty()) return;
    if (!line.empty() && visible(line) + 1 + visible(word) > width) lines.push_back(std::move(line)), line.clear();
    line += (line.empty() ? "" : " ") + word;
    word.clear();
  };
  for (char c : text) {
    if (c == ' ') flush_word();
    else word += c;
  }
  flush_word();
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}
}  // namespace

void Table::print(std::ostream& out, const std::string& when_empty) const {
  if (rows_.empty()) {
    if (!when_empty.empty()) out << when_empty << "\n";
    return;
  }
  std::vector<size_t> width(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) width[i] = visible(headers_[i]);
  for (const auto& r : rows_) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], visible(r[i]));
  }
  // Wider than a terminal: the widest text column (an error, a long label) wraps, down to 24 wide.
  const auto total = [&] {
    size_t sum = 2 * (width.size() - 1);
    for (size_t w : width) sum += w;
    return sum;
  };
  while (total() > kMaxWidth) {
    size_t widest = width.size();
    for (size_t i = 0; i < width.size(); ++i) {
      if (!right_[i] && width[i] > kMinWrapped && (widest == width.size() || width[i] > width[widest])) widest = i;
    }
    if (widest == width.size()) break;
    width[widest] = std::max(kMinWrapped, width[widest] - std::min(width[widest] - kMinWrapped, total() - kMaxWidth));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::vector<std::vector<std::string>> parts(cells.size());
    size_t height = 1;
    for (size_t i = 0; i < cells.size(); ++i) {
      parts[i] = visible(cells[i]) > width[i] ? wrapped(cells[i], width[i]) : std::vector<std::string>{cells[i]};
      height = std::max(height, parts[i].size());
    }
    for (size_t row = 0; row < height; ++row) {
      std::string text;
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string cell = row < parts[i].size() ? parts[i][row] : "";
        const std::string pad(width[i] - std::min(width[i], visible(cell)), ' ');
        text += right_[i] ? pad + cell : cell + (i + 1 < cells.size() ? pad : "");
        if (i + 1 < cells.size()) text += "  ";
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      out << text << "\n";
    }
  };
  line(headers_);
  std::vector<std::string> rule;
  for (size_t w : width) rule.emplace_back(w, '-');
  line(rule);
  for (const auto& r : rows_) line(r);
}

}  // namespace ortfleet::cli