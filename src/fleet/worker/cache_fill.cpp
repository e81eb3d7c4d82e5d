#include "fleet/worker/cache_fill.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>

#include "base/private_dir.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

namespace {
/// A fill gets the time a start gets: some models take an hour.
constexpr double kFillTimeoutS = 2 * 60 * 60;

/// A session's creation and first run, as a start pays them: milliseconds.
double ready_ms(const SessionSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  Session session(spec);
  session.warm_up(/*runs=*/1, /*seed=*/1);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

std::optional<EntryGain> price_cache_entry(const LocalStartPlan& plan, const std::string& entry) {
  const Device& device = plan.devices.front();
  SessionSpec from_model = session_spec(plan, device, tuned_for_fleet(plan.config, device, plan.fleet_size));
  from_model.map_model = true;  // as the fleet's start reads a model: mapped, its pages read in up front
  SessionSpec from_entry = from_model;
  from_entry.config.session.optimized_model_cache = true;
  from_entry.config.session.model_cache_fill = ModelCacheFill::off;
  // Against what a start without the entry does: a cache with no entry, so the model's view (its
  // weights left in its file), not ONNX Runtime's own read of the model.
  // A worker stopped while it prices (its pool stops, its job ends) ends by the signal, past this
  // scope's destructors: the handler removes the folder then.
  const PrivateDir no_entries = PrivateDir::temporary("ortfleet-price", /*removed_if_stopped=*/true);
  from_model.cache_dir = no_entries.path().string();
  from_model.config.session.optimized_model_cache = true;
  from_model.config.session.model_cache_fill = ModelCacheFill::off;
  from_model.config.session.model_cache_shared.clear();
  {
    const Session probe(from_entry);  // also warms the page cache for the entry's files
    if (!probe.used_model_cache()) return std::nullopt;
  }
  EntryGain gain{std::numeric_limits<double>::max(), std::numeric_limits<double>::max()};
  for (int round = 0; round < 2; ++round) {
    gain.model_ms = std::min(gain.model_ms, ready_ms(from_model));
    gain.entry_ms = std::min(gain.entry_ms, ready_ms(from_entry));
  }
  record_entry_gain(entry, gain);
  return gain;
}

LocalStartPlan BackgroundFill::fill_plan(const LocalStartPlan& plan) {
  LocalStartPlan fill = plan;
  fill.devices = {plan.devices.front()};
  fill.config.session.optimized_model_cache = true;
  fill.config.session.model_cache_fill = ModelCacheFill::inline_start;
  fill.price_cache_entry = true;
  fill.warmup_runs = 1;
  fill.profile_dir.clear();
  return fill;
}

BackgroundFill::BackgroundFill(const LocalStartPlan& plan, std::string worker_executable, bool narrow_workers) : model_(plan.model_path) {
  LocalStartPlan fill = fill_plan(plan);
  inputs_ = std::make_unique<OwnedPlanInputs>(fill);
  worker_ = std::make_shared<WorkerProcess>(worker_executable, fill.devices.front(), narrow_workers, /*background=*/true);
  thread_ = std::thread([this, fill, worker = worker_] {
    std::string outcome;
    const int64_t start = monotonic_ns();
    try {
      const WorkerReady ready = worker->start(fill, kFillTimeoutS);
      const double seconds = static_cast<double>(monotonic_ns() - start) / 1e9;
      const std::string& made = ready.status.model_cache;
      outcome = made == "miss" ? fmt::format("made the model cache entry of {} in {:.1f} s{}", model_, seconds,
                                             ready.status.model_cache_note.empty() ? "" : ": " + ready.status.model_cache_note)
                               : fmt::format("the model cache entry of {} was not made ({}{})", model_, made,
                                             ready.status.model_cache_note.empty() ? "" : ": " + ready.status.model_cache_note);
    } catch (const std::exception& e) {
      outcome = "the model cache entry of " + model_ + " was not made: " + Error::from(e).what_failed();
    }
    spdlog::debug("{}", outcome);
    std::lock_guard lock(mutex_);
    outcome_ = outcome;
    done_.notify_all();
  });
}

BackgroundFill::~BackgroundFill() {
  if (!finished()) worker_->terminate();  // the worker removes what it wrote; the start request then fails
  if (thread_.joinable()) thread_.join();
  worker_->terminate();  // done: nothing left to write
}

int BackgroundFill::worker_pid() const { return worker_->pid(); }

bool BackgroundFill::finished() const {
  std::lock_guard lock(mutex_);
  return outcome_.has_value();
}

std::optional<std::string> BackgroundFill::wait(double timeout_s) {
  std::unique_lock lock(mutex_);
  detail::wait_until(done_, lock, deadline_in(timeout_s, monotonic_ns()), [&] { return outcome_.has_value(); });
  return outcome_;
}

}  // namespace ortfleet::detail
