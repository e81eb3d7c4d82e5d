#pragma once
// What a command prints and writes for a person or a program: errors as one line, JSON, tables,
// times and sizes, the progress line, and the results stamped with where they came from.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.hpp"
#include "ortfleet/engine/devices.hpp"

namespace ortfleet::cli {

/// `argv` as one line a shell would run again: arguments with spaces or quotes are single-quoted.
std::string shell_line(int argc, const char* const* argv);

/// A command's JSON result with where it came from (command line, date, machine, ONNX Runtime), for
/// --json and the result files it writes, so `ortfleet report` can say it.
std::string stamped(const std::string& result_json, const Globals& globals, const std::vector<Device>& devices);

/// --html PATH, shared by bench, profile, tune and start.
void add_html_option(CLI::App* app, std::string& path);
/// Writes the page `ortfleet report` would draw from this stamped result to `path` (nothing if empty).
void write_html(const std::string& path, const std::string& stamped_json, const Globals& globals);

/// Runs `body`, turning ortfleet::Error and other exceptions into a one-line message on stderr.
int guarded(const std::function<int()>& body);

void print_json(const nlohmann::json& j);
std::string format_ms(double ms);      ///< "850 ms", "1.23 s", "2 min 3 s"
std::string format_bytes(uint64_t b);  ///< "1.27 GB"

/// One status line on stderr, redrawn in place when stderr is a terminal (plain lines otherwise,
/// at most one every few seconds, so logs stay readable).
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void update(const std::string& text);
  void clear();

 private:
  bool enabled_;
  bool tty_;
  bool shown_ = false;
  double last_plain_ = -1e9;
};

/// A text table with aligned columns.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::vector<bool> right_aligned = {});
  void add(std::vector<std::string> row);
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ortfleet::cli
