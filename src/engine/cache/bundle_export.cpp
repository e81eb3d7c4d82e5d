// Cache bundles, export: the verified entries of some models for some devices found (here or in the
// shared layer), held, and written into one tar with its manifest (bundle.hpp: the layout).
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/private_dir.hpp"
#include "base/unique_fd.hpp"
#include "engine/cache/bundle.hpp"
#include "engine/cache/cache_use.hpp"
#include "base/content_hash.hpp"
#include "engine/cache/file_lock.hpp"
#include "engine/cache/tar_archive.hpp"
#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// One entry found for export, held (its lock shared) until it is written.
struct Found {
  BundleEntry entry;
  std::string path;  ///< ENTRY
  std::string key;
  json manifest;     ///< ENTRY.manifest.json, parsed
  std::string manifest_text;
  std::string costs_text;  ///< ENTRY.shape-costs.json, "" when it has none
  detail::FileLock lock;
};

/// Looks the entry of `model` for `device` up in `dir` (read-only: the shared layer): fills `found` and
/// returns "" when it may be exported, else the outcome that says why not ("missing" when absent).
std::string look_up(const std::string& dir, const detail::EntryKey& k, bool read_only, const std::string& memo_dir, Found& found) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "missing";
  const auto path = detail::find_entry(dir, k.name);
  if (!path) return detail::rejection_of((fs::path(dir) / k.name).string()).empty() ? "missing" : "rejected";
  if (!read_only && !found.lock.try_lock(*path + ".lock", detail::FileLock::Mode::shared)) return "busy";
  if (!detail::rejection_of(*path).empty()) return "rejected";
  if (const std::string damage = detail::check_entry(*path, k.key, detail::EntryCheck{read_only, memo_dir}); !damage.empty()) {
    return "damaged: " + damage;
  }
  found.path = *path;
  found.key = k.key;
  found.manifest_text = detail::read_text(*path + ".manifest.json");
  found.manifest = json::parse(found.manifest_text);
  if (const auto costs = detail::identity_of(*path + ".shape-costs.json", detail::Symlinks::refuse); costs && costs->regular) {
    found.costs_text = detail::read_text(*path + ".shape-costs.json");
  }
  found.entry.name = fs::path(*path).filename().string();
  for (const auto& f : found.manifest.at("files")) found.entry.bytes += f.at("bytes").get<uint64_t>();
  if (const auto gain = detail::gain_of(*path)) found.entry.load_note = gain->text();
  return {};
}

/// The bytes of one member and its checksum, checked against `want` (the entry manifest's) for files.
struct Member {
  std::string name;
  std::string text;                          ///< small members, in memory
  std::unique_ptr<detail::MappedFile> file;  ///< graphs and weights, mapped
  std::string want_xxh64;                    ///< "" for in-memory members
  const void* data() const { return file ? file->data() : text.data(); }
  uint64_t size() const { return file ? file->size() : text.size(); }
};

/// The members of `found`, in order (each entry's companions, then its graph), with each entry's record
/// for the bundle's manifest. Checksums of files come from their manifest (checked on lookup) and are
/// checked again on the bytes written.
std::vector<Member> members_of(const std::vector<std::unique_ptr<Found>>& found, json& entries) {
  std::vector<Member> members;
  for (const auto& f : found) {
    const std::string base = detail::kMembersFolder + f->entry.name;
    std::map<std::string, std::string> file_hashes;
    for (const auto& record : f->manifest.at("files")) file_hashes[record.at("name").get<std::string>()] = record.at("xxh64").get<std::string>();
    for (const auto& suffix : detail::kCompanions) {
      Member m;
      m.name = base + suffix;
      if (suffix == ".data") {
        if (!file_hashes.count(f->entry.name + ".data")) continue;
        m.file = std::make_unique<detail::MappedFile>(f->path + ".data", /*populate=*/false, detail::Symlinks::refuse);
        m.want_xxh64 = file_hashes.at(f->entry.name + ".data");
      } else if (suffix == ".shape-costs.json") {
        if (f->costs_text.empty()) continue;
        m.text = f->costs_text;
      } else {
        m.text = f->manifest_text;
      }
      members.push_back(std::move(m));
    }
    Member graph;
    graph.name = base;
    graph.file = std::make_unique<detail::MappedFile>(f->path, /*populate=*/false, detail::Symlinks::refuse);
    graph.want_xxh64 = file_hashes.at(f->entry.name);
    members.push_back(std::move(graph));
    entries.push_back({{"name", f->entry.name},
                       {"model", f->entry.model},
                       {"key", f->key},
                       {"device_class", f->entry.device_class},
                       {"bytes", f->entry.bytes}});
  }
  return members;
}

