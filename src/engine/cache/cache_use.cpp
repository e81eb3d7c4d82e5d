#include "engine/cache/cache_use.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "base/private_dir.hpp"
#include "base/unique_fd.hpp"
#include "base/content_hash.hpp"
#include "engine/cache/full_disk.hpp"
#include "engine/runtime/ort_errors.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/model_file.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// The optimised copy keeps every initializer of at least this size in a side file: ONNX Runtime then
// maps the weights instead of parsing them out of the protobuf (the transformer's 1.27 GB: 12.2 s of
// session creation on the CPU without, 4.4 s with, measured with `ortfleet start`).
constexpr const char* kExternalInitializerMinBytes = "1024";
/// The largest model (graph and weights) whose entry can be in the ORT format: FlatBuffers address
/// 2 GB, and the graph and its bookkeeping need room beside the weights.
constexpr uint64_t kOrtFormatMaxBytes = uint64_t{1900} << 20;

}  // namespace

ModelCacheFormat resolve_model_cache_format(const std::string& model, ModelCacheFormat asked) {
  if (asked != ModelCacheFormat::automatic) return asked;
  try {
    const ModelFacts facts = inspect_model(model);
    if (facts.initializer_bytes > kOrtFormatMaxBytes) return ModelCacheFormat::onnx;
    // ONNX Runtime 1.29 saves an optimised graph with control flow (If, Loop, Scan) in the ONNX
    // format with initializers its own loader then refuses ("initializer name is not unique":
    // Silero VAD v4 and v5 of the corpus, verified); its ORT format keeps the subgraphs whole.
    const bool control_flow = facts.op_counts.count("If") + facts.op_counts.count("Loop") + facts.op_counts.count("Scan") > 0;
    return facts.nodes >= kOrtFormatMinNodes || control_flow ? ModelCacheFormat::ort : ModelCacheFormat::onnx;
  } catch (const std::exception&) {
    return ModelCacheFormat::onnx;  // ONNX Runtime will say what is wrong with the model
  }
}

namespace {

std::string manifest_of(const std::string& entry) { return entry + ".manifest.json"; }
std::string rejected_of(const std::string& entry) { return entry + ".rejected.json"; }
std::string data_of(const std::string& entry) { return entry + ".data"; }

/// ONNX Runtime made the file with the umask's mode: make it 0600, and put it on disk before a
/// manifest vouches for it (a crash must not leave a sealed entry whose data never reached the disk).
void settle_written_file(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw FolderNotWritable("cannot open " + path + ": " + std::strerror(errno));
  if (::fchmod(fd.get(), 0600) != 0) throw FolderNotWritable("cannot chmod " + path + ": " + std::strerror(errno));
  if (::fsync(fd.get()) != 0) throw FolderNotWritable("cannot flush " + path + " to disk: " + std::strerror(errno));
}

/// A warning once per process and subject, later ones at debug level: many sessions of one process
/// meet the same full disk or damaged entry.
void warn_once(const std::string& subject, const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard lock(mutex);
    if (!warned.insert(subject).second) {
      spdlog::debug("{}", text);
      return;
    }
  }
  spdlog::warn("{}", text);
}

void warn_cache_not_written(const std::string& what, const std::string& why) {
  warn_once("cache not written", fmt::format("the optimised-model cache could not be written ({}); starting {} without it", why, what));
}
}  // namespace

std::string write_failure(const std::string& folder, const std::string& why) {
  // What the call said, in one short line: ONNX Runtime's text comes with source locations, C++
  // signatures, its status prefix and a newline (ort_errors.cpp); the raw text goes to the debug log.
  spdlog::debug("writing the model cache entry into {} failed: {}", folder, why);
  const std::string said = describe_ort_failure(why).cause;
  if (const std::string full = full_disk_text(folder, why); !full.empty()) return full + ": " + said;
  return fmt::format("writing the entry into {} failed: {}", folder, said);
}

EntryKey entry_key(const std::string& model, const Device& device, const RunConfig& config, const std::string& memo_dir) {
  EntryKey k;
  k.content = model_content(model, memo_dir);
  k.format = resolve_model_cache_format(model, config.session.model_cache_format);
  uint64_t model_bytes = 0;
  for (const auto& [path, id] : k.content.files) model_bytes += id.bytes;
  if (k.format == ModelCacheFormat::ort && model_bytes > kOrtFormatMaxBytes) {
    k.format = ModelCacheFormat::onnx;  // a FlatBuffer holds at most 2 GB, weights included
    spdlog::debug("{}: {} MB is too large for the ORT format; its cache entry is ONNX", model, model_bytes >> 20);
  }
  RunConfig keyed = config;
  keyed.session.model_cache_format = k.format;
  k.key = cache_key_text(k.content.text, device, keyed);
  k.name = entry_name(model, k.key, k.format);
  return k;
}

