// Cache bundles, import: nothing trusted until all is checked. The bundle's manifest against this build
// and machine, its members staged privately inside the cache and checked against it and each entry's
// own manifest, then each entry published as a start publishes the entry it made (bundle.hpp: the layout).
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
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/json_errors.hpp"
#include "base/environment.hpp"
#include "base/file_reading.hpp"
#include "base/private_dir.hpp"
#include "base/unique_fd.hpp"
#include "engine/cache/bundle.hpp"
#include "engine/cache/cache_use.hpp"
#include "base/content_hash.hpp"
#include "engine/cache/file_lock.hpp"
#include "engine/cache/tar_archive.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kMostManifestBytes = uint64_t{16} << 20;
constexpr const char* kStagingPrefix = ".import-";

/// The device classes of this machine: its CPU's, and each GPU's.
std::vector<std::string> local_device_classes() {
  std::vector<std::string> classes = {detail::device_class(Device::cpu())};
  for (const auto* provider : detail::device_providers()) {
    if (provider->memory() == nullptr) continue;  // the CPU's, already there
    for (int i = 0; i < provider->device_count(); ++i) {
      const std::string c = detail::device_class(Device{provider->device_kind(), i});
      if (std::find(classes.begin(), classes.end(), c) == classes.end()) classes.push_back(c);
    }
  }
  return classes;
}

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
    throw refused(path, detail::kBundleManifest + std::string(" is not valid JSON (the bundle is damaged)"), kExportAgain);
  }
  try {
    const int format = m.j.value("ortfleet_bundle", 0);
    if (format != detail::kBundleFormat) {
      throw refused(path, format == 0 ? "it is not an ortfleet cache bundle" : fmt::format("it is a bundle of format {}, which this ortfleet does not read", format),
                    "Export it with this ortfleet build");
    }
    const std::string version = m.j.at("ortfleet_version").get<std::string>();
    const int entry_format = m.j.at("cache_entry_format").get<int>();
    if (version != detail::ortfleet_version() || entry_format != detail::kEntryManifestVersion) {
      throw refused(path, fmt::format("it was made by ortfleet {} (cache format {}); this is ortfleet {} (cache format {})", version, entry_format,
                                      detail::ortfleet_version(), detail::kEntryManifestVersion),
                    "Export it again with this ortfleet build");
    }
    const std::string ort = m.j.at("onnxruntime_version").get<std::string>();
    if (ort != runtime.version) {
      throw refused(path, fmt::format("its entries were made by ONNX Runtime {}; this ortfleet runs ONNX Runtime {} ({})", ort, runtime.version,
                                      runtime.library_path),
                    "Export it on a machine with the same ONNX Runtime, or load that one here (" + named(Setting::ort_library) + ")");
    }
    const std::vector<std::string> here = local_device_classes();
    for (const auto& e : m.j.at("entries")) {
      BundleManifest::Listed listed{e.at("name").get<std::string>(), e.at("model").get<std::string>(), e.at("key").get<std::string>(),
                                    e.at("device_class").get<std::string>()};
      if (std::find(here.begin(), here.end(), listed.device_class) == here.end()) {
        const std::string arch = detail::gpu_architecture(listed.device_class);
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
    throw refused(path, std::string(detail::kBundleManifest) + " lacks what a bundle's manifest holds (" + detail::json_error_text(e) + ")", kExportAgain);
  }
  // Every member belongs to a listed entry, and every entry has its graph and manifest.
  for (const auto& [name, size] : m.members) {
    bool belongs = false;
    for (const auto& e : m.entries) {
      const std::string base = detail::kMembersFolder + e.name;
      belongs = belongs || name == base || std::any_of(detail::kCompanions.begin(), detail::kCompanions.end(), [&](const std::string& s) { return name == base + s; });
    }
    if (!belongs) throw refused(path, "its manifest lists " + name + ", which is no file of an entry it holds", kExportAgain);
  }
  for (const auto& e : m.entries) {
    for (const std::string& needed : {detail::kMembersFolder + e.name, detail::kMembersFolder + e.name + ".manifest.json"}) {
      if (!m.members.count(needed)) throw refused(path, "its entry " + e.name + " lacks " + needed, kExportAgain);
    }
  }
  return m;
}

/// Makes the folder an import writes into: the user's private cache, or a shared layer others read
/// (folders 0755: only this user may write them, and nothing is made where another user could).
/// The folder itself must be one, not a symbolic link: an import writes only where it was told, never
/// through a link to some other folder (a link above it passes the checks only when you or root own it).
void prepare_target(const std::string& dir, bool shared_layer) {
  const std::string hint = shared_layer ? "Import the shared layer into a folder only you can write, under folders only you or root can"
                                        : detail::kCacheFolderHint;
  detail::make_dir_safely(dir, shared_layer ? 0755 : 0700, hint);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(dir, ec);
    throw Error(dir + " is a symbolic link (to " + (ec ? std::string("?") : target.string()) +
                    "): an import writes into the folder it names, never through a link",
                "Replace the link by a folder, or import into the folder it points to");
  }
}

