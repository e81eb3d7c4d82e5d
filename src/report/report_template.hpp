#pragma once
// The page `ortfleet report` fills in: src/report/report_template.html, compiled in by the build.
#include <string>

namespace ortfleet::detail {

/// The HTML template, with {{TITLE}}, {{CHART_LIBRARY}}, {{RESULTS}}, {{ORTFLEET_VERSION}} and {{CREATED}}.
const std::string& report_template();

}  // namespace ortfleet::detail
