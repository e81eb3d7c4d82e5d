// What a node daemon served, remembered across its restarts (served_models.hpp).
#include "fleet/pool/served_models.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "base/content_hash.hpp"
#include "base/file_reading.hpp"
#include "base/private_dir.hpp"
#include "base/system_paths.hpp"
#include "engine/cache/bundle.hpp"
#include "engine/cache/model_digest.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_sessions.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/cache.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kFormat = 1;
/// What to do about a folder that cannot hold the memory.
std::string folder_hint() {
  return "Set ORTFLEET_CACHE to a folder only you can write, or start the daemon with " + named(Setting::remember_served, "false");
}
/// A memory larger than this is no daemon's: refused unread.
constexpr size_t kMostBytes = size_t{16} << 20;

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

/// Where model digests are remembered: where the workers remember them.
std::string digest_memo() { return WorkerSessions::memo_dir(); }

std::string key_of(const std::string& device, const json& plan) { return device + "|" + plan.dump(); }

/// The checksum of what a memory holds: a damaged or hand-edited file is told apart.
std::string checksum(const json& models) {
  const std::string text = models.dump();
  return hex64(xxh64(text.data(), text.size()));
}

json to_json(const ServedModel& m) {
  return {{"model", m.model}, {"device", m.device}, {"plan", m.plan}, {"content", m.content}, {"bytes", m.bytes}, {"last_used_s", m.last_used_s}};
}

/// One remembered model, or nothing for an entry that is not one (its path relative, a field missing).
std::optional<ServedModel> from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  ServedModel m;
  try {
    m.model = j.at("model").get<std::string>();
    m.device = j.at("device").get<std::string>();
    m.plan = j.at("plan");
    m.content = j.at("content").get<std::string>();
    m.bytes = j.at("bytes").get<uint64_t>();
    m.last_used_s = j.at("last_used_s").get<double>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
  if (!fs::path(m.model).is_absolute() || !m.plan.is_object() || m.model.find('\0') != std::string::npos) return std::nullopt;
  return m;
}
}  // namespace

std::optional<ModelNow> model_now(const std::string& model) {
  try {
    const ModelContent content = model_content(model, digest_memo());
    ModelNow now{content.text, 0};
    for (const auto& [path, identity] : content.files) now.bytes += identity.bytes;
    return now;
  } catch (const std::exception& e) {
    spdlog::debug("{} cannot be read: {}", model, e.what());
    return std::nullopt;
  }
}

ServedModels::ServedModels(std::string folder) : folder_(std::move(folder)) {}

std::string ServedModels::default_folder(const std::string& socket_path) {
  const auto root = user_cache_root();
  if (!root) return {};
  // The host too: a home folder on a shared file system serves every node, each with its own daemon.
  const std::string who = host_name() + "\n" + socket_path;
  return (fs::path(*root) / "serve" / hex64(xxh64(who.data(), who.size()))).string();
}