/// Test hook: ORTFLEET_TEST_IMPORT_KILL_AT=staged (every member checked, none published) or publishing
/// (the first entry's companions renamed into place, its graph not yet) ends this process there with
/// SIGKILL, as a job killed halfway through an import would end. Tests only.
void test_kill_point(const char* point) {
  const auto setting = detail::env_value(detail::EnvVar::test_import_kill_at);
  const char* at = setting ? setting->c_str() : nullptr;
  if (at != nullptr && std::strcmp(at, point) == 0) ::raise(SIGKILL);
}

/// A private folder inside the cache for one import, removed with what is left in it when it goes.
class Staging {
 public:
  explicit Staging(const std::string& dir) {
    // Named after this host and process: a sweep removes only its own host's folders of dead imports
    // (a cache on a shared home is written from many nodes).
    std::string pattern = (fs::path(dir) / (std::string(kStagingPrefix) + detail::host_name() + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
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
    if (!first || first->name != detail::kBundleManifest || (first->type != '0' && first->type != '\0')) {
      throw refused(path, "it is not an ortfleet cache bundle (its first member is not " + std::string(detail::kBundleManifest) + ")",
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
      const json entry_manifest = json::parse(detail::read_text(staged_manifest.string()));
      if (entry_manifest.value("ortfleet_cache_entry", 0) != detail::kEntryManifestVersion || !entry_manifest.value("verified", false) ||
          entry_manifest.at("key").get<std::string>() != e.key) {
        throw refused(path, "the manifest of " + e.name + " is of another version or key, or was never verified", kExportAgain);
      }
      std::set<std::string> covered;
      for (const auto& f : entry_manifest.at("files")) {
        const std::string name = f.at("name").get<std::string>();
        const auto member = manifest.members.find(detail::kMembersFolder + name);
        if ((name != e.name && name != e.name + ".data") || member == manifest.members.end() || member->second.first != f.at("bytes").get<uint64_t>() ||
            member->second.second != f.at("xxh64").get<std::string>()) {
          throw refused(path, "the manifest of " + e.name + " does not vouch for the files the bundle carries (" + name + ")", kExportAgain);
        }
        covered.insert(name);
      }
      if (!covered.count(e.name) || (manifest.members.count(detail::kMembersFolder + e.name + ".data") && !covered.count(e.name + ".data"))) {
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
    const auto m = manifest.members.find(detail::kMembersFolder + e.name + suffix);
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
      for (const std::string& suffix : detail::kCompanions) {  // the manifest last of the companions, the graph after it
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

/// The bundle file, opened for reading: only a regular file (a pipe, a device, a socket or a folder is
/// refused before it is opened for reading, where a pipe without a writer would block).
detail::UniqueFd open_bundle(const std::string& path) {
  return std::move(detail::open_file_to_read(path, "the bundle", "Give the file `ortfleet cache export` wrote; ortfleet reads bundles only from files").fd);
}

}  // namespace

namespace detail {
void sweep_import_staging(const std::string& dir) {
  const std::string mine = std::string(kStagingPrefix) + detail::host_name() + "-";
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
  detail::UniqueFd fd = open_bundle(path);
  struct stat st {};
  ::fstat(fd.get(), &st);
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
