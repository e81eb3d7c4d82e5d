#pragma once
// The model cache's entries, made where no job waits for them. A start whose entry is missing loads
// the model as it is, as ONNX Runtime alone would, and once every device is ready hands the entry's
// making to a BackgroundFill: a worker process at low CPU and I/O priority that starts the model once
// more with the cache filled inline (the optimised graph saved, loaded back and its outputs compared
// with the model's, engine/cache/cache_use.hpp), then prices the entry, so that later starts use it
// only where it loads faster than the model. Nobody waits for it: when its owner (a job's Fleet, or
// the warm pool's server) lets go first, the worker is told to stop and removes what it had written;
// when the owner dies, the worker sees its channel close and does the same.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/cache/cache_use.hpp"
#include "fleet/local/local_start.hpp"
#include "fleet/local/plan_inputs.hpp"

namespace ortfleet::detail {

class WorkerProcess;

/// In the process that made the entry `entry` of `plan`'s model on its first device: times a session
/// created from the entry against one created from the model, as a start creates them (the faster of
/// two each, alternating), and records the gain beside the entry. Nothing when the entry was not used.
std::optional<EntryGain> price_cache_entry(const LocalStartPlan& plan, const std::string& entry);

class BackgroundFill {
 public:
  /// Begins making the entry of `plan`'s model on its first device in a background worker, and returns.
  /// The plan's input files are copied first (OwnedPlanInputs): the job that made the plan may end and
  /// delete them while the fill works.
  BackgroundFill(const LocalStartPlan& plan, std::string worker_executable, bool narrow_workers);
  ~BackgroundFill();  ///< stops it if it has not finished: nothing of it stays
  BackgroundFill(const BackgroundFill&) = delete;
  BackgroundFill& operator=(const BackgroundFill&) = delete;

  const std::string& model() const { return model_; }
  int worker_pid() const;  ///< the background worker's pid; -1 once it is gone
  bool finished() const;
  /// Waits at most `timeout_s`; what came of it, in one line, or nothing while it still works.
  std::optional<std::string> wait(double timeout_s);
  /// `plan` as the fill starts it: its first device, the cache on, filled inline and priced, one
  /// warm-up run (the entry's check runs the model), no profile.
  static LocalStartPlan fill_plan(const LocalStartPlan& plan);

 private:
  std::string model_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::optional<std::string> outcome_;
  std::unique_ptr<OwnedPlanInputs> inputs_;  // before the worker: it reads them until it is gone
  std::shared_ptr<WorkerProcess> worker_;
  std::thread thread_;
};

}  // namespace ortfleet::detail
