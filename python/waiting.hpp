#pragma once
// Waits that Ctrl-C interrupts. A blocking call releases the GIL and waits in slices; between slices it
// takes the GIL back to run Python's signal handlers (PyErr_CheckSignals) and to pass on ortfleet's log
// records (log_bridge.hpp), so a KeyboardInterrupt (or whatever a handler raises) comes out of the call
// within a slice, as it would from time.sleep().
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include "bindings.hpp"

namespace ortfleet::python {

/// How long a wait goes without looking at Python's signals.
inline constexpr double kSignalSliceS = 0.05;

/// The GIL released for a scope, as py::gil_scoped_release does, for every call of the module that does
/// C++ work. Its destructor takes the GIL back and may end the thread: a daemon thread whose call comes
/// back once Python has begun to exit is ended there by CPython (PyEval_RestoreThread calls
/// pthread_exit), and that unwinding must pass the destructor. Through py::gil_scoped_release's, which is
/// noexcept, it was std::terminate: a script that ended while a daemon thread ran or waited on a fleet
/// aborted ("terminate called without an active exception", SIGABRT; issue 58's audit).
class GilReleased {
 public:
  GilReleased() : state_(PyEval_SaveThread()) {}
  ~GilReleased() noexcept(false) { PyEval_RestoreThread(state_); }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

/// Calls `step(slice_s)` without the GIL until it returns true or `timeout_s` (nullopt: none) has passed;
/// `step` waits at most `slice_s` seconds. True when `step` did; throws py::error_already_set when a
/// signal handler raised (KeyboardInterrupt).
bool wait_interruptibly(const std::function<bool(double)>& step, std::optional<double> timeout_s = std::nullopt);

/// `call()`'s result, the call made on a thread of its own and waited for interruptibly: a Ctrl-C leaves
/// it to finish there, so `call` must own what it uses. Rethrows what it threw.
template <class Result>
Result call_interruptibly(std::function<Result()> call) {
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> result = promise->get_future();
  std::thread([promise, call = std::move(call)] {
    try {
      promise->set_value(call());
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  }).detach();
  wait_interruptibly([&](double slice_s) { return result.wait_for(std::chrono::duration<double>(slice_s)) == std::future_status::ready; });
  return result.get();
}

}  // namespace ortfleet::python
