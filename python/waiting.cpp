// Waits that Ctrl-C interrupts (waiting.hpp).
#include "waiting.hpp"

#include <algorithm>

#include "log_bridge.hpp"

namespace ortfleet::python {

bool wait_interruptibly(const std::function<bool(double)>& step, std::optional<double> timeout_s) {
  if (timeout_s && !(*timeout_s >= 0)) timeout_s = 0.0;  // NaN too: a look, no wait (callers refuse what they must)
  const auto begin = std::chrono::steady_clock::now();
  const auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
  while (true) {
    const double slice_s = timeout_s ? std::clamp(*timeout_s - elapsed_s(), 0.0, kSignalSliceS) : kSignalSliceS;
    bool done = false;
    {
      GilReleased release;
      done = step(slice_s);
    }
    forward_log_records();
    if (PyErr_Occurred() != nullptr || PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (done) return true;
    if (timeout_s && elapsed_s() >= *timeout_s) return false;
  }
}

}  // namespace ortfleet::python
