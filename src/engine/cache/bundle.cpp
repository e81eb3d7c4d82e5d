// Cache bundles: ModelCache::export_bundle and ModelCache::import_bundle (ortfleet/engine/cache.hpp).
//
// A bundle is a POSIX tar: ortfleet-bundle.json first (the versions, the devices, the entries and every
// member's size and XXH64), then per entry models/ENTRY, models/ENTRY.data, models/ENTRY.manifest.json
// and models/ENTRY.shape-costs.json (those it has), so that `tar tvf` lists it and `tar xf` into a
// folder gives a cache layout. Import trusts none of it until all of it is checked: the members are
// written into a private staging folder inside the cache, checked against the bundle's manifest and
// each entry's own manifest, and only then published one entry at a time, the way a start publishes
// the entry it made (under the entry's lock, the graph renamed into place last).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/private_dir.hpp"
#include "base/unique_fd.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/cache/content_hash.hpp"
#include "engine/cache/file_lock.hpp"
#include "engine/cache/tar_archive.hpp"
#include "engine/files/mapped_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kBundleFormat = 1;
constexpr const char* kBundleManifest = "ortfleet-bundle.json";
constexpr const char* kMembersFolder = "models/";
constexpr uint64_t kMostManifestBytes = uint64_t{16} << 20;
constexpr const char* kStagingPrefix = ".import-";

/// What an entry may carry beside its graph, in the order they are written and published (the graph last).
const std::vector<std::string> kCompanions = {".data", ".shape-costs.json", ".manifest.json"};

const char* ortfleet_version() {
#ifdef ORTFLEET_VERSION
  return ORTFLEET_VERSION;
#else
  return "unknown";
#endif
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

std::string gpu_architecture(const std::string& device_class) {
  return device_class.rfind("cuda-", 0) == 0 ? device_class.substr(5) : std::string();
}

/// The device classes of this machine: its CPU's, and each GPU's.
std::vector<std::string> local_device_classes() {
  std::vector<std::string> classes = {detail::device_class(Device::cpu())};
  for (int i = 0; i < gpu_count(); ++i) {
    const std::string c = detail::device_class(Device::cuda(i));
    if (std::find(classes.begin(), classes.end(), c) == classes.end()) classes.push_back(c);
  }
  return classes;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------------------------------
// Export

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
  found.manifest_text = read_text(*path + ".manifest.json");
  found.manifest = json::parse(found.manifest_text);
  if (const auto costs = detail::identity_of(*path + ".shape-costs.json", detail::Symlinks::refuse); costs && costs->regular) {
    found.costs_text = read_text(*path + ".shape-costs.json");
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
    const std::string base = kMembersFolder + f->entry.name;
    std::map<std::string, std::string> file_hashes;
    for (const auto& record : f->manifest.at("files")) file_hashes[record.at("name").get<std::string>()] = record.at("xxh64").get<std::string>();
    for (const auto& suffix : kCompanions) {
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
    json provider_options = json::object();
    if (device.is_gpu()) {
      for (const auto& [k, v] : config.cuda.provider_options()) provider_options[k] = v;
    }
    device_list.push_back({{"device_class", device_class},
                           {"execution_provider", device.is_gpu() ? "CUDAExecutionProvider" : "CPUExecutionProvider"},
                           {"provider_options", provider_options},
                           {"gpu_architecture", device.is_gpu() ? json(gpu_architecture(device_class)) : json(nullptr)}});
  }
  return device_list;
}

/// Writes the bundle to `out`, whole or not at all.
void write_bundle_file(const std::string& out, const std::string& manifest, const std::vector<Member>& members) {
  // Written under another name, flushed, then renamed over `out`.
  const std::string partial = out + ".partial-" + std::to_string(::getpid());
  ::unlink(partial.c_str());
  detail::UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) {
    throw Error("cannot write " + out + ": " + std::strerror(errno), errno == ENOENT ? "The folder does not exist" : "Check the folder");
  }
  try {
    detail::TarWriter tar(fd.get(), out);
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    tar.add(kBundleManifest, manifest.data(), manifest.size(), now);
    for (const auto& m : members) tar.add(m.name, m.data(), m.size(), now);
    tar.finish();
    if (::fsync(fd.get()) != 0) throw Error("cannot write " + out + ": " + std::strerror(errno), "Check the disk");
    fd = detail::UniqueFd();
    if (::rename(partial.c_str(), out.c_str()) != 0) throw Error("cannot write " + out + ": " + std::strerror(errno), "Check the folder");
  } catch (...) {
    ::unlink(partial.c_str());
    throw;
  }
}

}  // namespace