std::string layout_key(const std::string& model, const std::string& layout, const Device& device, const RunConfig& config) {
  RunConfig keyed = config;
  keyed.session.model_cache_format = resolve_model_cache_format(model, config.session.model_cache_format);
  return hex64(hash_text(cache_key_text(layout, device, keyed)));
}

bool any_entry_of_layout(const std::string& dir, const std::string& layout_key, const std::string& model, bool older_ones_may_be) {
  const std::string absolute = fs::absolute(model).lexically_normal().string();
  for (const auto& path : entry_manifests(dir)) {
    try {
      std::ifstream in(path);
      const json manifest = json::parse(in);
      const std::string recorded = manifest.value("layout_key", "");
      if (recorded == layout_key) return true;
      const std::string made_from = manifest.value("model", "");
      if (recorded.empty() && (older_ones_may_be || made_from == absolute || made_from == model)) return true;
    } catch (const std::exception&) {
      return true;  // unreadable: perhaps this model's, so the lookup reads the model to know
    }
  }
  return false;
}

bool lookup_needs_content(const std::string& model, const std::string& layout_key, const std::string& cache_dir, const RunConfig& config) {
  if (config.session.model_cache_fill == ModelCacheFill::inline_start) return true;
  if (any_entry_of_layout(cache_dir, layout_key, model, /*older_ones_may_be=*/false)) return true;
  // The shared layer cannot be taught an older entry's layout (it is never written): its older entries may be this model's.
  const auto root = ModelCache::shared_root(config);
  return root && any_entry_of_layout((fs::path(*root) / "models").string(), layout_key, model, /*older_ones_may_be=*/true);
}

std::vector<fs::path> entry_manifests(const fs::path& dir) {
  const std::string suffix = manifest_of("");
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) found.push_back(e.path());
  }
  return found;
}

std::optional<std::string> find_entry(const std::string& dir, const std::string& name) {
  const fs::path named = fs::path(dir) / name;
  if (identity_of(named.string(), Symlinks::refuse)) return named.string();
  // "<stem>-<16 hex digits>.<extension>": the same key under another stem.
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos) return std::nullopt;
  const std::string suffix = name.substr(dash);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string other = e.path().filename().string();
    if (other.size() > suffix.size() && other.compare(other.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        other.find('-') != std::string::npos && identity_of(e.path().string(), Symlinks::refuse)) {
      return e.path().string();
    }
  }
  return std::nullopt;
}

bool belongs_to_entry(const std::string& name, const std::string& entry) {
  return name == entry ||
         (name.size() > entry.size() && name.compare(0, entry.size(), entry) == 0 && name[entry.size()] == '.');
}

void remove_entry_files(const std::string& entry) {
  const fs::path path(entry);
  const std::string own = path.filename().string();
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& e : fs::directory_iterator(path.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (belongs_to_entry(name, own) && name != own + ".lock") doomed.push_back(e.path());
  }
  if (ec) throw FolderNotWritable("cannot list " + path.parent_path().string() + ": " + ec.message());
  for (const auto& p : doomed) {
    fs::remove_all(p, ec);  // a planted folder goes too, never what a symlink points to
    if (ec && ec != std::errc::no_such_file_or_directory) throw FolderNotWritable("cannot remove " + p.string() + ": " + ec.message());
  }
}

void sync_folder(const std::string& folder) {
  const UniqueFd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());  // best effort: the rename is atomic either way
}

