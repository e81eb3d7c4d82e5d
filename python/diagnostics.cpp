// ortfleet's diagnostics from Python: load_runtime, doctor, bench, profile and tune, each answering
// what the command's --json prints, as a dict. bench, profile and tune run on a thread of their own
// while the caller waits interruptibly (waiting.hpp): their progress reaches Python as it comes, and
// Ctrl-C stops them in order (the start under way, in a process group of its own, gets SIGTERM; what
// they set up is taken down) before the KeyboardInterrupt goes on.
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>

#include "arguments.hpp"
#include "bindings.hpp"
#include "ortfleet/diagnostics/bench.hpp"
#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/diagnostics/tune.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "waiting.hpp"

namespace ortfleet::python {

/// A number argument (runs=, budget=) as the caller gave it, for number_argument to check against the
/// rule the command line's flag takes (beside the options: BenchOptions::kRunsRule, ...): pybind11's own
/// int and float take True as 1, and NaN, infinity or -1 as they are. Its type in the signature stays
/// `int` (Whole) or `float`, which _calls.py reads.
template <bool Whole>
struct NumberGiven {
  py::object value;
};

}  // namespace ortfleet::python

namespace pybind11::detail {
template <bool Whole>
struct type_caster<ortfleet::python::NumberGiven<Whole>> {
  PYBIND11_TYPE_CASTER(ortfleet::python::NumberGiven<Whole>, const_name<Whole>("int", "float"));
  bool load(handle source, bool /*convert*/) {
    value.value = reinterpret_borrow<object>(source);
    return true;  // any object: number_argument says what it takes
  }
  static handle cast(const ortfleet::python::NumberGiven<Whole>& given, return_value_policy, handle) { return given.value.inc_ref(); }
};
}  // namespace pybind11::detail

