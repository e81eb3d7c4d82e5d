#pragma once
// One session's use of the optimised-model cache (ortfleet/engine/cache.hpp): a hit it loads with
// graph optimisation off, or a miss it fills by having ONNX Runtime save its optimised graph. One
// process writes an entry; others starting the same model meanwhile run without the cache.
#include <string>

#include "engine/file_lock.hpp"
#include "engine/ort_api.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

class CacheUse {
 public:
  /// Not using the cache: the model is loaded as it is.
  explicit CacheUse(std::string model) : source_(std::move(model)) {}
  /// Looks the entry up in `cache_dir` and sets `options` for a hit (optimisation off) or a miss this
  /// process fills (where to save the optimised graph and its weights).
  CacheUse(const std::string& cache_dir, const std::string& model, const Device& device, const RunConfig& config,
           Ort::SessionOptions& options);
  ~CacheUse();  ///< abandons an entry that was not committed
  CacheUse(const CacheUse&) = delete;
  CacheUse& operator=(const CacheUse&) = delete;

  /// What the session loads: the cached entry on a hit, else the model.
  const std::string& source() const { return source_; }
  bool hit() const { return hit_; }
  /// Whether this session writes a new entry.
  bool writing() const { return !partial_.empty(); }
  /// "hit", "miss" (this session writes the entry), "busy" (another process does) or "off".
  const char* outcome() const;

  /// The entry's path (whether or not it exists).
  const std::string& entry() const { return entry_; }
  /// The session exists: publish the entry (atomic rename: readers see a whole entry or none).
  /// True when this session wrote an entry that is now in place.
  bool commit();
  /// The session could not be created: remove what was written.
  void abandon();

 private:
  std::string source_;
  std::string entry_;
  std::string partial_;
  FileLock writer_;
  bool hit_ = false;
  bool enabled_ = false;
};

}  // namespace ortfleet::detail