/// Each member's name, size and checksum (of the bytes as they are now), for the bundle's manifest.
json member_list_of(const std::vector<Member>& members) {
  json member_list = json::array();
  for (const auto& m : members) {
    const std::string sum = detail::hex64(detail::xxh64(m.data(), m.size()));
    if (!m.want_xxh64.empty() && sum != m.want_xxh64) {
      throw Error(m.name + " changed while it was exported (its content hash no longer matches its manifest)", "Export again");
    }
    member_list.push_back({{"name", m.name}, {"bytes", m.size()}, {"xxh64", sum}});
  }
  return member_list;
}

/// What each device class's entries were made for, for the bundle's manifest.
json device_list_of(const std::vector<std::pair<Device, std::string>>& classes, const RunConfig& config) {
  json device_list = json::array();
  for (const auto& [device, device_class] : classes) {
    const detail::DeviceProvider& provider = detail::provider_for(device);
    json provider_options = json::object();
    for (const auto& [k, v] : provider.provider_options(config)) provider_options[k] = v;
    device_list.push_back({{"device_class", device_class},
                           {"execution_provider", provider.ort_name()},
                           {"provider_options", provider_options},
                           {"gpu_architecture", detail::device_has(device, detail::Capability::device_memory) ? json(detail::gpu_architecture(device_class)) : json(nullptr)}});
  }
  return device_list;
}

/// Whether `path` holds a cache bundle (its first member is the bundle's manifest): the only file an
/// export replaces. "" when it does, else why not.
std::string not_a_bundle(const std::string& path) {
  const detail::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  std::array<char, detail::kTarBlock> header{};
  const bool read = fd && ::read(fd.get(), header.data(), header.size()) == static_cast<ssize_t>(header.size());
  const std::string first(header.data(), ::strnlen(header.data(), 100));
  if (read && first == detail::kBundleManifest && std::memcmp(header.data() + 257, "ustar", 5) == 0) return {};
  return "is not a cache bundle";
}

/// Writes the bundle into `out`, whole or not at all; its size.
uint64_t write_bundle_file(OutputFile& out, const std::string& manifest, const std::vector<Member>& members) {
  detail::TarWriter tar(out.fd(), out.path());
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  try {
    tar.add(detail::kBundleManifest, manifest.data(), manifest.size(), now);
    for (const auto& m : members) tar.add(m.name, m.data(), m.size(), now);
    tar.finish();
  } catch (const detail::FolderNotWritable& e) {
    throw Error(e.what_failed(), "Free some space there, or write the bundle elsewhere; nothing was written");
  }
  out.add_written(tar.bytes_written());
  out.commit(/*durable=*/true);
  return tar.bytes_written();
}

}  // namespace