namespace ortfleet::python {

namespace {

using WholeGiven = NumberGiven<true>;
using SecondsGiven = NumberGiven<false>;

/// `given` of `keyword`, checked by `rule`, as an int option takes it.
int whole_argument(const char* keyword, const ValueRule& rule, const WholeGiven& given) {
  return static_cast<int>(number_argument(keyword, rule, given.value));
}

/// What `run()` reports, as the command's --json prints it, as Python objects; the GIL is released
/// while it runs.
template <typename Run>
py::object json_report(Run run) {
  decltype(run()) report;
  {
    GilReleased release;
    report = run();
  }
  return parse_json(report.to_json());
}

/// device=None: the default device (the first GPU, else the CPU).
Device device_or_default(const py::object& device) { return device.is_none() ? default_device() : to_device(device); }

/// What a diagnostic says as it runs, from its own thread, until the waiting thread hands it to Python.
class SaidLines {
 public:
  void add(const std::string& line) {
    std::lock_guard lock(mutex_);
    lines_.push_back(line);
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(lines_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

/// Where progress= sends a diagnostic's lines (with the GIL held): None, on a terminal, one status line
/// on stderr redrawn in place (as the command line does), elsewhere nothing; True, every line on
/// stderr; False, nothing; a callable, each line to it.
class ProgressOutput {
 public:
  explicit ProgressOutput(const py::object& progress) {
    if (progress.is_none() || py::isinstance<py::bool_>(progress)) {
      const bool on = progress.is_none() || progress.cast<bool>();
      if (!on) return;
      stream_ = py::module_::import("sys").attr("stderr");
      if (stream_.is_none()) return;
      redraw_ = progress.is_none();
      if (redraw_ && !(py::hasattr(stream_, "isatty") && stream_.attr("isatty")().cast<bool>())) stream_ = py::none();
    } else if (PyCallable_Check(progress.ptr()) != 0) {
      callback_ = progress;
    } else {
      throw py::type_error("progress= takes None (a status line on a terminal), True (every line on stderr), False (none) or a callable "
                           "taking one str, not " + std::string(py::str(py::type::of(progress).attr("__name__"))));
    }
  }
  void show(const std::vector<std::string>& lines) {
    for (const auto& line : lines) {
      if (!callback_.is_none()) {
        callback_(line);
      } else if (!stream_.is_none()) {
        stream_.attr("write")(redraw_ ? "\r\033[K" + line : line + "\n");
        stream_.attr("flush")();
        drawn_ = redraw_;
      }
    }
  }
  void clear() {
    if (!drawn_) return;
    stream_.attr("write")("\r\033[K");
    stream_.attr("flush")();
    drawn_ = false;
  }

 private:
  py::object callback_ = py::none();
  py::object stream_ = py::none();
  bool redraw_ = false;
  bool drawn_ = false;
};

using Say = std::function<void(const std::string&)>;

/// How long a stopped run may take to end: its child start has 5 s after SIGTERM before SIGKILL
/// (run_child), and what runs in this process (a shape-switch measurement) ends within seconds.
constexpr double kStopWaitS = 40;

/// The bench, profile and tune runs under way, so that the interpreter's exit stops them in order, as
/// Ctrl-C does: one a daemon thread waits for would otherwise leave its child start, the worker and its
/// folders running when the process exits (issue 58's audit).
class RunningDiagnostics {
 public:
  /// A run's entry for as long as it lives.
  class Entry {
   public:
    Entry(RunningDiagnostics& all, std::shared_ptr<std::stop_source> stop, std::shared_future<std::string> result) : all_(all) {
      std::lock_guard lock(all_.mutex_);
      id_ = all_.next_id_++;
      all_.runs_.emplace(id_, Run{std::move(stop), std::move(result)});
    }
    ~Entry() {
      std::lock_guard lock(all_.mutex_);
      all_.runs_.erase(id_);
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    RunningDiagnostics& all_;
    size_t id_ = 0;
  };
  /// Asks every run to stop and waits for each, at most `wait_s` seconds in all (without the GIL).
  void stop_all(double wait_s) {
    std::vector<Run> runs;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [id, run] : runs_) runs.push_back(run);
    }
    if (runs.empty()) return;
    for (auto& run : runs) run.stop->request_stop();
    GilReleased release;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    for (auto& run : runs) run.result.wait_until(deadline);
  }

 private:
  struct Run {
    std::shared_ptr<std::stop_source> stop;
    std::shared_future<std::string> result;
  };
  std::mutex mutex_;
  size_t next_id_ = 0;
  std::map<size_t, Run> runs_;
};

RunningDiagnostics& running_diagnostics() {
  static auto* all = new RunningDiagnostics();  // never destroyed: a detached run may outlive static destruction
  return *all;
}

/// What `run(stop, say)` reports, as the command's --json prints it, as Python objects. It runs on a
/// thread of its own; this one waits without the GIL, passes its lines to `progress` and answers
/// Ctrl-C: the run is asked to stop (`stop`), which ends its child start in order and takes down what
/// it set up, and is waited for (a bounded wait) before the KeyboardInterrupt goes on, so that nothing
/// it started is left running. A daemon thread that Python ends at its exit unwinds through here
/// (pthread_exit): the run is then left to the exit's stop (stop_running_diagnostics), its thread
/// detached, never destroyed joinable (std::terminate).
template <typename Report>
py::object interruptible_report(std::function<Report(std::stop_token, Say)> run, const py::object& progress) {
  ProgressOutput output(progress);
  auto stop = std::make_shared<std::stop_source>();
  auto said = std::make_shared<SaidLines>();
  auto done = std::make_shared<std::promise<std::string>>();
  std::shared_future<std::string> result = done->get_future().share();
  const RunningDiagnostics::Entry entry(running_diagnostics(), stop, result);
  std::thread worker([run = std::move(run), stop, said, done] {
    try {
      done->set_value(run(stop->get_token(), [said](const std::string& line) { said->add(line); }).to_json());
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
  struct DetachedIfLeft {
    std::thread& thread;
    ~DetachedIfLeft() {
      if (thread.joinable()) thread.detach();  // it owns what it uses
    }
  } detached_if_left{worker};
  const auto finished = [&](double slice_s) { return result.wait_for(std::chrono::duration<double>(slice_s)) == std::future_status::ready; };
  try {
    while (!wait_interruptibly(finished, 0.25)) output.show(said->take());
    output.show(said->take());
  } catch (py::error_already_set&) {
    stop->request_stop();
    bool ended = false;
    {
      GilReleased release;
      ended = result.wait_for(std::chrono::duration<double>(kStopWaitS)) == std::future_status::ready;
    }
    if (ended) worker.join();
    else worker.detach();  // it owns what it uses
    output.clear();
    throw;
  }
  worker.join();
  output.clear();
  return parse_json(result.get());
}

/// `run(options)` with the caller's stop and lines wired in: its progress, and its notices where it has them.
template <typename Options, typename Report>
std::function<Report(std::stop_token, Say)> wired(Options options, Report (*run)(const Options&)) {
  return [options, run](std::stop_token stop, Say say) mutable {
    options.stop = std::move(stop);
    options.progress = say;
    if constexpr (requires { options.notice; }) options.notice = say;
    return run(options);
  };
}

/// python=None: the interpreter running this (sys.executable), not whatever `python3` PATH finds.
std::string python_or_this_one(const py::object& python) {
  if (!python.is_none()) return python.cast<std::string>();
  const auto executable = py::module_::import("sys").attr("executable");
  const std::string path = executable.is_none() ? std::string() : executable.cast<std::string>();
  return path.empty() ? "python3" : path;  // embedded interpreters may not know their executable
}

}  // namespace

void stop_running_diagnostics() { running_diagnostics().stop_all(kStopWaitS); }

void bind_diagnostics(py::module_& m) {
  m.def("load_runtime", [](const std::string& library) {
    const RuntimeInfo& rt = load_runtime(library);
    py::dict d;
    d["path"] = rt.library_path;
    d["source"] = rt.source;
    d["version"] = rt.version;
    d["providers"] = rt.providers;
    return d;
  }, py::arg("library") = "", "Load ONNX Runtime (the search order of the command line) and describe it");

  m.def("doctor", [](const std::string& ort_library) {
    DoctorOptions o;
    o.ort_library = ort_library;
    return json_report([&] { return run_doctor(o); });
  }, py::arg("ort_library") = "", "What `ortfleet doctor --json` reports, as a dict");

  m.def("bench", [](const std::string& model, const py::object& devices, const WholeGiven& runs, const WholeGiven& warmup, bool anchors,
                    const py::object& python, const py::object& config, const SecondsGiven& budget, const py::object& progress) {
    BenchOptions o;
    o.runs = whole_argument("runs", BenchOptions::kRunsRule, runs);
    o.warmup_rounds = whole_argument("warmup", BenchOptions::kWarmupRoundsRule, warmup);
    o.budget_s = number_argument("budget", kRoundsBudgetRule, budget.value);
    o.model = model;
    o.devices = to_devices(devices);
    o.anchors = anchors;
    o.python = python_or_this_one(python);
    o.config = to_config(config);
    check_config_against_model(o.config, o.model);  // before any child process: options.hpp
    return interruptible_report(wired(o, run_bench), progress);
  }, py::arg("model"), py::arg("devices") = py::none(), py::arg("runs") = BenchOptions{}.runs, py::arg("warmup") = 1, py::arg("anchors") = true,
     py::arg("python") = py::none(), py::arg("config") = py::none(), py::arg("budget") = 0.0, py::arg("progress") = py::none(),
     "What `ortfleet bench --json` reports, as a dict. The anchors run under `python` (default: this interpreter, sys.executable); "
     "`budget` caps the seconds it takes (0: none); `progress`: None (a status line on a terminal), True (every line on stderr), "
     "False, or a callable taking each line. Ctrl-C stops it, and what it started, before the KeyboardInterrupt goes on");

  m.def("profile", [](const std::string& model, const py::object& device, const WholeGiven& runs, const py::object& config, bool fleet,
                      const py::object& progress) {
    ProfileOptions o;
    o.steady_runs = whole_argument("runs", ProfileOptions::kSteadyRunsRule, runs);
    o.model = model;
    o.device = device_or_default(device);
    o.config = to_config(config);
    check_config_against_model(o.config, o.model);  // before any child process: options.hpp
    o.fleet = fleet;
    return interruptible_report(wired(o, run_profile), progress);
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("runs") = 20, py::arg("config") = py::none(), py::arg("fleet") = true,
     py::arg("progress") = py::none(),
     "What `ortfleet profile --json` reports, as a dict (`fleet`: on a machine of several GPUs, one start of a fleet on all of them "
     "for the driver's share); `progress` as for bench; Ctrl-C stops it");

  m.def("tune", [](const std::string& model, const py::object& device, bool quick, const WholeGiven& runs, const py::object& config,
                   const WholeGiven& rounds, const SecondsGiven& budget, const py::object& progress) {
    TuneOptions o;
    o.steady_runs = whole_argument("runs", TuneOptions::kSteadyRunsRule, runs);
    o.rounds = whole_argument("rounds", TuneOptions::kRoundsRule, rounds);
    o.budget_s = number_argument("budget", kRoundsBudgetRule, budget.value);
    o.model = model;
    o.device = device_or_default(device);
    o.quick = quick;
    o.base = to_config(config);
    check_config_against_model(o.base, o.model);  // before any child process: options.hpp
    return interruptible_report(wired(o, run_tune), progress);
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("quick") = true, py::arg("runs") = 30, py::arg("config") = py::none(),
     py::arg("rounds") = TuneOptions{}.rounds, py::arg("budget") = 0.0, py::arg("progress") = py::none(),
     "What `ortfleet tune --json` reports, as a dict: `rounds` interleaved timed rounds (cut to `budget` seconds, 0: none), a "
     "recommendation only for a gain beyond noise; `progress` as for bench; Ctrl-C stops it");
}

}  // namespace ortfleet::python