std::string check_entry(const std::string& entry, const std::string& key, const EntryCheck& how) {
  const std::string manifest_path = manifest_of(entry);
  const auto manifest_id = identity_of(manifest_path, Symlinks::refuse);
  if (!manifest_id) return "it has no manifest";
  if (!manifest_id->regular) return "its manifest is not a regular file";
  json manifest;
  try {
    std::ifstream in(manifest_path);
    manifest = json::parse(in);
  } catch (const std::exception& e) {
    return std::string("its manifest is unreadable: ") + e.what();
  }
  const std::string own = fs::path(entry).filename().string();
  bool covers_entry = false;
  bool rehashed = false;
  DigestMemo memo(how.read_only ? how.memo_dir : std::string(), entry);
  try {
    if (manifest.value("ortfleet_cache_entry", 0) != kEntryManifestVersion) return "its manifest is of an unknown version";
    if (!manifest.value("verified", false)) return "it was never verified against the model (an older ortfleet wrote it)";
    if (manifest.at("key").get<std::string>() != key) return "its manifest was written for another model or configuration";
    for (json& file : manifest.at("files")) {
      const std::string name = file.at("name").get<std::string>();
      if (name != own && name != own + ".data") return "its manifest names a file that is not part of it (" + name + ")";
      covers_entry = covers_entry || name == own;
      const std::string path = (fs::path(entry).parent_path() / name).string();
      const auto id = identity_of(path, Symlinks::refuse);
      if (!id) return name + " is missing";
      if (!id->regular) return name + " is not a regular file";
      const uint64_t bytes = file.at("bytes").get<uint64_t>();
      if (id->bytes != bytes) return fmt::format("{} has {} bytes, its manifest says {}", name, id->bytes, bytes);
      if (remembered_hash(file, *id)) continue;  // not written to since it was sealed
      FileDigest digest;
      try {
        if (how.read_only) digest.xxh64 = memo.hash(path, *id, Symlinks::refuse);
        else digest = digest_file(path, Symlinks::refuse);
      } catch (const std::exception& e) {
        return name + " cannot be read: " + e.what();
      }
      if (hex64(digest.xxh64) != file.at("xxh64").get<std::string>()) {
        return name + " does not hold the bytes its manifest records (its content hash differs)";
      }
      if (how.read_only) continue;
      // Same bytes, new identity (the rename that published it, a copy of the cache): remember the
      // new identity so that the next start need not read the file again.
      if (digest.settled) {
        file = to_record(digest);
        file["name"] = name;
        rehashed = true;
      }
    }
  } catch (const std::exception& e) {
    return std::string("its manifest is unreadable: ") + e.what();
  }
  if (!covers_entry) return "its manifest does not cover " + own;
  memo.save();
  if (rehashed) {
    try {
      write_private_file(manifest_path, manifest.dump(1), /*durable=*/false);
    } catch (const std::exception& e) {
      spdlog::debug("could not update the manifest {}: {}", manifest_path, e.what());
    }
  }
  return {};
}

