#pragma once
// A cache of pre-optimised models: the first session of a model saves ONNX Runtime's optimised graph;
// later sessions load that copy with graph optimisation off and skip the optimisation work. An entry
// is keyed by the model's content (a hash of the .onnx file and of every external data file it
// names), the ONNX Runtime version, the device class (CPU, or the GPU architecture) and every option
// that changes the optimised graph, and the format it is stored in: ONNX with the weights in a side
// file (ENTRY.onnx, ENTRY.onnx.data), or ONNX Runtime's ORT format (ENTRY.ort, weights inside). Each entry carries a manifest (the sizes and content hashes of
// its files) and is checked against it before use: a damaged entry is set aside and made again.
//
// The cache lives in a folder only its user can write: $ORTFLEET_CACHE, else
// $XDG_CACHE_HOME/ortfleet, else ~/.cache/ortfleet (made with mode 0700; a folder another user owns
// or can write is refused).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

struct CacheEntry {
  std::string path;
  uint64_t bytes = 0;
  std::string model;      ///< the model it was made from, as its first start named it ("" for older entries)
  /// What it saves at load, as priced after it was made ("loads in 48 ms against 510 ms for the model
  /// (saves 462 ms)"); "" when not priced yet. An entry that saves nothing is not used.
  std::string load_note;
  bool used = true;       ///< false when priced as loading no faster than the model, or skipped
  /// A shared layer's entry a start would not use, and why: "refused: <a folder or file another user
  /// could change>" or "skipped: <the damage its check found>"; "" when a start would use it.
  std::string skipped;
};

/// One entry of a cache bundle (ModelCache::export_bundle, import_bundle).
struct BundleEntry {
  std::string model;         ///< the model file it was made from, as named where it was made
  std::string device_class;  ///< what it was made for: "cpu-<hash of the CPU>", "cuda-sm_90"
  std::string name;          ///< its file name, <model stem>-<key hash>.onnx or .ort ("" for a model without one)
  uint64_t bytes = 0;        ///< graph and weights
  /// Export: "exported", "missing" (no entry), "rejected" (it failed its check here), "busy" (being
  /// written), "damaged: <why>". Import: "added", "replaced" (a damaged or unfinished one of the same
  /// key), "already here" (a sound one of the same key, kept), "in use" (being written or read by a
  /// start: kept), "rejected here" (this machine rejected that entry before: not imported).
  std::string outcome;
  std::string load_note;     ///< what it saves at load, as priced where it was made ("" when never priced)
};

/// A cache bundle: one file (a POSIX tar whose first member is ortfleet-bundle.json) holding verified
/// entries and what they need beside them (their manifests, their shape costs), with the ortfleet and
/// ONNX Runtime versions, the execution provider and its options, the device classes (the GPU
/// architecture) and a checksum (XXH64) of every member.
struct CacheBundle {
  std::string path;
  uint64_t bytes = 0;  ///< the bundle file's size
  std::string ortfleet_version;
  std::string onnxruntime_version;
  std::vector<std::string> device_classes;
  std::vector<BundleEntry> entries;  ///< export: every model and device class asked for; import: every entry in it
};

class ModelCache {
 public:
  /// `dir` empty: <default_root()>/models.
  explicit ModelCache(std::string dir = {});

  const std::string& dir() const { return dir_; }
  /// The entry's path for this model, device and configuration (whether or not it exists yet).
  std::string entry_path(const std::string& model_path, const Device& device, const RunConfig& config) const;
  /// The key text the entry name is hashed from. Reads the model's files unless their hashes are
  /// remembered in the cache folder for their present identity (size, inode, change time).
  std::string key_text(const std::string& model_path, const Device& device, const RunConfig& config) const;
  /// The entries in the folder. `private_folder` false: a folder that may be other users' (a shared
  /// layer), listed as it is rather than checked as this user's cache, each entry checked as a start
  /// checks it before use (CacheEntry::skipped says why one would not be used).
  std::vector<CacheEntry> entries(bool private_folder = true) const;
  /// Removes every entry, and everything else in the folder, except entries in use (being loaded or
  /// written) at the time; returns how many of those were kept.
  size_t clear() const;

  /// Writes the verified entries of `models` for `devices` (their device classes), keyed as a start
  /// with `config` keys them, found in this cache or else the shared layer, into the bundle file `out`
  /// (written beside it under another name, then renamed: whole or not at all). Throws ortfleet::Error
  /// when none of them has an entry, or `out` cannot be written. Loads ONNX Runtime (its version is
  /// part of every key).
  CacheBundle export_bundle(const std::vector<std::string>& models, const std::vector<Device>& devices, const RunConfig& config,
                            const std::string& out) const;
  /// Checks the bundle `path` whole (its format, its ortfleet, ONNX Runtime and device classes against
  /// this build and machine, every member's name, type, size and checksum, every entry's manifest) in a
  /// private folder inside this cache, then publishes each entry as a start that made it would: under
  /// its lock, its files renamed into place and the entry itself last. A bundle that fails any check is
  /// refused with one ortfleet::Error and leaves the cache as it was; an import killed halfway leaves no
  /// partial entry. With `shared_layer`, this cache's folder is a shared layer other users read
  /// (ModelCache::shared_root): folders are made 0755 and files 0644, and the folder must be this
  /// user's and writable by nobody else.
  CacheBundle import_bundle(const std::string& path, bool shared_layer = false) const;

  /// $ORTFLEET_CACHE, else $XDG_CACHE_HOME/ortfleet, else ~/.cache/ortfleet. Throws ortfleet::Error
  /// when none of them is set: there is no shared fallback another user could write into.
  static std::string default_root();
  /// The same, or nothing where none of those variables is set.
  static std::optional<std::string> find_default_root();
  /// The read-only shared layer, looked in before this cache: config.session.model_cache_shared, else
  /// $ORTFLEET_CACHE_SHARED; nothing when neither is set. Its entries are in <it>/models.
  static std::optional<std::string> shared_root(const RunConfig& config = {});

 private:
  std::string dir_;
};

}  // namespace ortfleet
