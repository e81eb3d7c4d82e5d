// ONNX Runtime's own outputs that profile reads: its profiler's trace events and the JSON lines of
// its log (start --ort-log), parsed with the malformed part named.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/json_errors.hpp"
#include "engine/cache/full_disk.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/profile.hpp"

namespace ortfleet {
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
/// ONNX Runtime writes a node's name into its profile as it is: a control character in it (ESC, a
/// newline) makes the file invalid JSON. Inside the file's strings each such byte becomes the escape
/// JSON has for it (\u001b), and a byte of invalid UTF-8 the code point of its value, so that the
/// profile of a model with such names reads; the names reach the terminal escaped (terminal_text).
std::string profile_json_readable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!in_string) {
      in_string = c == '"';
      out += static_cast<char>(c);
      continue;
    }
    if (c == '\\' && i + 1 < text.size()) {  // an escape JSON has: kept whole
      out += text.substr(i, 2);
      ++i;
      continue;
    }
    if (c == '"') in_string = false;
    size_t valid = 0;  // the length of a well-formed UTF-8 sequence here (1 for ASCII)
    if (c >= 0x80) {
      const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
      bool ok = length > 0 && c <= 0xF4 && i + length <= text.size();
      for (size_t k = 1; ok && k < length; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
      valid = ok ? length : 0;
    }
    if (c < 0x20 || (c >= 0x80 && valid == 0)) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else if (valid > 1) {
      out += text.substr(i, valid);
      i += valid - 1;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}
}  // namespace

std::vector<OrtProfileEvent> parse_ort_profile(const std::string& text, const std::string& source) {
  auto bad = [&](const std::string& why) {
    return Error("malformed ONNX Runtime profile " + source + ": " + why,
                 "It should be the JSON file ONNX Runtime writes when profiling is enabled");
  };
  json j;
  try {
    j = json::parse(profile_json_readable(text));
  } catch (const json::exception& e) {  // parse errors, and numbers no double holds (1e999)
    throw bad("not JSON (" + detail::json_error_text(e) + ")");
  }
  if (!j.is_array()) throw bad("expected an array of trace events");
  std::vector<OrtProfileEvent> events;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    if (!e.is_object()) throw bad("event " + std::to_string(i) + " is not an object");
    for (const char* key : {"cat", "name", "ts", "dur"}) {
      if (!e.contains(key)) throw bad("event " + std::to_string(i) + " has no \"" + key + "\"");
    }
    if (!e["ts"].is_number() || !e["dur"].is_number() || !e["cat"].is_string() || !e["name"].is_string()) {
      throw bad("event " + std::to_string(i) + " has a field of the wrong type");
    }
    OrtProfileEvent ev;
    ev.category = e["cat"].get<std::string>();
    ev.name = e["name"].get<std::string>();
    ev.ts_us = e["ts"].get<int64_t>();
    ev.dur_us = e["dur"].get<int64_t>();
    if (ev.dur_us < 0) throw bad("event " + std::to_string(i) + " has a negative duration");
    if (e.contains("args") && e["args"].is_object()) {
      ev.op = e["args"].value("op_name", "");
      ev.provider = e["args"].value("provider", "");
    }
    events.push_back(std::move(ev));
  }
  return events;
}

std::vector<OrtLogLine> parse_ort_log(const std::string& text, const std::string& source) {
  std::vector<OrtLogLine> lines;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      const json j = json::parse(line);
      lines.push_back({j.at("t").get<int64_t>(), j.at("severity").get<int>(), j.at("message").get<std::string>()});
    } catch (const json::exception& e) {
      throw Error("malformed ONNX Runtime log " + source + " line " + std::to_string(number) + ": " + detail::json_error_text(e),
                  "It should come from 'ortfleet start --ort-log'");
    }
  }
  return lines;
}

namespace {
/// The text of the file ONNX Runtime wrote at `path` (its log, its profile), made into what `parse`
/// makes of it. A file that cannot be read, or does not parse, on a full disk is said as the full disk
/// (issue 58's re-audit: a full $TMPDIR was blamed on ONNX Runtime's log or profile): where, and what to do.
template <typename Parse>
auto read_written_file(const std::string& path, const std::string& what, Parse parse) {
  const std::string folder = fs::path(path).parent_path().string();
  try {
    std::ifstream in(path);
    if (!in) throw Error("cannot read " + what + " " + path, "The start that wrote it may have failed before writing it");
    std::stringstream text;
    text << in.rdbuf();
    return parse(text.str());
  } catch (const Error& e) {
    const std::string full = detail::full_disk_text(folder);
    if (full.empty()) throw;
    throw Error(what + " " + path + " was not written whole: " + full,
                "Free space on that disk, or set TMPDIR to a folder on a disk with room");
  }
}
}  // namespace

std::vector<OrtLogLine> read_ort_log(const std::string& path) {
  return read_written_file(path, "ONNX Runtime's log", [&](const std::string& text) { return parse_ort_log(text, path); });
}

std::vector<OrtProfileEvent> read_ort_profile(const std::string& path) {
  return read_written_file(path, "ONNX Runtime's profile", [&](const std::string& text) { return parse_ort_profile(text, path); });
}

}  // namespace ortfleet