CacheUse::CacheUse(const std::string& cache_dir, const std::string& model, const Device& device, const RunConfig& config,
                   Ort::SessionOptions& options, const std::string& layout)
    : model_(model), source_(model), enabled_(true) {
  const ModelCache cache(cache_dir);
  try {
    // A local cache that cannot be made still lets the shared layer serve; an unsafe one stops here.
    std::optional<FolderNotWritable> local_unwritable;
    try {
      ensure_private_dir(cache.dir(), kCacheFolderHint);
    } catch (const FolderNotWritable& e) {
      local_unwritable = e;
    }
    const std::string memo_dir = local_unwritable ? std::string() : cache.dir();
    // The caller's layout (the model's view), else read here; none where the file cannot be read so
    // (ONNX Runtime says what is wrong with it): the lookup then reads the model, as before layouts.
    try {
      layout_key_ = layout_key(model, layout.empty() ? model_layout(model) : layout, device, config);
    } catch (const Error& e) {
      spdlog::debug("{}: no layout for the model cache's lookup ({})", model, e.what());
    }
    // A start that does not write the entry need not read a weight to learn it has none: no entry in
    // either layer was made from a model of this layout. (Where the memo already knows the model's
    // content, its key costs nothing: look it up as usual.)
    if (!layout_key_.empty() && !remembered_content(model, memo_dir) && !lookup_needs_content(model, layout_key_, cache.dir(), config)) {
      note_ = config.session.model_cache_fill == ModelCacheFill::off ? "no entry of this model, and this start writes none (model_cache_fill off)"
                                                                     : "no entry of this model yet: it is made after ready, in the background";
      return;
    }
    EntryKey k = entry_key(model, device, config, memo_dir);
    content_ = std::move(k.content);
    format_ = k.format;
    key_ = std::move(k.key);
    if (use_shared_layer(config, k.name, memo_dir, options)) return;
    if (local_unwritable) throw *local_unwritable;
    entry_ = find_entry(cache.dir(), k.name).value_or((fs::path(cache.dir()) / k.name).string());
    if (!lock_.try_lock(entry_ + ".lock", FileLock::Mode::shared)) return;  // being written: busy
    if (const std::string why = rejection_of(entry_); !why.empty()) {
      lock_.unlock();
      rejected_ = true;
      spdlog::debug("{}: not using the model cache: its entry {} was rejected ({})", model, entry_, why);
      return;
    }
    std::string damage;
    if (identity_of(entry_, Symlinks::refuse)) {
      damage = check_entry(entry_, key_);
      if (damage.empty()) {
        if (!record_layout_key()) return;  // replaced while the manifest changed hands: busy
        if (!use_checked_entry("its entry", options)) lock_.unlock();  // a hit keeps the shared lock until the session exists
        return;
      }
    }
    if (damage.empty() && config.session.model_cache_fill != ModelCacheFill::inline_start) {
      // A miss made later (in the background, by a worker that outlives nothing the job needs) or
      // never: this start loads the model as ONNX Runtime alone would.
      lock_.unlock();
      note_ = config.session.model_cache_fill == ModelCacheFill::off ? "no entry, and this start writes none (model_cache_fill off)"
                                                                     : "no entry yet: it is made after ready, in the background";
      return;
    }
    const bool writer = lock_.try_upgrade();
    if (!damage.empty()) {
      spdlog::warn("the model cache entry {} is damaged ({}); {}", entry_, damage,
                   writer ? "removing it and making it again" : "another process holds it, so this start runs without it");
    } else if (writer && identity_of(entry_, Symlinks::refuse)) {
      lock_.unlock();  // published while the lock changed hands: the next start uses it
    }
    if (!lock_.held()) return;
    remove_entry_files(entry_);
  } catch (const FolderNotWritable& e) {
    lock_.unlock();
    unwritable_ = true;
    note_ = write_failure(cache.dir(), e.what());
    warn_cache_not_written(model, note_);
    return;
  }
  partial_ = entry_ + ".partial-" + std::to_string(::getpid());
  unfinished_ = std::make_unique<RemoveOnTermination>(std::vector<std::string>{partial_, data_of(entry_), manifest_of(entry_)});
  options.SetOptimizedModelFilePath(partial_.c_str());
  if (format_ == ModelCacheFormat::ort) {
    options.AddConfigEntry("session.save_model_format", "ORT");  // the partial name does not end in .ort
    return;
  }
  // The data file is named after the final entry: the rename in commit() moves only the .onnx file.
  options.AddConfigEntry("session.optimized_model_external_initializers_file_name",
                         fs::path(data_of(entry_)).filename().c_str());
  options.AddConfigEntry("session.optimized_model_external_initializers_min_size_in_bytes", kExternalInitializerMinBytes);
}

std::string shared_layer_refusal(const std::string& root) {
  try {
    check_shared_dir(fs::path(root) / "models", root, kSharedLayerHint);
    return {};
  } catch (const Error& e) {
    return e.what_failed();
  }
}

std::string shared_entry_refusal(const std::string& root, const std::string& entry) {
  try {
    const uid_t owner = check_shared_dir(fs::path(root) / "models", root, kSharedLayerHint);
    for (const char* suffix : {"", ".data", ".manifest.json", ".shape-costs.json"}) check_shared_file(entry + suffix, owner, kSharedLayerHint);
    return {};
  } catch (const Error& e) {
    return e.what_failed();
  }
}

bool CacheUse::use_shared_layer(const RunConfig& config, const std::string& name, const std::string& memo_dir, Ort::SessionOptions& options) {
  const auto root = ModelCache::shared_root(config);
  if (!root) return false;
  const fs::path dir = fs::path(*root) / "models";
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    warn_once(*root, "the shared model cache layer " + *root + " has no models folder (is it mounted here?); using the local cache only");
    return false;
  }
  if (const std::string why = shared_layer_refusal(*root); !why.empty()) {
    warn_once(*root + why, "not using the shared model cache layer " + *root + ": " + why);
    return false;
  }
  const auto found = find_entry(dir.string(), name);
  if (!found) return false;
  std::string damage = shared_entry_refusal(*root, *found);
  if (damage.empty()) damage = check_entry(*found, key_, EntryCheck{/*read_only=*/true, memo_dir});
  if (!damage.empty()) {
    warn_once(*found + damage, fmt::format("the shared model cache entry {} is not used ({}); it is left as it is (the shared layer is read-only), "
                                  "and the local cache is used instead", *found, damage));
    return false;
  }
  entry_ = *found;
  shared_ = true;
  if (use_checked_entry("its entry in the shared layer " + *root, options)) note_ = "from the shared layer " + *root;
  return true;
}

