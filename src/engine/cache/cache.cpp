#include "ortfleet/engine/cache.hpp"

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "base/system_paths.hpp"
#include "engine/cache/cache_use.hpp"
#include "base/content_hash.hpp"
#include "engine/cache/file_lock.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
uint64_t hash_text(const std::string& text) { return detail::xxh64(text.data(), text.size()); }
}  // namespace

namespace detail {
std::string device_class(const Device& device) { return provider_for(device).device_class(device); }

std::string entry_name(const std::string& model_path, const std::string& key, ModelCacheFormat format) {
  // ONNX Runtime tells the formats apart by this extension, from a path or from the bytes' header.
  const char* extension = format == ModelCacheFormat::ort ? ".ort" : ".onnx";
  // The stem is only for people (the key's hash names the entry): cut to 48 bytes, so that every file of
  // an entry fits a bundle's 100-byte member names ("models/" + name + ".shape-costs.json").
  constexpr size_t kStemBytes = 48;
  return fs::path(model_path).stem().string().substr(0, kStemBytes) + "-" + hex64(hash_text(key)) + extension;
}

std::string cache_key_text(const std::string& model_content, const Device& device, const RunConfig& config) {
  const RuntimeInfo* rt = loaded_runtime();
  std::string key = model_content + "|ort=" + (rt ? rt->version : "?") + "|device=" + device_class(device) +
                    "|opt=" + to_string(config.session.graph_optimization);
  key += provider_stack(device, config).cache_mark(config);
  if (config.session.model_cache_format != ModelCacheFormat::onnx) key += "|format=" + to_string(config.session.model_cache_format);
  for (const auto& [k, v] : config.session.config_entries) key += "|" + k + "=" + v;
  return key;
}
}  // namespace detail

std::optional<std::string> ModelCache::find_default_root() { return detail::user_cache_root(); }

std::string ModelCache::default_root() {
  if (auto root = find_default_root()) return *root;
  throw Error("no folder for the model cache: ORTFLEET_CACHE, XDG_CACHE_HOME and HOME are all unset",
              "Set ORTFLEET_CACHE to a folder only you can write (ortfleet makes it with mode 0700)");
}

ModelCache::ModelCache(std::string dir) : dir_(dir.empty() ? (fs::path(default_root()) / "models").string() : std::move(dir)) {}

std::string ModelCache::key_text(const std::string& model_path, const Device& device, const RunConfig& config) const {
  // Remembered digests are read only from a folder no other user can write.
  const bool private_dir = detail::check_private_dir(dir_, detail::kCacheFolderHint);
  return detail::entry_key(model_path, device, config, private_dir ? dir_ : std::string()).key;
}

std::string ModelCache::entry_path(const std::string& model_path, const Device& device, const RunConfig& config) const {
  const bool private_dir = detail::check_private_dir(dir_, detail::kCacheFolderHint);
  return (fs::path(dir_) / detail::entry_key(model_path, device, config, private_dir ? dir_ : std::string()).name).string();
}

namespace {
/// A name the cache gives: "<model>-<16 hex digits>.onnx" or ".ort" (an entry), those followed by more
/// (its weights, lock, manifest, an unfinished write), and "<model>-<16 hex digits>.digests.json".
bool is_cache_file_name(const std::string& name) {
  for (const char* kind : {".onnx", ".ort", ".digests.json"}) {
    for (auto at = name.find(kind); at != std::string::npos; at = name.find(kind, at + 1)) {
      const bool named = at > 17 && name[at - 17] == '-' && name.find_first_not_of("0123456789abcdef", at - 16) == at;
      const bool whole = std::string_view(kind) != ".digests.json" || at + std::strlen(kind) == name.size();
      if (named && whole) return true;
    }
  }
  return false;
}
}  // namespace

std::optional<std::string> ModelCache::shared_root(const RunConfig& config) {
  if (!config.session.model_cache_shared.empty()) return config.session.model_cache_shared;
  return detail::env_value(detail::EnvVar::cache_shared);
}

