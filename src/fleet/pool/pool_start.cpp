#include "fleet/pool/pool_start.hpp"

#include <algorithm>
#include <filesystem>

#include "fleet/pool/pool_runtime.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/runtime.hpp"

#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

namespace {
/// Attaching is quick: a worker silent this long is hung, whatever the start's own timeout.
constexpr double kAttachTimeoutS = 60;
}

PoolDeviceStart start_on_pool(WorkerPool& pool, LocalStartPlan plan, double timeout_s) {
  if (plan.devices.size() != 1) throw Error("a start on a pool's worker names one device, not " + std::to_string(plan.devices.size()));
  const Device device = plan.devices.front();
  PoolDeviceStart started;
  try {
    // A runtime the start names is served only where it is the very library the workers run.
    if (!plan.ort_library.empty()) {
      check_runtime_candidate({plan.ort_library, named(Setting::ort_library), std::filesystem::exists(plan.ort_library), true});
      check_pool_runs(plan.ort_library, pool.options().ort_library, "the warm pool");
    }
    plan.ort_library = pool.options().ort_library;  // the workers' runtime: already loaded
    started.worker = pool.worker_for(device, plan.model_path, timeout_s);
    // A channel of the caller's own: its runs do not queue behind other clients', and closing it lets
    // go of the session. A start past its deadline ends the worker (the pool starts another): busy, it
    // would hold every later start. Attaching waits no longer than the start may take (a stopped worker
    // held `--timeout 5` for 60 s, and the error then told the user to raise the timeout).
    const double attach_timeout_s = std::min(kAttachTimeoutS, timeout_s);
    started.channel = std::make_unique<WorkerChannel>(started.worker->attach({}, attach_timeout_s), device, started.worker->pid(),
                                                      started.worker->observer_hooks(/*end_when_unresponsive=*/true));
    started.ready = started.channel->call(message::start, {{"plan", plan_to_json(plan)}}, timeout_s).body;
  } catch (const std::exception& e) {
    started.channel.reset();
    if (started.worker) pool.start_failed(started.worker, plan.model_path, device);
    throw Error::from(e).at(device.to_string());
  }
  pool.start_succeeded(started.worker, plan.model_path);
  return started;
}

}  // namespace ortfleet::detail
