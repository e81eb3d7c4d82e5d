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
  bool used = true;       ///< false when priced as loading no faster than the model
};

class ModelCache {
 public:
  /// `dir` empty: <default_root()>/models.
  explicit ModelCache(std::string dir = {});

  const std::string& dir() const { return dir_; }
  /// The entry's path for this model, device and configuration (whether or not it exists yet).
  std::string entry_path(const std::string& model_path, const Device& device, const RunConfig& config) const;
  /// The entry's path for a key_text() and the format the entry is stored in (its extension).
  std::string entry_path_for_key(const std::string& model_path, const std::string& key, ModelCacheFormat format) const;
  /// The key text the entry name is hashed from. Reads the model's files unless their hashes are
  /// remembered in the cache folder for their present identity (size, inode, change time).
  std::string key_text(const std::string& model_path, const Device& device, const RunConfig& config) const;
  std::vector<CacheEntry> entries() const;
  /// Removes every entry, and everything else in the folder, except entries in use (being loaded or
  /// written) at the time; returns how many of those were kept.
  size_t clear() const;

  /// $ORTFLEET_CACHE, else $XDG_CACHE_HOME/ortfleet, else ~/.cache/ortfleet. Throws ortfleet::Error
  /// when none of them is set: there is no shared fallback another user could write into.
  static std::string default_root();
  /// The same, or nothing where none of those variables is set.
  static std::optional<std::string> find_default_root();

 private:
  std::string dir_;
};

}  // namespace ortfleet