std::vector<ServedModel> ServedModels::load() {
  std::lock_guard lock(mutex_);
  loaded_ = true;
  std::vector<ServedModel> out;
  if (folder_.empty()) return out;
  const fs::path file = fs::path(folder_) / kFileName;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return out;
  const auto set_aside = [&](const std::string& why) {
    const fs::path aside = file.string() + ".set-aside";
    std::error_code ignored;
    fs::rename(file, aside, ignored);
    spdlog::warn("the daemon's memory of the models it served ({}) {}: set aside as {}; it remembers anew from now on", file.string(), why,
                 aside.string());
  };
  json j;
  try {
    if (!check_private_dir(folder_, folder_hint())) return out;
    const FileToRead opened = open_file_to_read(file.string(), "the daemon's memory", folder_hint(), /*follow_symlinks=*/false);
    if (opened.status.st_uid != ::getuid() || (opened.status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      spdlog::warn("the daemon's memory {} is not this user's own file (owner uid {}, mode {:o}): not read", file.string(), opened.status.st_uid,
                   opened.status.st_mode & 07777);
      return out;
    }
    j = json::parse(read_whole_file(file.string(), "the daemon's memory", folder_hint(), kMostBytes));
  } catch (const json::exception&) {
    set_aside("is not JSON");
    return out;
  } catch (const std::exception& e) {
    spdlog::warn("the daemon's memory of the models it served is not read: {}", Error::from(e).what());
    return out;
  }
  if (!j.is_object() || j.value("ortfleet_served", 0) != kFormat || !j.contains("models") || !j.at("models").is_array() ||
      j.value("xxh64", "") != checksum(j.at("models"))) {
    set_aside("is damaged or of another version (its checksum does not hold)");
    return out;
  }
  for (const auto& entry : j.at("models")) {
    if (auto m = from_json(entry)) {
      entries_.emplace(key_of(m->device, m->plan), *m);
      out.push_back(std::move(*m));
    }
  }
  std::sort(out.begin(), out.end(), [](const ServedModel& a, const ServedModel& b) { return a.last_used_s > b.last_used_s; });
  return out;
}

void ServedModels::note(const LocalStartPlan& served, bool only_if_new, double idle_s) {
  if (folder_.empty() || served.devices.size() != 1 || !fs::path(served.model_path).is_absolute()) return;
  // What makes the same session again on the daemon's own runtime: its runtime is the pool's (a start
  // naming another is not served), and what it profiled or priced is no part of it.
  LocalStartPlan plan = served;
  plan.ort_library.clear();
  plan.profile_dir.clear();
  plan.price_cache_entry = false;
  const json plan_json = plan_to_json(plan);
  const std::string device = plan.devices.front().to_string();
  std::lock_guard lock(mutex_);
  const std::string key = key_of(device, plan_json);
  if (only_if_new && entries_.count(key) != 0) return;
  ServedModel& m = entries_[key];
  m = {plan.model_path, device, plan_json, "", 0, now_s() - std::max(0.0, idle_s)};
  // What its file holds now, from the digests its worker remembered as it started it (nothing is read
  // here); else taken when saved.
  try {
    if (const auto content = remembered_content(plan.model_path, digest_memo())) {
      m.content = content->text;
      for (const auto& [path, identity] : content->files) m.bytes += identity.bytes;
    }
  } catch (const std::exception&) {
    // taken when saved
  }
  dirty_ = true;
}

std::string ServedModels::save() {
  std::map<std::string, ServedModel> entries;
  {
    std::lock_guard lock(mutex_);
    if (folder_.empty() || !dirty_) return {};
    if (!loaded_) return "not saved before what was remembered was read";  // never overwrites a memory unread
    entries = entries_;
    dirty_ = false;
  }
  // Each model as its file is now (digests remembered where its workers took them: no read of an
  // unchanged model); one that cannot be read any more is forgotten.
  std::vector<ServedModel> kept;
  for (auto& [key, m] : entries) {
    if (m.content.empty()) {
      const auto now = model_now(m.model);
      if (!now) continue;
      m.content = now->content;
      m.bytes = now->bytes;
    }
    kept.push_back(m);
  }
  std::sort(kept.begin(), kept.end(), [](const ServedModel& a, const ServedModel& b) { return a.last_used_s > b.last_used_s; });
  if (kept.size() > kMaxRemembered) kept.resize(kMaxRemembered);
  json models = json::array();
  for (const auto& m : kept) models.push_back(to_json(m));
  {
    std::lock_guard lock(mutex_);
    for (const auto& m : kept) {
      // Unless a job used it again meanwhile (then its content is taken anew).
      if (auto it = entries_.find(key_of(m.device, m.plan)); it != entries_.end() && it->second.last_used_s == m.last_used_s) it->second = m;
    }
  }
  try {
    ensure_private_dir(folder_, folder_hint());
    const json file = {{"ortfleet_served", kFormat}, {"models", models}, {"xxh64", checksum(models)}};
    write_private_file(fs::path(folder_) / kFileName, file.dump(1) + "\n", /*durable=*/true);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    dirty_ = true;  // tried again at the next save
    return Error::from(e).what();
  }
  return {};
}

}  // namespace ortfleet::detail