namespace {
/// The user's own cache folder when it is private, where the content hashes of a shared layer's files
/// are remembered; "" when there is none.
std::string local_memo_dir() {
  try {
    const ModelCache local;
    return detail::check_private_dir(local.dir(), detail::kCacheFolderHint) ? local.dir() : std::string();
  } catch (const std::exception&) {
    return {};
  }
}

/// Why a start would skip the shared layer's entry `entry` ("" when it would use it): the checks a start makes.
std::string why_a_start_skips(const std::string& layer, const std::string& entry, const std::string& memo_dir) {
  if (std::string refused = detail::shared_entry_refusal(layer, entry); !refused.empty()) return "refused: " + refused;
  const std::string key = detail::manifest_text_of(entry, "key");
  if (const std::string damage = detail::check_entry(entry, key, detail::EntryCheck{/*read_only=*/true, memo_dir}); !damage.empty()) {
    return "skipped: " + damage;
  }
  return {};
}
}  // namespace

std::vector<CacheEntry> ModelCache::entries(bool private_folder) const {
  std::vector<CacheEntry> out;
  if (private_folder && !detail::check_private_dir(dir_, detail::kCacheFolderHint)) return out;
  const std::string layer = fs::path(dir_).parent_path().string();
  const std::string memo_dir = private_folder ? std::string() : local_memo_dir();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if ((e.path().extension() != ".onnx" && e.path().extension() != ".ort") || !is_cache_file_name(e.path().filename().string()) ||
        !e.is_regular_file(ec)) {
      continue;
    }
    uint64_t bytes = e.file_size(ec);
    const fs::path data = e.path().string() + ".data";  // the weights, stored beside the graph
    if (fs::is_regular_file(data, ec)) bytes += fs::file_size(data, ec);
    CacheEntry entry;
    entry.path = e.path().string();
    entry.bytes = bytes;
    entry.model = detail::manifest_text_of(entry.path, "model");
    if (const auto gain = detail::gain_of(entry.path)) {
      entry.load_note = gain->text();
      entry.used = gain->pays();
    }
    if (!private_folder) entry.skipped = why_a_start_skips(layer, entry.path, memo_dir);
    if (!entry.skipped.empty()) entry.used = false;
    out.push_back(std::move(entry));
  }
  return out;
}

size_t ModelCache::clear() const {
  if (!detail::check_private_dir(dir_, detail::kCacheFolderHint)) return 0;
  detail::sweep_import_staging(dir_);  // what killed imports left: nobody else removes it
  std::error_code ec;
  std::vector<std::string> names;
  // Only what the cache made ("<model>-<16 hex digits>.onnx" and the files beside it): the folder may
  // hold a user's own files (ORTFLEET_CACHE=$HOME makes it ~/models), which are never touched.
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (is_cache_file_name(e.path().filename().string())) names.push_back(e.path().filename().string());
  }
  // Entries whose lock another process holds are in use: a reader loads them, a writer makes them.
  std::vector<detail::FileLock> held;
  std::vector<std::string> in_use;
  const std::string lock_suffix = ".lock";
  for (const auto& name : names) {
    if (name.size() <= lock_suffix.size() || name.compare(name.size() - lock_suffix.size(), lock_suffix.size(), lock_suffix) != 0) continue;
    detail::FileLock lock;
    bool free = false;
    try {
      free = lock.try_lock((fs::path(dir_) / name).string(), detail::FileLock::Mode::exclusive);
    } catch (const Error&) {
      free = false;
    }
    if (free) held.push_back(std::move(lock));
    else in_use.push_back(name.substr(0, name.size() - lock_suffix.size()));
  }
  for (const auto& name : names) {
    bool keep = false;
    for (const auto& entry : in_use) keep = keep || detail::belongs_to_entry(name, entry);
    if (!keep) fs::remove_all(fs::path(dir_) / name, ec);
  }
  return in_use.size();
}

}  // namespace ortfleet