CacheBundle ModelCache::export_bundle(const std::vector<std::string>& models, const std::vector<Device>& devices, const RunConfig& config,
                                      const std::string& out) const {
  if (models.empty()) throw Error("no model to export", "Name the models whose cache entries the bundle should hold");
  OutputFile bundle_file(out, "the bundle", not_a_bundle);  // its path checked before any work
  const RuntimeInfo& runtime = load_runtime();
  const bool local_private = detail::check_private_dir(dir_, detail::kCacheFolderHint);
  const std::string memo_dir = local_private ? dir_ : std::string();
  const auto shared = shared_root(config);

  // One device per device class: CPU instances share entries, and GPUs of one architecture do.
  std::vector<std::pair<Device, std::string>> classes;
  for (const auto& d : devices.empty() ? std::vector<Device>{Device::cpu()} : devices) {
    const std::string c = detail::device_class(d);
    if (std::none_of(classes.begin(), classes.end(), [&](const auto& known) { return known.second == c; })) classes.emplace_back(d, c);
  }

  CacheBundle bundle;
  bundle.path = out;
  bundle.ortfleet_version = detail::ortfleet_version();
  bundle.onnxruntime_version = runtime.version;
  std::vector<std::unique_ptr<Found>> found;
  std::map<std::string, std::string> exported_keys;  // key -> "<model> for <device class>", the first that exported it
  std::vector<std::pair<std::string, std::string>> files_read;
  for (const auto& model : models) {
    validate_model_file(model);
    const std::string absolute = fs::absolute(model).lexically_normal().string();
    for (const auto& [device, device_class] : classes) {
      const detail::EntryKey k = detail::entry_key(absolute, device, config, memo_dir);
      for (const auto& [file, identity] : k.content.files) files_read.emplace_back("a file of the model " + model, file);
      auto f = std::make_unique<Found>();
      f->entry.model = absolute;
      f->entry.device_class = device_class;
      std::string outcome = local_private ? look_up(dir_, k, /*read_only=*/false, memo_dir, *f) : "missing";
      if (outcome == "missing" && shared) {
        outcome = look_up((fs::path(*shared) / "models").string(), k, /*read_only=*/true, memo_dir, *f);
        // What a start would refuse to load from the layer is not carried elsewhere either.
        if (const std::string refused = outcome.empty() ? detail::shared_entry_refusal(*shared, f->path) : ""; !refused.empty()) {
          outcome = "refused: " + refused;
        }
      }
      f->entry.outcome = outcome.empty() ? "exported" : outcome;
      const std::string which = fs::path(model).filename().string() + " for " + device_class;
      if (outcome.empty() && !exported_keys.emplace(k.key, which).second) {
        // The same entry asked for twice (a model named twice, or under two names): in the bundle once.
        f->entry.outcome = "in the bundle once, as " + exported_keys.at(k.key);
        outcome = f->entry.outcome;
      }
      bundle.entries.push_back(f->entry);
      if (outcome.empty()) found.push_back(std::move(f));
    }
  }
  for (const auto& [device, device_class] : classes) bundle.device_classes.push_back(device_class);
  if (found.empty()) {
    std::vector<std::string> names;
    for (const auto& m : models) names.push_back(fs::path(m).filename().string());
    std::string why;
    for (const auto& e : bundle.entries) why += fmt::format("{}{} for {}: {}", why.empty() ? "" : "; ", fs::path(e.model).filename().string(), e.device_class, e.outcome);
    throw Error(fmt::format("nothing to export: no verified cache entry of {} in {}{} ({})", fmt::join(names, ", "), dir_,
                            shared ? " or the shared layer " + *shared : "", why),
                "Start each model once on this machine (ortfleet start MODEL) and let its entry be made (ortfleet cache list shows it); "
                "give export the config flags those starts used");
  }

  json entries = json::array();
  const std::vector<Member> members = members_of(found, entries);
  const json member_list = member_list_of(members);
  const json device_list = device_list_of(classes, config);
  const std::string manifest = json{{"ortfleet_bundle", detail::kBundleFormat},
                                    {"ortfleet_version", bundle.ortfleet_version},
                                    {"cache_entry_format", detail::kEntryManifestVersion},
                                    {"onnxruntime_version", bundle.onnxruntime_version},
                                    {"created", utc_now()},
                                    {"host", detail::host_name()},
                                    {"devices", device_list},
                                    {"entries", entries},
                                    {"members", member_list}}
                                   .dump(1);

  refuse_overwriting({{"the bundle", out}}, files_read);
  bundle.bytes = write_bundle_file(bundle_file, manifest, members);
  return bundle;
}

}  // namespace ortfleet
