#pragma once
// What a node daemon served, remembered in its state folder so that the daemon makes those models
// resident again when it next starts (after a reboot, a unit's restart, an upgrade), before any job asks
// (issue 60). The memory is one file, served.json, in a folder only this user can change
// (<cache root>/serve/<this host and the socket>: a home folder shared by the nodes of a cluster keeps
// one memory per node), written whole or not at all, mode 0600; read back only from a private folder, a
// regular file of this user that nobody else can write, whose checksum holds. Each model is kept with
// the plan it was served with (paths absolute) and what its file held then: a model whose file changed
// since is not made resident again (it is another model now; its next job is remembered anew).
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fleet/local/local_start.hpp"

namespace ortfleet::detail {

/// One model served on one device.
struct ServedModel {
  std::string model;        ///< its path, absolute
  std::string device;       ///< "cuda:0", "cpu"
  nlohmann::json plan;      ///< the plan it was served with on that device (plan_to_json), paths absolute
  std::string content;      ///< what its files held when it was served (model_content().text); "" until taken
  uint64_t bytes = 0;       ///< its files' size: what it takes of a preload budget
  double last_used_s = 0;   ///< when a job last used it, in seconds since the epoch (the wall clock: across restarts)
};

class ServedModels {
 public:
  /// Kept at most: the most recently used.
  static constexpr size_t kMaxRemembered = 64;
  static constexpr const char* kFileName = "served.json";

  /// `folder` empty: remembers nothing.
  explicit ServedModels(std::string folder);
  /// Where a daemon serving `socket_path` on this host remembers: <cache root>/serve/<hash of the host
  /// name and the socket>; "" where there is no cache root (ORTFLEET_CACHE, XDG_CACHE_HOME, HOME unset).
  static std::string default_folder(const std::string& socket_path);
  const std::string& folder() const { return folder_; }

  /// What the last daemon here remembered, most recently used first. A file that fails a check (a
  /// folder or file another user could change, a symlink, a damaged or foreign file) is set aside with a
  /// warning: nothing is remembered then. Entries whose path is not absolute are left out.
  std::vector<ServedModel> load();
  /// A job used `plan`'s model on its one device now. `only_if_new`: a session found resident (a job's
  /// worker handed over) is noted only where nothing of it is remembered, `idle_s` ago; what a job's
  /// start used keeps its own time.
  void note(const LocalStartPlan& plan, bool only_if_new = false, double idle_s = 0);
  /// Writes what changed since the last save (whole or not at all), each model's content taken first
  /// (remembered digests: no read of an unchanged model). Best effort: "" or why it could not.
  std::string save();

 private:
  std::string folder_;
  std::mutex mutex_;
  std::map<std::string, ServedModel> entries_;  // by device and plan
  bool loaded_ = false;
  bool dirty_ = false;
};

/// The content and size of `model` as a remembered model is checked against (model_content() with the
/// model cache's digest memo); nothing when it cannot be read.
struct ModelNow {
  std::string content;
  uint64_t bytes = 0;
};
std::optional<ModelNow> model_now(const std::string& model);

}  // namespace ortfleet::detail
