#pragma once
// The files a command is asked to write (--export-json, --html, --write-config, report -o, --trace,
// --timeline): written whole or not at all, and never over one of the files the command reads.
#include <string>
#include <utility>
#include <vector>

namespace ortfleet {

namespace detail {
/// Why writing `path` failed, from errno right after the failure: a missing folder, permissions, a
/// full disk or a folder in the way each need a different fix. Throws ortfleet::Error.
[[noreturn]] void throw_write_error(const std::string& path, int err);
}  // namespace detail

/// Writes `text` to `path` whole or not at all: into a file beside it, then renamed over it, so that a
/// failure (a full disk) never leaves the old file cut short or a new one half written. The file
/// keeps the mode it had. A symbolic link is written through (its target is replaced, the link
/// stays); a device or a pipe (/dev/null, /dev/stdout) is written as it is. Throws ortfleet::Error
/// (throw_write_error) for a folder, a missing folder, and the rest.
void write_output_file(const std::string& path, const std::string& text);

/// Refuses, before any work, a command line that would write a file over one it reads, or two of its
/// outputs over each other: `outputs` and `inputs` are (what names it, path) pairs such as
/// ("--export-json", "model.onnx") and ("the model", "model.onnx"); empty paths are skipped. Throws
/// ortfleet::Error naming both.
void refuse_overwriting(const std::vector<std::pair<std::string, std::string>>& outputs,
                        const std::vector<std::pair<std::string, std::string>>& inputs);

}  // namespace ortfleet