bool CacheUse::use_checked_entry(const std::string& which, Ort::SessionOptions& options) {
  if (const auto gain = gain_of(entry_); gain && !gain->pays()) {
    no_gain_ = true;
    note_ = which + " " + gain->text() + ", so the model is loaded as it is";
    return false;
  }
  source_ = entry_;
  hit_ = true;
  use_entry_options(options);
  return true;
}

CacheUse::~CacheUse() { abandon(); }

bool CacheUse::record_layout_key() {
  if (layout_key_.empty() || manifest_text_of(entry_, "layout_key") == layout_key_) return true;
  // An entry of an older build records no layout: record this model's, so that the next start finds
  // the entry without reading the model. The manifest is written as its writer writes it (exclusive),
  // then read as a reader reads it; a writer that took the entry meanwhile made it anew.
  if (lock_.try_upgrade()) {
    try {
      std::ifstream in(manifest_of(entry_));
      json manifest = json::parse(in);
      manifest["layout_key"] = layout_key_;
      write_private_file(manifest_of(entry_), manifest.dump(1), /*durable=*/false);
    } catch (const std::exception& e) {
      spdlog::debug("could not record the layout of {} in its manifest: {}", entry_, e.what());
    }
  }
  lock_.unlock();
  if (lock_.try_lock(entry_ + ".lock", FileLock::Mode::shared) && check_entry(entry_, key_).empty()) return true;
  lock_.unlock();
  return false;
}

void CacheUse::use_entry_options(Ort::SessionOptions& options) const {
  options.SetGraphOptimizationLevel(ORT_DISABLE_ALL);
  if (format_ == ModelCacheFormat::ort) {
    options.AddConfigEntry("session.load_model_format", "ORT");
    // Mapped, not read into a heap buffer, and the weights used where they lie in the mapping
    // rather than copied out of it: the ResNet-50's cached start on the CPU took 314 ms with
    // the copies and 42 ms without (README, Cold-start floor).
    options.AddConfigEntry("session.use_memory_mapped_ort_model", "1");
    options.AddConfigEntry("session.use_ort_model_bytes_for_initializers", "1");
  }
}

std::string rejection_of(const std::string& entry) {
  const std::string path = rejected_of(entry);
  const auto id = identity_of(path, Symlinks::refuse);
  if (!id || !id->regular) return {};
  try {
    std::ifstream in(path);
    const json record = json::parse(in);
    return record.at("reason").get<std::string>();
  } catch (const std::exception& e) {
    return std::string("its record is unreadable: ") + e.what();
  }
}

void CacheUse::reject(const std::string& why) {
  const std::string text = fmt::format(
      "ortfleet's optimised copy of {} failed its check ({}); it was discarded and the model itself is used, unoptimised by the "
      "cache. Your model is not at fault: this is ortfleet's cache (entry {}, {})",
      model_, why, entry_, shared_ ? "in the read-only shared layer, left as it is" : "reason kept in " + rejected_of(entry_));
  warn_once("entry rejected", text);
  rejected_ = true;
  hit_ = false;
  source_ = model_;
  partial_.clear();
  unfinished_.reset();  // its files are removed below, or left to the process that reads them
  if (shared_) return;  // the shared layer is never written: its entry stays as it is
  try {
    if (!lock_.held() || !lock_.try_upgrade()) return;  // another process reads it: leave the files, it will find out too
    remove_entry_files(entry_);
    write_private_file(rejected_of(entry_), json{{"key", key_}, {"reason", why}}.dump(1), /*durable=*/false);
  } catch (const std::exception& e) {
    spdlog::debug("could not record the rejected model cache entry {}: {}", entry_, e.what());
  }
}

const char* CacheUse::outcome() const {
  if (!enabled_) return "off";
  if (rejected_) return "rejected";
  if (unwritable_) return "unwritable";
  if (no_gain_) return "no-gain";
  if (hit_) return "hit";
  return writing() || !note_.empty() ? "miss" : "busy";
}

std::string EntryGain::text() const {
  return fmt::format("is ready in {:.0f} ms against {:.0f} ms from the model ({} {:.0f} ms)", entry_ms, model_ms, pays() ? "saves" : "saving no more than",
                     std::max(0.0, model_ms - entry_ms));
}

std::optional<EntryGain> gain_of(const std::string& entry) {
  try {
    std::ifstream in(manifest_of(entry));
    if (!in) return std::nullopt;
    const json manifest = json::parse(in);
    if (!manifest.contains("gain")) return std::nullopt;
    const json& g = manifest.at("gain");
    EntryGain gain{g.at("model_ms").get<double>(), g.at("entry_ms").get<double>()};
    if (!(gain.model_ms > 0) || !(gain.entry_ms > 0)) return std::nullopt;
    return gain;
  } catch (const std::exception&) {
    return std::nullopt;  // unpriced: used as an entry of an older build
  }
}

