#include "process/process_memory.hpp"

#include <fstream>
#include <string>

#include "ortfleet/base/number_text.hpp"

namespace ortfleet::detail {

namespace {
/// "Pss:   1234 kB" → 1234 × 1024 under the name "Pss"; false for a line of another shape.
bool read_kib_line(const std::string& line, std::string& name, uint64_t& bytes) {
  const auto colon = line.find(':');
  if (colon == std::string::npos || line.size() < 3 || line.compare(line.size() - 3, 3, " kB") != 0) return false;
  std::string_view number = std::string_view(line).substr(colon + 1, line.size() - 3 - colon - 1);
  while (!number.empty() && number.front() == ' ') number.remove_prefix(1);
  const auto value = parse_whole(number);
  if (!value || *value < 0) return false;
  name = line.substr(0, colon);
  bytes = static_cast<uint64_t>(*value) * 1024;
  return true;
}
}  // namespace

ProcessMemory process_memory(int pid) {
  ProcessMemory m;
  if (pid <= 0) return m;
  const std::string proc = "/proc/" + std::to_string(pid);
  std::string line;
  std::string name;
  uint64_t bytes = 0;
  if (std::ifstream rollup(proc + "/smaps_rollup"); rollup) {
    while (std::getline(rollup, line)) {
      if (!read_kib_line(line, name, bytes)) continue;
      m.known = true;
      if (name == "Rss") m.rss_bytes = bytes;
      else if (name == "Pss") m.pss_bytes = bytes;
      else if (name == "Pss_Anon") m.anonymous_pss_bytes = bytes;
      else if (name == "Pss_File") m.file_pss_bytes = bytes;
    }
    if (m.known) return m;
  }
  std::ifstream status(proc + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0 && read_kib_line(line, name, bytes)) {
      m = ProcessMemory{true, bytes, bytes, 0, 0};
      break;
    }
  }
  return m;
}

}  // namespace ortfleet::detail
