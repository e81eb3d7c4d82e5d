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
#include "ortfleet/base/units.hpp"  // duration_text, bytes_text, count_text: how every table prints them
#include "ortfleet/engine/devices.hpp"

namespace ortfleet::cli {

/// `argv` as one line a shell would run again: arguments with spaces or quotes are single-quoted.
std::string shell_line(int argc, const char* const* argv);

/// A command's JSON result with where it came from (command line, date, machine, ONNX Runtime), for
/// --json and the result files it writes, so `ortfleet report` can say it.
std::string stamped(const std::string& result_json, const Globals& globals, const std::vector<Device>& devices);

/// An option naming a path the command writes (a file, or a folder when `folder`): an empty value is
/// refused as every bad value is, in one line naming the flag. Every output flag is declared with it.
CLI::Option* add_output_option(CLI::App* app, const std::string& name, std::string& path, const std::string& help, bool folder = false);
/// --html PATH, shared by bench, profile, tune and start.
void add_html_option(CLI::App* app, std::string& path);
/// Writes the page `ortfleet report` would draw from this stamped result to `path` (nothing if empty).
void write_html(const std::string& path, const std::string& stamped_json, const Globals& globals);

/// An error or note of several lines (a Python traceback, ONNX Runtime's text) as the one line a table
/// or a list shows: its last non-empty line, which names the exception, and where the whole text is
/// ("--json has all 14 lines"); a one-line text as it is.
std::string one_line(const std::string& text, const std::string& whole_text_in = "--json");

/// Runs `body`, turning ortfleet::Error and other exceptions into a one-line message on stderr.
int guarded(const std::function<int()>& body);

/// Ends the process with `code` once a command is done and its own objects are gone (its files removed,
/// its processes stopped): what it printed and logged flushed, then out without the static destructors
/// of the libraries it loaded. A session made in this process (profile's batch switch, tune's outputs,
/// doctor's EP) leaves ONNX Runtime's CUDA EP and cuDNN loaded, and their teardown at exit, racing the
/// CUDA driver's and the threads still in them, aborted a profile on an H100 after it had printed
/// everything (std::length_error, rc 134) and hung another until killed. A sanitizer's build exits the
/// ordinary way, so that its checks at exit still run.
[[noreturn]] void end_process(int code);

void print_json(const nlohmann::json& j);

/// One status line on stderr, redrawn in place, only when stderr is a terminal: a log or a pipe gets
/// none (lines worth keeping there, a plan or an estimate, are said as notices).
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void update(const std::string& text);
  void clear();
  /// Whether it draws anything (stderr is a terminal, and progress was not turned off).
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool shown_ = false;
};

/// A text table with aligned columns, every row on one line: no row is wrapped and no cell is cut, so
/// grep, awk and copy-paste see whole rows and whole names, in a terminal and in a pipe alike. A table
/// wider than kMaxWidth whose last columns are free text (left-aligned: an error, a detail, a note) moves
/// them under the table, the last first, one "first cell: text" line per row that has some, under the
/// column's header; the rest keeps its columns. What still does not fit (a long path in a cell) stays on its
/// line, wider.
class Table {
 public:
  static constexpr size_t kMaxWidth = 100;
  explicit Table(std::vector<std::string> headers, std::vector<bool> right_aligned = {});
  void add(std::vector<std::string> row);
  /// The table; with no row, `when_empty` as one line ("no resident sessions"), or nothing.
  void print(std::ostream& out, const std::string& when_empty = "") const;
  bool empty() const { return rows_.empty(); }
  /// How many leading cells name a row in the lines under the table (1: the first; 2: a device and its model).
  void name_rows_by(size_t columns) { naming_columns_ = columns; }

 private:
  size_t naming_columns_ = 1;
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ortfleet::cli
