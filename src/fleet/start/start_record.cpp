#include "ortfleet/fleet/start_record.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/private_dir.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr const char* kRecordFolderHint = "Set ORTFLEET_CACHE to a folder only you can write";

fs::path root_or_default(const std::string& root) { return root.empty() ? fs::path(ModelCache::default_root()) : fs::path(root); }
}  // namespace

namespace {
constexpr std::array<std::pair<StartWay, const char*>, 3> kWayNames = {
    {{StartWay::workers, "fleet"}, {StartWay::one_process, "fleet, one process"}, {StartWay::threads, "threads"}}};
}  // namespace

const char* to_string(StartWay way) {
  for (const auto& [w, name] : kWayNames) {
    if (w == way) return name;
  }
  return "?";
}

std::optional<StartWay> start_way_of_row(const std::string& label) {
  if (label == "fleet (1 device)") return StartWay::workers;  // a bench of several GPUs: its row of one
  for (const auto& [way, name] : kWayNames) {
    if (label == name) return way;
  }
  return std::nullopt;
}

const char* start_way_words(StartWay way) {
  switch (way) {
    case StartWay::workers: return "a worker process per GPU";
    case StartWay::one_process: return "the fleet in one process";
    case StartWay::threads: return "threads in one process";
  }
  return "?";
}

std::string StartRecord::described() const {
  std::string machine = "no NVIDIA GPU";
  if (!gpus.empty()) {
    const bool alike = std::all_of(gpus.begin(), gpus.end(), [&](const std::string& g) { return g == gpus.front(); });
    machine = alike ? fmt::format("{} x {}", gpus.size(), gpus.front()) : fmt::format("{} GPUs", gpus.size());
  }
  return fmt::format("{}, {} of {}", machine, source, measured_at.substr(0, 10));
}

std::string StartRecord::to_json() const {
  json by_row = json::object();
  for (const auto& [way, ms] : start_ms) by_row[to_string(way)] = ms;
  return json{{"ortfleet_start_record", 1}, {"gpus", gpus},   {"device_count", device_count}, {"measured_at", measured_at},
              {"source", source},            {"model", model}, {"start_ms", by_row}}
      .dump(2);
}

StartRecord StartRecord::from_json(const std::string& text, const std::string& source_path) {
  try {
    const json j = json::parse(text);
    if (j.value("ortfleet_start_record", 0) != 1) throw Error("'ortfleet_start_record' is not 1");
    StartRecord r;
    r.gpus = j.at("gpus").get<std::vector<std::string>>();
    r.device_count = j.at("device_count").get<int>();
    r.measured_at = j.at("measured_at").get<std::string>();
    r.source = j.at("source").get<std::string>();
    r.model = j.value("model", "");
    for (const auto& [row, ms] : j.at("start_ms").get<std::map<std::string, double>>()) {
      if (const auto way = start_way_of_row(row)) r.start_ms[*way] = ms;  // the rows auto does not weigh are left out
    }
    return r;
  } catch (const std::exception& e) {
    throw Error("malformed start record " + source_path + ": " + Error::from(e).what_failed(),
                "Remove it; the next 'ortfleet bench' on this machine writes it again");
  }
}

std::vector<std::string> machine_gpu_names() {
  std::vector<fs::path> folders;  // one per GPU, named by its PCI bus id
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());
  std::vector<std::string> names;
  for (const auto& folder : folders) {
    std::ifstream in(folder / "information");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Model:", 0) != 0) continue;
      const size_t begin = line.find_first_not_of(" \t", 6);
      names.push_back(begin == std::string::npos ? std::string() : line.substr(begin));
      break;
    }
  }
  return names;
}

std::string start_record_path(int device_count, const std::string& root) {
  return (root_or_default(root) / "start-records" / fmt::format("gpus-{}.json", device_count)).string();
}

void save_start_record(const StartRecord& record, const std::string& root) {
  const fs::path path = start_record_path(record.device_count, root);
  detail::ensure_private_dir(path.parent_path(), kRecordFolderHint);
  detail::write_private_file(path, record.to_json(), /*durable=*/false);
}

std::optional<StartRecord> find_start_record(int device_count, const std::string& root,
                                             const std::optional<std::vector<std::string>>& gpus) {
  std::optional<std::string> base = root.empty() ? ModelCache::find_default_root() : std::optional<std::string>(root);
  if (!base) return std::nullopt;
  const fs::path path = start_record_path(device_count, *base);
  try {
    // A record steers how every later start runs: read it only from a folder no other user can write.
    if (!detail::check_private_dir(path.parent_path(), kRecordFolderHint)) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  try {
    StartRecord record = StartRecord::from_json(text.str(), path.string());
    if (record.device_count != device_count || record.gpus != (gpus ? *gpus : machine_gpu_names())) return std::nullopt;
    return record;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace ortfleet