CacheBundle ModelCache::export_bundle(const std::vector<std::string>& models, const std::vector<Device>& devices, const RunConfig& config,
                                      const std::string& out) const {
  if (models.empty()) throw Error("no model to export", "Name the models whose cache entries the bundle should hold");
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
  bundle.ortfleet_version = ortfleet_version();
  bundle.onnxruntime_version = runtime.version;
  std::vector<std::unique_ptr<Found>> found;
  std::set<std::string> keys;
  for (const auto& model : models) {
    validate_model_file(model);
    const std::string absolute = fs::absolute(model).lexically_normal().string();
    for (const auto& [device, device_class] : classes) {
      const detail::EntryKey k = detail::entry_key(absolute, device, config, memo_dir);
      auto f = std::make_unique<Found>();
      f->entry.model = absolute;
      f->entry.device_class = device_class;
      std::string outcome = local_private ? look_up(dir_, k, /*read_only=*/false, memo_dir, *f) : "missing";
      if (outcome == "missing" && shared) {
        outcome = look_up((fs::path(*shared) / "models").string(), k, /*read_only=*/true, memo_dir, *f);
      }
      f->entry.outcome = outcome.empty() ? "exported" : outcome;
      bundle.entries.push_back(f->entry);
      if (outcome.empty() && keys.insert(k.key).second) found.push_back(std::move(f));
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
  const std::string manifest = json{{"ortfleet_bundle", kBundleFormat},
                                    {"ortfleet_version", bundle.ortfleet_version},
                                    {"cache_entry_format", detail::kEntryManifestVersion},
                                    {"onnxruntime_version", bundle.onnxruntime_version},
                                    {"created", utc_now()},
                                    {"host", host_name()},
                                    {"devices", device_list},
                                    {"entries", entries},
                                    {"members", member_list}}
                                   .dump(1);

  write_bundle_file(out, manifest, members);
  bundle.bytes = fs::file_size(out);
  return bundle;
}

// ---------------------------------------------------------------------------------------------------
// Import

namespace {

/// A refusal: one line naming the bundle, what is wrong, and what to do.
class Refused : public Error {
 public:
  using Error::Error;
};
Refused refused(const std::string& path, const std::string& what, const std::string& hint) {
  return Refused("refused the bundle " + path + ": " + what, hint);
}
constexpr const char* kExportAgain = "Export it again (ortfleet cache export) and copy it whole; nothing was imported";

/// What the bundle's manifest says, checked against this build and machine.
struct BundleManifest {
  json j;
  struct Listed {
    std::string name;
    std::string model;
    std::string key;
    std::string device_class;
  };
  std::vector<Listed> entries;
  std::map<std::string, std::pair<uint64_t, std::string>> members;  // name -> bytes, xxh64
};

/// Whether a member name could leave the staging folder, or is no plain name.
std::string unsafe_name(const std::string& name) {
  if (name.empty()) return "an empty name";
  if (name.front() == '/') return "an absolute path";
  for (const auto& part : fs::path(name)) {
    if (part == "..") return "a path that climbs out of the cache (..)";
  }
  if (name.find('\0') != std::string::npos || name.find('\\') != std::string::npos) return "a name with a NUL or a backslash";
  return {};
}

/// Whether `name` is a plain entry name that `key` would give (<stem>-<xxh64 of key>.onnx|.ort).
bool entry_name_fits_key(const std::string& name, const std::string& key) {
  if (name.empty() || name.size() > 200 || name.front() == '.' || name.find('/') != std::string::npos || !unsafe_name(name).empty()) {
    return false;
  }
  const std::string extension = key.find("|format=ort") != std::string::npos ? ".ort" : ".onnx";
  const std::string suffix = "-" + detail::hex64(detail::xxh64(key.data(), key.size())) + extension;
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

BundleManifest check_manifest(const std::string& path, const std::string& text, const RuntimeInfo& runtime) {
  BundleManifest m;
  try {
    m.j = json::parse(text);
  } catch (const std::exception&) {
    throw refused(path, kBundleManifest + std::string(" is not valid JSON (the bundle is damaged)"), kExportAgain);
  }
  try {
    const int format = m.j.value("ortfleet_bundle", 0);
    if (format != kBundleFormat) {
      throw refused(path, format == 0 ? "it is not an ortfleet cache bundle" : fmt::format("it is a bundle of format {}, which this ortfleet does not read", format),
                    "Export it with this ortfleet build");
    }
    const std::string version = m.j.at("ortfleet_version").get<std::string>();
    const int entry_format = m.j.at("cache_entry_format").get<int>();
    if (version != ortfleet_version() || entry_format != detail::kEntryManifestVersion) {
      throw refused(path, fmt::format("it was made by ortfleet {} (cache format {}); this is ortfleet {} (cache format {})", version, entry_format,
                                      ortfleet_version(), detail::kEntryManifestVersion),
                    "Export it again with this ortfleet build");
    }
    const std::string ort = m.j.at("onnxruntime_version").get<std::string>();
    if (ort != runtime.version) {
      throw refused(path, fmt::format("its entries were made by ONNX Runtime {}; this ortfleet runs ONNX Runtime {} ({})", ort, runtime.version,
                                      runtime.library_path),
                    "Export it on a machine with the same ONNX Runtime, or load that one here (" + runtime_choice_words().option + ")");
    }
    const std::vector<std::string> here = local_device_classes();
    for (const auto& e : m.j.at("entries")) {
      BundleManifest::Listed listed{e.at("name").get<std::string>(), e.at("model").get<std::string>(), e.at("key").get<std::string>(),
                                    e.at("device_class").get<std::string>()};
      if (std::find(here.begin(), here.end(), listed.device_class) == here.end()) {
        const std::string arch = gpu_architecture(listed.device_class);
        throw refused(path, fmt::format("its entry {} was made for {}{}; this machine is {}", listed.name, listed.device_class,
                                        arch.empty() ? " (another CPU: an optimised CPU graph uses the instructions of the CPU it was made on)"
                                                     : " (GPU architecture " + arch + ")",
                                        fmt::join(here, " and ")),
                      "Export it on a machine of this kind (same GPU architecture, or same CPU), or let the first start here make the entry");
      }
      if (!entry_name_fits_key(listed.name, listed.key)) {
        throw refused(path, "its entry name " + listed.name + " is not the name its key gives", kExportAgain);
      }
      const std::string marks = "|ort=" + runtime.version + "|device=" + listed.device_class + "|";
      if (listed.key.find(marks) == std::string::npos) {
        throw refused(path, "the key of " + listed.name + " names another ONNX Runtime or device than the bundle does", kExportAgain);
      }
      for (const auto& other : m.entries) {
        if (other.name == listed.name) throw refused(path, "it lists the entry " + listed.name + " twice", kExportAgain);
      }
      m.entries.push_back(std::move(listed));
    }
    if (m.entries.empty()) throw refused(path, "it holds no entry", "Export the models whose entries you want");
    for (const auto& member : m.j.at("members")) {
      const std::string name = member.at("name").get<std::string>();
      if (!m.members.emplace(name, std::make_pair(member.at("bytes").get<uint64_t>(), member.at("xxh64").get<std::string>())).second) {
        throw refused(path, "its manifest lists the member " + name + " twice", kExportAgain);
      }
    }
  } catch (const Refused&) {
    throw;
  } catch (const std::exception& e) {
    throw refused(path, std::string(kBundleManifest) + " lacks what a bundle's manifest holds (" + e.what() + ")", kExportAgain);
  }
  // Every member belongs to a listed entry, and every entry has its graph and manifest.
  for (const auto& [name, size] : m.members) {
    bool belongs = false;
    for (const auto& e : m.entries) {
      const std::string base = kMembersFolder + e.name;
      belongs = belongs || name == base || std::any_of(kCompanions.begin(), kCompanions.end(), [&](const std::string& s) { return name == base + s; });
    }
    if (!belongs) throw refused(path, "its manifest lists " + name + ", which is no file of an entry it holds", kExportAgain);
  }
  for (const auto& e : m.entries) {
    for (const std::string& needed : {kMembersFolder + e.name, kMembersFolder + e.name + ".manifest.json"}) {
      if (!m.members.count(needed)) throw refused(path, "its entry " + e.name + " lacks " + needed, kExportAgain);
    }
  }
  return m;
}

/// Makes the folder an import writes into: the user's private cache, or a shared layer others read.
void prepare_target(const std::string& dir, bool shared_layer) {
  if (!shared_layer) {
    detail::ensure_private_dir(dir, detail::kCacheFolderHint);
    return;
  }
  std::error_code ec;
  for (const fs::path& folder : {fs::path(dir).parent_path(), fs::path(dir)}) {
    if (!fs::exists(folder, ec)) {
      if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
        throw Error("cannot make " + folder.string() + ": " + std::strerror(errno), "Make the shared layer's folder first");
      }
      ::chmod(folder.c_str(), 0755);  // whatever the umask: other users read it
    }
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error(folder.string() + " is not a folder", "Give a folder for the shared layer");
    if (st.st_uid != ::getuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      throw Error("the shared layer's folder " + folder.string() + " must be yours and writable by nobody else",
                  "chmod go-w it, or import as its owner");
    }
  }
}

/// Test hook: ORTFLEET_TEST_IMPORT_KILL_AT=staged (every member checked, none published) or publishing
/// (the first entry's companions renamed into place, its graph not yet) ends this process there with
/// SIGKILL, as a job killed halfway through an import would end. Tests only.
void test_kill_point(const char* point) {
  const char* at = std::getenv("ORTFLEET_TEST_IMPORT_KILL_AT");
  if (at != nullptr && std::strcmp(at, point) == 0) ::raise(SIGKILL);
}

/// A private folder inside the cache for one import, removed with what is left in it when it goes.
class Staging {
 public:
  explicit Staging(const std::string& dir) {
    // Named after this host and process: a sweep removes only its own host's folders of dead imports
    // (a cache on a shared home is written from many nodes).
    std::string pattern = (fs::path(dir) / (std::string(kStagingPrefix) + host_name() + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw detail::FolderNotWritable("cannot make a staging folder in " + dir + ": " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~Staging() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};


/// The bundle's manifest, its first member, checked against this build and runtime: nothing is
/// written before the bundle says it belongs here.
BundleManifest read_bundle_manifest(detail::TarReader& tar, const std::string& path, const RuntimeInfo& runtime) {
  BundleManifest manifest;
  try {
    const auto first = tar.next();
    if (!first || first->name != kBundleManifest || (first->type != '0' && first->type != '\0')) {
      throw refused(path, "it is not an ortfleet cache bundle (its first member is not " + std::string(kBundleManifest) + ")",
                    "Give the file `ortfleet cache export` wrote");
    }
    manifest = check_manifest(path, tar.read_small(kMostManifestBytes), runtime);
  } catch (const Refused&) {
    throw;
  } catch (const Error& e) {
    throw refused(path, "it is not an ortfleet cache bundle, or it is damaged (" + e.what_failed() + ")", kExportAgain);
  }

  return manifest;
}

/// Every member of the bundle copied into `staging` and checked (plain files, safe names, listed once in
/// the manifest, of its size and checksum); a member the manifest lists that the bundle lacks is refused.
void stage_members(detail::TarReader& tar, const std::string& path, const BundleManifest& manifest, const Staging& staging, mode_t file_mode,
                   const std::string& dir) {
  std::set<std::string> seen;
  try {
    while (const auto member = tar.next()) {
      const std::string where = fmt::format("member {} ({})", member->index, member->name);
      if (member->type == '1' || member->type == '2') {
        throw refused(path, fmt::format("{} is a {} link to {}: a bundle holds plain files only", where, member->type == '1' ? "hard" : "symbolic", member->link),
                      kExportAgain);
      }
      if (member->type == '5') throw refused(path, where + " is a folder: a bundle holds plain files only", kExportAgain);
      if (member->type != '0' && member->type != '\0') {
        throw refused(path, fmt::format("{} is of tar type '{}', not a plain file", where, member->type), kExportAgain);
      }
      if (const std::string why = unsafe_name(member->name); !why.empty()) {
        throw refused(path, where + " has " + why + ": it would escape the cache", "Never import a bundle that was edited by hand; " + std::string(kExportAgain));
      }
      const auto listed = manifest.members.find(member->name);
      if (listed == manifest.members.end()) throw refused(path, where + " is not in its manifest", kExportAgain);
      if (!seen.insert(member->name).second) throw refused(path, where + " comes twice", kExportAgain);
      if (member->size != listed->second.first) {
        throw refused(path, fmt::format("{} has {} bytes, its manifest says {}", where, member->size, listed->second.first), kExportAgain);
      }
      const std::string staged = (staging.path() / fs::path(member->name).filename()).string();
      {
        detail::UniqueFd out(::open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (!out) throw detail::FolderNotWritable("cannot write " + staged + ": " + std::strerror(errno));
        tar.copy_to(out.get(), staged);
        if (::fchmod(out.get(), file_mode) != 0 || ::fsync(out.get()) != 0) {
          throw detail::FolderNotWritable("cannot write " + staged + ": " + std::strerror(errno));
        }
      }
      uint64_t sum = 0;
      if (member->size > 0) {
        const detail::MappedFile staged_file(staged, /*populate=*/false, detail::Symlinks::refuse);
        sum = detail::xxh64(staged_file.data(), staged_file.size());
      } else {
        sum = detail::xxh64("", 0);
      }
      if (detail::hex64(sum) != listed->second.second) throw refused(path, where + " does not match its checksum: the bundle is damaged", kExportAgain);
    }
  } catch (const detail::FolderNotWritable& e) {
    throw Error("could not import " + path + ": " + e.what_failed(), "Free some space in the cache's folder " + dir + "; nothing was imported");
  } catch (const Refused&) {
    throw;
  } catch (const Error& e) {
    throw refused(path, e.what_failed(), kExportAgain);
  }
  for (const auto& [name, size] : manifest.members) {
    if (!seen.count(name)) throw refused(path, "it lacks " + name + ", which its manifest lists (it is truncated)", kExportAgain);
  }
}

/// Each entry's own manifest must vouch for exactly the files the bundle carries.
void check_entry_manifests(const std::string& path, const BundleManifest& manifest, const Staging& staging) {
  for (const auto& e : manifest.entries) {
    const fs::path staged_manifest = staging.path() / (e.name + ".manifest.json");
    try {
      const json entry_manifest = json::parse(read_text(staged_manifest.string()));
      if (entry_manifest.value("ortfleet_cache_entry", 0) != detail::kEntryManifestVersion || !entry_manifest.value("verified", false) ||
          entry_manifest.at("key").get<std::string>() != e.key) {
        throw refused(path, "the manifest of " + e.name + " is of another version or key, or was never verified", kExportAgain);
      }
      std::set<std::string> covered;
      for (const auto& f : entry_manifest.at("files")) {
        const std::string name = f.at("name").get<std::string>();
        const auto member = manifest.members.find(kMembersFolder + name);
        if ((name != e.name && name != e.name + ".data") || member == manifest.members.end() || member->second.first != f.at("bytes").get<uint64_t>() ||
            member->second.second != f.at("xxh64").get<std::string>()) {
          throw refused(path, "the manifest of " + e.name + " does not vouch for the files the bundle carries (" + name + ")", kExportAgain);
        }
        covered.insert(name);
      }
      if (!covered.count(e.name) || (manifest.members.count(kMembersFolder + e.name + ".data") && !covered.count(e.name + ".data"))) {
        throw refused(path, "the manifest of " + e.name + " does not cover all of its files", kExportAgain);
      }
    } catch (const Refused&) {
      throw;
    } catch (const std::exception& ex) {
      throw refused(path, "the manifest of " + e.name + " is unreadable (" + ex.what() + ")", kExportAgain);
    }
  }

}

/// Publishes the staged entry `e` in `dir`, as a start that made it would (companions first, the graph
/// last), unless it is in use, rejected here or already here.
BundleEntry publish_entry(const BundleManifest::Listed& e, const BundleManifest& manifest, const Staging& staging, const std::string& dir,
                          const std::string& path) {
  BundleEntry out;
  out.model = e.model;
  out.device_class = e.device_class;
  out.name = e.name;
  for (const std::string& suffix : {std::string(), std::string(".data")}) {
    const auto m = manifest.members.find(kMembersFolder + e.name + suffix);
    if (m != manifest.members.end()) out.bytes += m->second.first;
  }
  const std::string entry = (fs::path(dir) / e.name).string();
  detail::FileLock lock;
  try {
    if (!lock.try_lock(entry + ".lock", detail::FileLock::Mode::exclusive)) {
      out.outcome = "in use";
    } else if (!detail::rejection_of(entry).empty()) {
      out.outcome = "rejected here";
    } else if (detail::identity_of(entry, detail::Symlinks::refuse) && detail::check_entry(entry, e.key).empty()) {
      out.outcome = "already here";
    } else {
      out.outcome = detail::identity_of(entry, detail::Symlinks::refuse) ? "replaced" : "added";
      detail::remove_entry_files(entry);
      for (const std::string& suffix : kCompanions) {  // the manifest last of the companions, the graph after it
        const fs::path from = staging.path() / (e.name + suffix);
        if (!fs::exists(from)) continue;
        if (::rename(from.c_str(), (entry + suffix).c_str()) != 0) {
          throw detail::FolderNotWritable("cannot publish " + entry + suffix + ": " + std::strerror(errno));
        }
      }
      test_kill_point("publishing");
      if (::rename((staging.path() / e.name).c_str(), entry.c_str()) != 0) {
        throw detail::FolderNotWritable("cannot publish " + entry + ": " + std::strerror(errno));
      }
      detail::sync_folder(dir);
    }
  } catch (const detail::FolderNotWritable& ex) {
    throw Error("could not import " + path + ": " + ex.what_failed(),
                "Check the cache's folder " + dir + "; the entries listed before this one were imported whole, none partly");
  }
  if (const auto gain = detail::gain_of(entry); gain && out.outcome != "in use" && out.outcome != "rejected here") out.load_note = gain->text();
  return out;
}

}  // namespace

namespace detail {
void sweep_import_staging(const std::string& dir) {
  const std::string mine = std::string(kStagingPrefix) + host_name() + "-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(mine, 0) != 0) continue;  // another host's import, or not a staging folder
    const std::string rest = name.substr(mine.size());  // PID-XXXXXX
    int pid = 0;
    try {
      pid = std::stoi(rest.substr(0, rest.find('-')));
    } catch (const std::exception&) {
      continue;
    }
    if (pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM)) continue;  // still importing
    fs::remove_all(e.path(), ec);
  }
}
}  // namespace detail

CacheBundle ModelCache::import_bundle(const std::string& path, bool shared_layer) const {
  const RuntimeInfo& runtime = load_runtime();
  detail::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw Error("cannot open the bundle " + path + ": " + std::strerror(errno), "Check the path");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) throw Error("the bundle " + path + " is not a file", "Give the file `ortfleet cache export` wrote");
  detail::TarReader tar(fd.get(), path);

  const BundleManifest manifest = read_bundle_manifest(tar, path, runtime);

  prepare_target(dir_, shared_layer);
  detail::sweep_import_staging(dir_);
  const Staging staging(dir_);
  const mode_t file_mode = shared_layer ? 0644 : 0600;
  stage_members(tar, path, manifest, staging, file_mode, dir_);
  check_entry_manifests(path, manifest, staging);

  test_kill_point("staged");
  // Everything checked: publish entry by entry, as a start that made it would.
  CacheBundle bundle;
  bundle.path = path;
  bundle.bytes = static_cast<uint64_t>(st.st_size);
  bundle.ortfleet_version = manifest.j.value("ortfleet_version", "");
  bundle.onnxruntime_version = manifest.j.value("onnxruntime_version", "");
  for (const auto& e : manifest.entries) {
    if (std::find(bundle.device_classes.begin(), bundle.device_classes.end(), e.device_class) == bundle.device_classes.end()) {
      bundle.device_classes.push_back(e.device_class);
    }
  }
  for (const auto& e : manifest.entries) bundle.entries.push_back(publish_entry(e, manifest, staging, dir_, path));
  return bundle;
}

}  // namespace ortfleet
