#include "ortfleet/report/html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/environment.hpp"
#include "base/file_reading.hpp"
#include "base/json_errors.hpp"
#include "base/system_paths.hpp"
#include "diagnostics/machine.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "report/report_template.hpp"

namespace ortfleet {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kChartLibrary = "echarts.min.js";
constexpr int kResultVersion = 1;

/// Each kind of result: the key (and version) that marks it, and a list the page cannot draw without.
struct ResultKind {
  const char* marker;
  const char* kind;
  const char* needs;
};
constexpr std::array<ResultKind, 6> kKinds = {{{"ortfleet_bench", "bench", "rows"},
                                               {"ortfleet_throughput", "throughput", "rows"},
                                               {"ortfleet_profile", "profile", "phases"},
                                               {"ortfleet_tune", "tune", "results"},
                                               {"ortfleet_start", "start", "devices"},
                                               {"ortfleet_timeline", "timeline", "events"}}};

std::string markers() {
  std::string out;
  for (const auto& k : kKinds) out += (out.empty() ? "" : ", ") + std::string(k.marker);
  return out;
}

std::string read_text(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(what + " " + path.string() + " does not exist");
  if (fs::is_directory(path, ec)) throw Error("cannot read " + what + " " + path.string() + ": it is a folder");
  return detail::read_whole_file(path.string(), what, "Check that it is readable");
}

/// JSON that cannot end the <script> element it sits in: '<' only occurs inside JSON strings, where
/// \u003c means the same.
std::string script_safe_json(const json& j) {
  const std::string text = j.dump();
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

/// The template with each {{NAME}} replaced by its value, in one pass: a value is never scanned again.
std::string fill_template(const std::string& page, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t open = page.find("{{", at);
    if (open == std::string::npos) break;
    const size_t close = page.find("}}", open);
    const std::string name = page.substr(open + 2, close == std::string::npos ? 0 : close - open - 2);
    const auto it = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == name; });
    if (close == std::string::npos || it == values.end()) throw Error("the report template has an unknown field at byte " + std::to_string(open));
    out.append(page, at, open - at);
    out += it->second;
    at = close + 2;
  }
  out.append(page, at, std::string::npos);
  return out;
}

/// The family each bench row is drawn in: "fleet from Python" is ortfleet's own fleet, started from
/// Python, which earlier benches filed with onnxruntime's Python API (so the page drew it in that colour).
void drawn_families(json& bench) {
  const auto rows = bench.find("rows");
  if (rows == bench.end() || !rows->is_array()) return;
  for (auto& row : *rows) {
    if (row.is_object() && row.value("strategy", "") == "python-ortfleet") row["family"] = "ortfleet-python";
  }
}

}  // namespace

ResultDocument parse_result(const std::string& text, const std::string& source) {
  const std::string give = "Give ortfleet report the JSON that ortfleet bench, profile, tune or start wrote (--json, --export-json, --timeline)";
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(source + " is not valid JSON (is it cut short?): " + detail::json_error_text(e), give);
  }
  if (!j.is_object()) throw Error(source + " is not an ortfleet result: it is JSON, but not an object", give);
  for (const auto& k : kKinds) {
    if (!j.contains(k.marker)) continue;
    const json& version = j[k.marker];
    if (!version.is_number_integer() || version.get<int64_t>() != kResultVersion) {
      throw Error(fmt::format("{} is an ortfleet {} result of version {}, which this ortfleet ({}) cannot read (it reads version {})",
                              source, k.kind, version.dump(), ORTFLEET_VERSION, kResultVersion),
                  "Make the report with the ortfleet that wrote the result");
    }
    if (!j.contains(k.needs) || !j[k.needs].is_array()) {
      throw Error(fmt::format("{} says it is an ortfleet {} result but has no \"{}\" list", source, k.kind, k.needs), give);
    }
    return {source, k.kind, text};
  }
  throw Error(source + " is not an ortfleet result: it has none of the keys " + markers(), give);
}

ResultDocument read_result_file(const std::string& path) { return parse_result(read_text(path, "result file"), path); }

std::string stamp_result(const std::string& json_text, const std::string& command_line, const std::vector<Device>& devices,
                         const std::string& ort_library) {
  json j = json::parse(json_text);
  j["command_line"] = command_line;
  j["date"] = utc_now();
  if (!j.contains("machine")) j["machine"] = detail::machine_description(devices);
  // profile and tune ran ONNX Runtime in child processes: the same search finds the same library.
  // Should it fail here all the same, the measurement stands; the report shows the version as unknown.
  if (!j.contains("onnxruntime")) {
    try {
      j["onnxruntime"] = load_runtime(ort_library).version;
    } catch (const Error&) {
      j["onnxruntime"] = nullptr;
    }
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace);  // a path of invalid UTF-8 (any bytes name a file): U+FFFD
}

std::string find_chart_library() {
  std::vector<fs::path> candidates;
  if (auto dir = detail::env_value(detail::EnvVar::web_dir)) {
    candidates = {fs::path(*dir) / kChartLibrary};
  } else {
    candidates = {detail::own_binary_dir() / ".." / "share" / "ortfleet" / "web" / kChartLibrary,
                  fs::path(ORTFLEET_FETCHED_WEB_DIR) / kChartLibrary};
  }
  std::error_code ec;
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c).string();
  }
  std::string looked;
  for (const auto& c : candidates) looked += (looked.empty() ? "" : ", ") + c.lexically_normal().string();
  throw Error("the charting library " + std::string(kChartLibrary) + " was not found (looked at " + looked + ")",
              "Run scripts/fetch-web-assets.sh, or set ORTFLEET_WEB_DIR to the folder that holds it");
}

std::string render_html_report(const std::vector<ResultDocument>& results) {
  if (results.empty()) throw Error("a report needs at least one result file");
  const std::string library_path = find_chart_library();
  const std::string library = read_text(library_path, "charting library");
  if (library.find("</script") != std::string::npos || library.find("<!--") != std::string::npos) {
    throw Error("the charting library " + library_path + " cannot be inlined into a page: it contains </script or <!--",
                "Run scripts/fetch-web-assets.sh again to fetch the pinned copy");
  }
  json data = json::array();
  std::string kinds;
  for (const auto& r : results) {
    json result = json::parse(r.json);
    if (r.kind == "bench") drawn_families(result);
    data.push_back({{"kind", r.kind}, {"source", r.source}, {"result", std::move(result)}});
    if (kinds.find(r.kind) == std::string::npos) kinds += (kinds.empty() ? "" : ", ") + r.kind;
  }
  return fill_template(detail::report_template(), {{"TITLE", html_escape("ortfleet report: " + kinds)},
                                                   {"CHART_LIBRARY", library},
                                                   {"RESULTS", script_safe_json(data)},
                                                   {"ORTFLEET_VERSION", html_escape(ORTFLEET_VERSION)},
                                                   {"CREATED", utc_now()}});
}

void write_html_report(const std::string& path, const std::vector<ResultDocument>& results) {
  write_output_file(path, render_html_report(results));
}

}  // namespace ortfleet
