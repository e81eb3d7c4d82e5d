#include "output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include "ortfleet/base/error.hpp"
#include "ortfleet/report/html_report.hpp"

namespace ortfleet::cli {

int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::cerr << "ortfleet: error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "ortfleet: error: " << e.what() << "\n";
  }
  return 1;
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

void add_html_option(CLI::App* app, std::string& path) {
  app->add_option("--html", path, "Also draw the results as one self-contained HTML page here (as `ortfleet report` does)");
}

void write_html(const std::string& path, const std::string& stamped_json, const Globals& globals) {
  if (path.empty()) return;
  write_html_report(path, {parse_result(stamped_json, "this run")});
  if (!globals.json) std::cout << "report: " << path << "\n";
}

std::string format_ms(double ms) {
  // Three significant digits: inference latencies of 1.4 ms and 1.6 ms must not both read "2 ms".
  if (ms < 0.1) return fmt::format("{:.1f} us", ms * 1000);
  if (ms < 10) return fmt::format("{:.2f} ms", ms);
  if (ms < 100) return fmt::format("{:.1f} ms", ms);
  if (ms < 1000) return fmt::format("{:.0f} ms", ms);
  if (ms < 60'000) return fmt::format("{:.2f} s", ms / 1000);
  const long long seconds = std::llround(ms / 1000);
  return fmt::format("{} min {} s", seconds / 60, seconds % 60);
}

std::string format_bytes(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b >= 1'000'000'000ULL) return fmt::format("{:.2f} GB", v / 1e9);
  if (b >= 1'000'000ULL) return fmt::format("{:.1f} MB", v / 1e6);
  if (b >= 1'000ULL) return fmt::format("{:.1f} kB", v / 1e3);
  return fmt::format("{} B", b);
}
ProgressLine::ProgressLine(bool enabled) : enabled_(enabled), tty_(::isatty(STDERR_FILENO) != 0) {
  // Without a terminal, the first plain line waits a few seconds: short work prints nothing.
  last_plain_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::update(const std::string& text) {
  if (!enabled_) return;
  if (tty_) {
    std::cerr << "\r\033[K" << text << std::flush;
    shown_ = true;
    return;
  }
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_plain_ >= 5.0) {
    std::cerr << text << "\n";
    last_plain_ = now;
  }
}

void ProgressLine::clear() {
  if (shown_ && tty_) std::cerr << "\r\033[K" << std::flush;
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

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(headers_.size());
  auto visible = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;  // count UTF-8 code points (×, …)
    return n;
  };
  for (size_t i = 0; i < headers_.size(); ++i) width[i] = visible(headers_[i]);
  for (const auto& r : rows_) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], visible(r[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string pad(width[i] - visible(cells[i]), ' ');
      text += right_[i] ? pad + cells[i] : cells[i] + (i + 1 < cells.size() ? pad : "");
      if (i + 1 < cells.size()) text += "  ";
    }
    out << text << "\n";
  };
  line(headers_);
  std::vector<std::string> rule;
  for (size_t w : width) rule.emplace_back(w, '-');
  line(rule);
  for (const auto& r : rows_) line(r);
}

}  // namespace ortfleet::cli