std::string manifest_text_of(const std::string& entry, const char* field) {
  try {
    std::ifstream in(manifest_of(entry));
    return in ? json::parse(in).value(field, "") : std::string();
  } catch (const std::exception&) {
    return {};
  }
}

void record_entry_gain(const std::string& entry, const EntryGain& gain) {
  try {
    // Read, changed and written under the entry's lock: a writer that replaces the entry meanwhile
    // (a start remaking a damaged one, an import) would otherwise get the old manifest back.
    FileLock lock;
    if (!lock.try_lock(entry + ".lock", FileLock::Mode::exclusive)) {
      spdlog::debug("the entry {} is in use: what it saves is not recorded, and later starts use it", entry);
      return;
    }
    std::ifstream in(manifest_of(entry));
    json manifest = json::parse(in);
    manifest["gain"] = {{"model_ms", gain.model_ms}, {"entry_ms", gain.entry_ms}, {"pays", gain.pays()}};
    write_private_file(manifest_of(entry), manifest.dump(1), /*durable=*/false);
  } catch (const std::exception& e) {
    spdlog::debug("could not record what the entry {} saves: {}", entry, e.what());
  }
}

void CacheUse::seal() {
  if (!content_.unchanged()) throw Error("the model changed while the entry was made from it");
  const std::string own = fs::path(entry_).filename().string();
  const std::string data = data_of(entry_);
  // A short graph, or weights shorter than the graph reads, would fail every later start: check
  // what ONNX Runtime wrote before vouching for it.
  const std::string expected_data = fs::absolute(data).lexically_normal().string();
  const auto extents = format_ == ModelCacheFormat::ort ? std::map<std::string, uint64_t>{} : external_data_extents(partial_);
  for (const auto& [file, bytes_read] : extents) {
    if (file != expected_data) throw Error("the optimised model names an unexpected data file, " + file);
    const auto id = identity_of(data, Symlinks::refuse);
    if (!id || !id->regular || id->bytes < bytes_read) {
      throw Error(fmt::format("{} holds {} bytes of the {} the optimised model reads", data, id ? id->bytes : 0, bytes_read));
    }
  }
  json files = json::array();
  for (const auto& [path, name] : {std::pair{partial_, own}, std::pair{data, own + ".data"}}) {
    if (path == data && !identity_of(data, Symlinks::refuse)) continue;  // every initializer was small
    settle_written_file(path);
    json record = to_record(digest_file(path, Symlinks::refuse));
    record["name"] = name;
    files.push_back(std::move(record));
  }
  write_private_file(manifest_of(entry_),
                     json{{"ortfleet_cache_entry", kEntryManifestVersion}, {"key", key_}, {"layout_key", layout_key_}, {"verified", true}, {"model", fs::absolute(model_).lexically_normal().string()}, {"files", files}}.dump(1),
                     /*durable=*/true);
  // From here the files are the published entry's: a stop signal must not remove them. (One that comes
  // before the rename leaves a manifest and weights with no entry: the next writer removes them.)
  unfinished_.reset();
  if (::rename(partial_.c_str(), entry_.c_str()) != 0) {
    throw FolderNotWritable("cannot publish " + entry_ + ": " + std::strerror(errno));
  }
  sync_folder(fs::path(entry_).parent_path().string());
}

bool CacheUse::commit() {
  if (partial_.empty()) return false;
  try {
    seal();
  } catch (const std::exception& e) {
    abandon(e.what());
    return false;
  }
  partial_.clear();
  return true;
}

void CacheUse::abandon(const std::string& why) {
  if (partial_.empty()) return;
  partial_.clear();
  if (!why.empty()) {
    // A write that failed (a full disk, a read-only folder) is said as such, never as "busy".
    unwritable_ = true;
    note_ = write_failure(fs::path(entry_).parent_path().string(), why);
    warn_cache_not_written(model_, note_);
  }
  try {
    remove_entry_files(entry_);  // the partial graph, the data, the manifest: this process holds the writer's lock
  } catch (const std::exception& e) {
    spdlog::warn("could not remove the unfinished model cache entry {}: {}", entry_, e.what());
  }
  unfinished_.reset();
}

}  // namespace ortfleet::detail
