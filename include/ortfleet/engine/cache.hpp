#pragma once
// A cache of pre-optimised models: the first session of a model saves ONNX Runtime's optimised graph;
// later sessions load that copy with graph optimisation off and skip the optimisation work. An entry
// is keyed by the model file (path, size, modification time), the ONNX Runtime version, the device
// class (CPU, or the GPU architecture) and every option that changes the optimised graph.
#include <cstdint>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

struct CacheEntry {
  std::string path;
  uint64_t bytes = 0;
};

class ModelCache {
 public:
  /// `dir` empty: $ORTFLEET_CACHE/models, else ~/.cache/ortfleet/models.
  explicit ModelCache(std::string dir = {});

  const std::string& dir() const { return dir_; }
  /// The entry's path for this model, device and configuration (whether or not it exists yet).
  std::string entry_path(const std::string& model_path, const Device& device, const RunConfig& config) const;
  /// The key text the entry name is hashed from (shown by `ortfleet profile`).
  static std::string key_text(const std::string& model_path, const Device& device, const RunConfig& config);
  std::vector<CacheEntry> entries() const;
  void clear() const;

  static std::string default_root();  ///< $ORTFLEET_CACHE or ~/.cache/ortfleet

 private:
  std::string dir_;
};

}  // namespace ortfleet
