#pragma once
// The node daemon's systemd user unit (dist/systemd/ortfleet.service.in, compiled in), for the binary
// that prints it: `ortfleet serve --print-unit`.
#include <string>

namespace ortfleet::cli {

/// The unit with ExecStart= `binary`, written as systemd reads a path (quoted where it holds spaces or
/// quotes; `%` and `$` doubled, so that neither is taken for a specifier or a variable).
std::string systemd_unit(const std::string& binary);

}  // namespace ortfleet::cli
