#pragma once
// ortfleet.Pool, the warm worker pool, and the one ortfleet.prewarm() started.
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "ortfleet/fleet/worker_pool.hpp"

namespace ortfleet::python {

/// A warm worker pool (ortfleet.Pool): shared with the fleets started on it.
class PyPool {
 public:
  PyPool(const py::object& devices, const std::string& ort_library, bool narrow_workers, size_t max_resident_sessions,
         double start_timeout, bool prime_libraries, bool isolate_new_models);
  bool wait(const std::optional<double>& timeout);
  py::object status();
  size_t evict();
  py::list devices();
  void close();
  ~PyPool();
  PyPool(const PyPool&) = delete;
  PyPool& operator=(const PyPool&) = delete;
  const std::shared_ptr<WorkerPool>& shared() const;

 private:
  WorkerPool& pool() { return *shared(); }
  std::shared_ptr<WorkerPool> pool_;
  /// The process that made it: a child forked from it has none of the pool's threads, and its workers are
  /// the parent's, so the child's copy is refused and, at its end, let go of without stopping anything
  /// (a forked child that exited aborted: std::system_error "No such process" joining its threads).
  pid_t made_in_ = ::getpid();
};

/// The pool ortfleet.prewarm() started: later fleets whose devices it has start on it.
std::shared_ptr<PyPool>& prewarmed_pool();
/// Lets go of it (its workers stop once no fleet uses them): at exit, before the module goes.
void forget_prewarmed_pool();

}  // namespace ortfleet::python
