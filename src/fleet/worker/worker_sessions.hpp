#pragma once
// The sessions a worker process keeps: what its channels' "init", "start", "release", "evict", "status" and
// "trim" requests do (fleet/worker/worker_protocol.hpp; the channels themselves: worker_server.cpp). A session
// is started once per key (the model's content, the plan without the model's path, the runtime) and handed
// out again at once while it is resident; the channels that started or attached it hold it; one nobody
// holds is evicted least recently used first, when the worker keeps more than its limit or a new session
// runs out of device memory.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fleet/local/local_start.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/timeline.hpp"

namespace ortfleet::detail {

/// A session this worker keeps, and who holds it.
struct ResidentSession {
  std::string key;
  std::string layout;      // layout_key() of its start: only a start of the same layout can be this session
  std::string model_path;  // as its first start named it
  nlohmann::json plan;     // the plan it started with: a pool moving it to another worker starts it there from this
  // The session records later phases (a session for a new input shape) on the timeline it started
  // with: the timeline lives as long as the session, and is declared first so that it goes last.
  std::unique_ptr<Timeline> timeline;
  LocalDeviceResult result;
  int holders = 0;
  int64_t last_used_ns = 0;
};

/// Everything the worker's channels share: its device and its sessions.
class WorkerSessions {
 public:
  /// Where content digests are remembered: the model cache's folder when it is private.
  static std::string memo_dir();
  /// `origin`: the folder the worker was started in, which the plans its clients send name their files
  /// from (the worker itself works in "/": it never pins a job's folder once the job is gone).
  WorkerSessions(Device device, int64_t main_ns, std::string origin = {})
      : device_(std::move(device)), main_ns_(main_ns), origin_(std::move(origin)) {}
  const Device& device() const { return device_; }
  nlohmann::json initialise(const LocalStartPlan& plan, size_t max_resident, bool prime);

  /// Starts the plan's session, or finds it resident; the caller then holds it.
  nlohmann::json start(const LocalStartPlan& plan, std::vector<std::string>& held);

  /// The ready reply of resident session `key`, now held by this channel too; nothing when there is none.
  std::optional<nlohmann::json> hand_out_resident(const std::string& key, std::vector<std::string>& held);

  /// Before the pool parks this worker: hands back what no session needs, so that the checkpoint the
  /// driver keeps in host memory is the sessions' own (ORTFLEET_PARK_TRIM says which parts).
  nlohmann::json trim();

  /// The session a run names; throws when this worker does not have it.
  std::shared_ptr<ResidentSession> to_run(const std::string& key);
  std::shared_ptr<ResidentSession> find(const std::string& key);
  void hold(const std::string& key, std::vector<std::string>& held);
  void release(std::string key, std::vector<std::string>& held);  // a copy: it may be an element of `held`
  void release_all(std::vector<std::string>& held);

  /// Drops the least recently used sessions nobody holds until at most `keep` sessions remain;
  /// how many were dropped.
  size_t evict(size_t keep);
  /// Drops the sessions nobody holds whose first start named `model_path`; how many.
  size_t evict_model(const std::string& model_path);
  nlohmann::json status(bool with_plans);
  void clear();

 private:
  std::string lane() const { return device_.to_string(); }

  /// exec until main(), when the parent's spawn time came along.
  void add_process_start(Timeline& timeline) const;

  /// Every phase of this process, shared ones too, on this worker's lane.
  nlohmann::json on_my_lane(const Timeline& timeline) const;
  static bool is_out_of_memory(const Error& e) { return e.what_failed().find("out of memory") != std::string::npos; }

  /// A background fill's start made the entry: what it saves goes beside it, and into the reply.
  void price_entry(const LocalStartPlan& plan, const ResidentSession& made, DeviceStatus& status);

  /// The first session of a process loads cuDNN and cuBLAS, makes their handles and loads their
  /// common kernels: a few hundred ms on a GPU that every later session skips (on the CPU, a few ms of
  /// first-use costs). A warm worker pays it before
  /// any model arrives, with two throwaway models (convolutions and a fully connected layer; attention
  /// and matrix products), not cached. Failing here only costs the first real session that time.
  void prime_libraries(const LocalStartPlan& plan, Timeline& timeline);
  LocalDeviceResult start_one(const LocalStartPlan& plan, Timeline& timeline);

  /// What makes two starts the same session: the model's content (not its path), the plan without
  /// the model's path and the runtime it runs on.
  std::string session_key(const LocalStartPlan& plan) const;
  /// The same with the model's layout for its content (engine/files/model_view.hpp): read without a weight.
  static std::string layout_key(const LocalStartPlan& plan);
  /// The plan without the model's path and what does not change its session, and the runtime, as text.
  static std::string plan_text(const LocalStartPlan& plan);
  /// Whether a resident session has this layout_key().
  bool has_layout(const std::string& layout);


  /// The status says whether the session was resident.
  nlohmann::json ready_message(const ResidentSession& s, const DeviceStatus& status, const Timeline& timeline) const;

  Device device_;
  int64_t main_ns_;
  std::string origin_;
  std::mutex start_mutex_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<ResidentSession>> sessions_;
  size_t max_resident_ = 64;
  bool initialised_ = false;
};

}  // namespace ortfleet::detail
