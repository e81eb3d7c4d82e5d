// ortfleet's log in a Python process (log_bridge.hpp).
#include "log_bridge.hpp"

#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "ortfleet/base/log.hpp"
#include "setting_words.hpp"

namespace ortfleet::python {
namespace {

struct Record {
  int python_level;  // logging.DEBUG, ...
  std::string text;
};

/// Records on their way to Python, from any thread.
struct Queue {
  std::mutex mutex;
  std::deque<Record> records;
  bool handover_asked = false;  // a pending call is on its way
};

Queue& queue() {
  static auto* q = new Queue;  // outlives static destructors: threads may log at exit
  return *q;
}

int python_level(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return 10;
    case LogLevel::info: return 20;
    case LogLevel::warning: return 30;
    case LogLevel::error: return 40;
  }
  return 40;
}

LogLevel log_level(int python_level) {
  if (python_level <= 10) return LogLevel::debug;
  if (python_level <= 20) return LogLevel::info;
  if (python_level <= 30) return LogLevel::warning;
  return LogLevel::error;
}

int hand_over(void* /*unused*/) {
  forward_log_records();
  return PyErr_Occurred() != nullptr ? -1 : 0;
}

/// ortfleet's log handler: queues each record and asks the main thread to hand it over
/// (Py_AddPendingCall needs no GIL). While the interpreter shuts down, records go to stderr as they come.
void on_record(LogLevel level, const std::string& record) {
  const std::string text = in_keywords(record);
  if (!python_running()) {
    std::fprintf(stderr, "ortfleet: %s\n", text.c_str());
    return;
  }
  auto& q = queue();
  std::lock_guard lock(q.mutex);
  q.records.push_back({python_level(level), text});
  if (!q.handover_asked) q.handover_asked = Py_AddPendingCall(&hand_over, nullptr) == 0;
}

}  // namespace

bool python_running() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() != 0 && Py_IsFinalizing() == 0;
#else
  return Py_IsInitialized() != 0 && _Py_IsFinalizing() == 0;
#endif
}

void install_log_bridge() {
  set_log_handler(&on_record);
  forward_log_records();  // the level
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
}

void forward_log_records() {
  std::deque<Record> records;
  {
    auto& q = queue();
    std::lock_guard lock(q.mutex);
    records.swap(q.records);
    q.handover_asked = false;
  }
  if (!python_running()) {
    for (const auto& r : records) std::fprintf(stderr, "ortfleet: %s\n", r.text.c_str());
    return;
  }
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);  // an exception on its way out stays as it was
  try {
    const py::object logger = py::module_::import("logging").attr("getLogger")("ortfleet");
    set_log_level(log_level(logger.attr("getEffectiveLevel")().cast<int>()));
    for (const auto& r : records) logger.attr("log")(r.python_level, r.text);
  } catch (py::error_already_set& e) {
    // Python code ran, so a signal handler may have: its KeyboardInterrupt is the program's and is left
    // set for the caller; a failure to log (an Exception) must not fail the call that logged: dropped.
    if (!e.matches(PyExc_Exception)) {
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(traceback);
      e.restore();
      return;
    }
  }
  PyErr_Restore(type, value, traceback);
}

}  // namespace ortfleet::python
