#pragma once
// `ortfleet report`: one self-contained HTML page of charts drawn from the JSON results of bench,
// profile, tune and start. The charting library (Apache ECharts) and the data are inlined, so the
// page opens offline and makes no network request.
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"

namespace ortfleet {

/// One result of an ortfleet command, checked: which command wrote it and its JSON.
struct ResultDocument {
  std::string source;  ///< the file it was read from, or "this run"
  std::string kind;    ///< "bench", "throughput", "profile", "tune", "start" or "timeline"
  std::string json;    ///< the result as written, every key kept
};

/// Which ortfleet result `text` is. Throws ortfleet::Error naming `source` for text that is not JSON
/// (a truncated file), JSON from another tool, or a result version this ortfleet does not know.
ResultDocument parse_result(const std::string& text, const std::string& source);

/// Reads a result file and checks it (parse_result); every error names the file.
ResultDocument read_result_file(const std::string& path);

/// `json_text` with where the result came from added, for `report` to show: the command line and
/// the date (UTC), and the machine and ONNX Runtime version where the result does not say them.
/// `ort_library` is the --ort-lib the command ran with (empty: the usual search).
std::string stamp_result(const std::string& json_text, const std::string& command_line, const std::vector<Device>& devices,
                         const std::string& ort_library);

/// The charting library the page inlines: $ORTFLEET_WEB_DIR/echarts.min.js, else share/ortfleet/web
/// of the installation, else the copy scripts/fetch-web-assets.sh fetched for this build.
std::string find_chart_library();

/// The page for these results, in the order given.
std::string render_html_report(const std::vector<ResultDocument>& results);

/// render_html_report, written to `path`.
void write_html_report(const std::string& path, const std::vector<ResultDocument>& results);

}  // namespace ortfleet
