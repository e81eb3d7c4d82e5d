#include <gtest/gtest.h>

#include <limits>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/environment.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "base/private_dir.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/start_record.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/fleet/start_report.hpp"
#include "synth/onnx_writer.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace {
FleetOptions cpu_fleet(Strategy s, int n = 2) {
  FleetOptions o;
  o.strategy = s;
  for (int i = 0; i < n; ++i) o.devices.push_back(Device::cpu(i));
  return o;
}

std::vector<float> reference_output(const std::vector<Tensor>& inputs) {
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  Session s(spec);
  const auto out = s.run(inputs);
  return {out[0].values<float>(), out[0].values<float>() + out[0].element_count()};
}
}  // namespace

class FleetStrategies : public ::testing::TestWithParam<Strategy> {};

TEST_P(FleetStrategies, EveryDeviceBecomesReadyAndComputesTheSameAsOneSession) {
  Fleet fleet(test::mlp_model(), cpu_fleet(GetParam()));
  EXPECT_EQ(fleet.strategy(), GetParam());
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const auto inputs = random_inputs(fleet.inputs(), 4);
  const auto want = reference_output(inputs);
  for (const auto& d : fleet.devices()) {
    EXPECT_TRUE(fleet.ready(d));
    const auto out = fleet.run(d, inputs);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(static_cast<size_t>(out[0].element_count()), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(out[0].values<float>()[i], want[i]);
  }
  for (const auto& s : fleet.status()) {
    EXPECT_EQ(s.state, DeviceState::ready);
    EXPECT_EQ(s.provider, "cpu");
    EXPECT_GT(s.ready_ms, 0.0);
    EXPECT_GT(s.pid, 0);
  }
  // Every device's session creation, warm-up and ready mark are on the timeline, on its lane.
  const Timeline timeline = fleet.timeline();
  for (const auto& d : fleet.devices()) {
    const auto totals = timeline.phase_totals_ms(d.to_string());
    EXPECT_TRUE(totals.count(phase::session_create)) << d.to_string();
    EXPECT_TRUE(totals.count(phase::warmup)) << d.to_string();
    EXPECT_TRUE(totals.count(phase::ready)) << d.to_string();
  }
  const auto trace = nlohmann::json::parse(timeline.to_chrome_trace());
  EXPECT_GT(trace.at("traceEvents").size(), 6u);
}

INSTANTIATE_TEST_SUITE_P(Cpu, FleetStrategies,
                         ::testing::Values(Strategy::sequential, Strategy::threads, Strategy::processes, Strategy::fleet),
                         [](const auto& param_info) { return to_string(param_info.param); });

// auto says why it chose; an explicit strategy was the caller's choice. Nothing is started.
TEST(Fleet, AutoSaysWhyItChoseTheFleet) {
  const Fleet automatic(test::mlp_model(), cpu_fleet(Strategy::automatic, 1));
  EXPECT_EQ(automatic.strategy(), Strategy::fleet);
  EXPECT_EQ(automatic.strategy_reason().rfind("auto chose fleet: ", 0), 0u) << automatic.strategy_reason();
  EXPECT_NE(automatic.strategy_reason().find("one process"), std::string::npos) << automatic.strategy_reason();
  EXPECT_EQ(Fleet(test::mlp_model(), cpu_fleet(Strategy::sequential, 1)).strategy_reason(), "as asked");
  // What a reader goes by is typed; the words are made from it.
  EXPECT_EQ(automatic.strategy_why(), StrategyWhy::cpu);
  EXPECT_EQ(Fleet(test::mlp_model(), cpu_fleet(Strategy::sequential, 1)).strategy_why(), StrategyWhy::as_asked);
  for (const char* name : {"as_asked", "on_pool", "one_process_asked", "pool_answered", "leaves_pool", "cpu", "record_one_process",
                           "record_workers", "one_gpu", "several_gpus", "known_crash"}) {
    EXPECT_EQ(to_string(parse_strategy_why(name)), std::string(name));
  }
}

// What the command line refuses, the library refuses too, in the same words (each front end says the setting its way).
TEST(Fleet, ItsOptionsAreCheckedAsTheFlagsAre) {
  FleetOptions forever = cpu_fleet(Strategy::threads, 1);
  forever.start_timeout_s = std::numeric_limits<double>::infinity();
  EXPECT_EQ(test::error_of([&] { Fleet(test::mlp_model(), forever); }),
            "`start_timeout_s=inf` is out of range: give a number of seconds above 0 and at most 604800");
  FleetOptions week_and_a_second = cpu_fleet(Strategy::threads, 1);
  week_and_a_second.run_timeout_s = 604801;
  EXPECT_EQ(test::error_of([&] { Fleet(test::mlp_model(), week_and_a_second); }),
            "`run_timeout_s=604801` is out of range: give a number of seconds above 0 and at most 604800");
  EXPECT_EQ(test::error_of([&] { Fleet(test::mlp_model() + std::string("\0x", 2), cpu_fleet(Strategy::threads, 1)); }),
            "`model=" + test::mlp_model() + "?x` holds a NUL byte, which no path holds");
  FleetOptions cut = cpu_fleet(Strategy::threads, 1);
  cut.ort_library = std::string("/lib\0/libonnxruntime.so", 23);
  EXPECT_EQ(test::error_of([&] { Fleet(test::mlp_model(), cut); }), "`ort_library=/lib?/libonnxruntime.so` holds a NUL byte, which no path holds");
}

// For several GPUs, auto goes by this machine's last bench: a worker process per GPU or one process,
// whichever started them faster, and says which measurement it used. Nothing is started.
TEST(Fleet, AutoChoosesFromThisMachinesBenchRecord) {
  const std::string model = test::mlp_model();  // first: the test set-up sets ORTFLEET_CACHE when it runs
  const detail::PrivateDir cache = detail::PrivateDir::temporary("ortfleet-test-records");
  const test::ScopedEnv root("ORTFLEET_CACHE", cache.path().string());
  FleetOptions two;
  two.devices = {Device::cuda(0), Device::cuda(1)};
  const std::string no_record = Fleet(model, two).strategy_reason();
  EXPECT_EQ(no_record.rfind("auto chose fleet: ", 0), 0u) << no_record;
  EXPECT_NE(no_record.find("no bench record of 2 GPUs on this machine"), std::string::npos) << no_record;

  StartRecord record;
  record.gpus = machine_gpu_names();
  record.device_count = 2;
  record.measured_at = "2026-11-23T06:00:00Z";
  record.start_ms = {{StartWay::workers, 741}, {StartWay::threads, 1210}};
  save_start_record(record);
  const std::string machine = "(" + record.described() + ")";
  EXPECT_NE(machine.find("bench of 2026-11-23"), std::string::npos) << machine;
  const Fleet workers(model, two);
  EXPECT_EQ(workers.strategy(), Strategy::fleet);
  EXPECT_EQ(workers.strategy_why(), StrategyWhy::record_workers);
  EXPECT_EQ(workers.strategy_reason(),
            "auto chose fleet: on this machine " + machine + " a worker process per GPU started 2 GPUs in 741 ms vs 1210 ms for threads in one process");

  record.start_ms[StartWay::threads] = 600;
  save_start_record(record);
  EXPECT_EQ(Fleet(model, two).strategy_why(), StrategyWhy::record_one_process);
  EXPECT_EQ(Fleet(model, two).strategy_reason(),
            "auto chose fleet in one process: on this machine " + machine + " threads in one process started 2 GPUs in 600 ms vs 741 ms for a worker "
            "process per GPU");

  record.start_ms[StartWay::one_process] = 650;  // bench's row of the fleet in one process, when it has one, before threads
  save_start_record(record);
  EXPECT_EQ(Fleet(model, two).strategy_reason(),
            "auto chose fleet in one process: on this machine " + machine + " the fleet in one process started 2 GPUs in 650 ms vs 741 ms for a "
            "worker process per GPU");
  FleetOptions asked_one = two;
  asked_one.one_process = true;
  EXPECT_NE(Fleet(model, asked_one).strategy_reason().find("as asked (one_process)"), std::string::npos);

  FleetOptions three = two;  // the record is of two GPUs
  three.devices.push_back(Device::cuda(2));
  EXPECT_NE(Fleet(model, three).strategy_reason().find("no bench record of 3 GPUs"), std::string::npos);
  EXPECT_EQ(Fleet(model, three).strategy_why(), StrategyWhy::several_gpus);
  FleetOptions asked = two;
  asked.strategy = Strategy::fleet;
  EXPECT_EQ(Fleet(model, asked).strategy_reason(), "as asked");

  record.gpus.push_back("Another GPU");  // made on another machine: not this one's measurement
  save_start_record(record);
  EXPECT_NE(Fleet(model, two).strategy_reason().find("no bench record of 2 GPUs"), std::string::npos);
}

TEST(Fleet, ProcessesRunInWorkerProcesses) {
  Fleet fleet(test::mlp_model(), cpu_fleet(Strategy::processes));
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const auto s = fleet.status();
  EXPECT_NE(s[0].pid, ::getpid());
  EXPECT_NE(s[0].pid, s[1].pid);
  // Worker phases line up with ours: the monotonic clock is shared across processes.
  for (const auto& e : fleet.timeline().events()) EXPECT_GE(e.end_ns, e.start_ns);
}

TEST(Fleet, AFailingDeviceDoesNotTakeTheOthersDown) {
  for (Strategy s : {Strategy::threads, Strategy::processes}) {
    FleetOptions o = cpu_fleet(s, 1);
    o.devices.push_back(Device::cuda(7));  // no such GPU here (or anywhere likely)
    Fleet fleet(test::mlp_model(), o);
    fleet.start();
    EXPECT_FALSE(fleet.wait());
    const auto st = fleet.status();
    EXPECT_EQ(st[0].state, DeviceState::ready) << to_string(s);
    EXPECT_EQ(st[1].state, DeviceState::failed) << to_string(s);
    EXPECT_FALSE(st[1].error.empty());
    EXPECT_EQ(fleet.run(Device::cpu(), random_inputs(fleet.inputs(), 1)).size(), 1u);
    try {
      fleet.run(Device::cuda(7), random_inputs(fleet.inputs(), 1));
      ADD_FAILURE() << "running on a failed device succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("failed to start"), std::string::npos) << e.what();
    }
  }
}

TEST(Fleet, AWorkerThatDiesIsReportedAndTheRestKeepWorking) {
  Fleet fleet(test::mlp_model(), cpu_fleet(Strategy::processes));
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  ::kill(fleet.status()[0].pid, SIGKILL);
  const auto inputs = random_inputs(fleet.inputs(), 1);
  try {
    fleet.run(Device::cpu(0), inputs);
    FAIL() << "a dead worker answered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was killed by signal SIGKILL"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fleet.run(Device::cpu(1), inputs).size(), 1u);
}

// A worker that dies with a run_async in flight fails its device then, not at the next call: the run
// found out on a thread of its own (the ring's, or the socket's), and status() says so though nobody
// called get(). Through the request ring and through the socket.
TEST(Fleet, AWorkerThatDiesWithARunInFlightFailsItsDeviceWithoutAnotherCall) {
  for (const char* ring : {"1", "0"}) {
    SCOPED_TRACE(std::string("request ring ") + ring);
    const test::ScopedEnv ring_setting(detail::env_name(detail::EnvVar::worker_ring), std::string(ring));
    Fleet fleet(test::mlp_model(), cpu_fleet(Strategy::processes));
    fleet.start();
    ASSERT_TRUE(fleet.wait());
    const int pid = fleet.status()[0].pid;
    const auto inputs = random_inputs(fleet.inputs(), 1);
    test::stop_process(pid);  // the run stays in flight until the worker is killed
    auto in_flight = fleet.run_async(Device::cpu(0), inputs);
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    in_flight.wait();  // failed, not collected
    const auto status = fleet.status();
    EXPECT_EQ(status[0].state, DeviceState::failed);
    EXPECT_NE(status[0].error.find("was killed by signal SIGKILL"), std::string::npos) << status[0].error;
    EXPECT_FALSE(fleet.ready(Device::cpu(0)));
    EXPECT_EQ(status[1].state, DeviceState::ready);
    try {
      in_flight.get();
      ADD_FAILURE() << "a killed worker answered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("was killed by signal SIGKILL"), std::string::npos) << e.what();
    }
    EXPECT_THROW(fleet.run_async(Device::cpu(0), inputs), Error);  // at once: the device has failed
    EXPECT_EQ(fleet.run(Device::cpu(1), inputs).size(), 1u);
  }
}

TEST(Fleet, StartIsNonBlockingAndRunWaitsForReadiness) {
  Fleet fleet(test::resnet18_model(), cpu_fleet(Strategy::threads, 1));
  fleet.start();
  // run() before wait(): it blocks until the device is ready instead of failing.
  const auto out = fleet.run(Device::cpu(), random_inputs({{"input", ElementType::float32, {1, 3, 64, 64}, {}}}, 1));
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{1, 1000}));
  EXPECT_TRUE(fleet.ready(Device::cpu()));
}

TEST(Fleet, MisuseIsReported) {
  EXPECT_THROW(Fleet("/nonexistent.onnx", cpu_fleet(Strategy::fleet)), Error);
  Fleet fleet(test::mlp_model(), cpu_fleet(Strategy::sequential, 1));
  EXPECT_THROW(fleet.wait(), Error);
  fleet.start();
  EXPECT_THROW(fleet.start(), Error);
  fleet.wait();
  EXPECT_THROW(fleet.run(Device::cpu(5), {}), Error);
  fleet.shutdown();
  fleet.shutdown();  // idempotent
  EXPECT_EQ(fleet.status()[0].state, DeviceState::stopped);
}

/// Sets the worker start-delay test hook (fleet/worker/worker_protocol.hpp) for the fleets made while it lives.
class DelayedWorkerStart {
 public:
  explicit DelayedWorkerStart(const std::string& setting) { ::setenv(detail::env_name(detail::EnvVar::test_worker_start_delay), setting.c_str(), 1); }
  ~DelayedWorkerStart() { ::unsetenv(detail::env_name(detail::EnvVar::test_worker_start_delay)); }
  DelayedWorkerStart(const DelayedWorkerStart&) = delete;
  DelayedWorkerStart& operator=(const DelayedWorkerStart&) = delete;
};

/// The worker's pid, once the fleet has spawned it.
int worker_pid(const Fleet& fleet, size_t i) {
  for (int tries = 0; tries < 3000; ++tries) {
    if (const int pid = fleet.status()[i].pid; pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw Error("the worker was not spawned within 30 s");
}

bool process_is_gone(int pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

TEST(Fleet, RunBeforeStartIsAnError) {
  for (Strategy s : {Strategy::sequential, Strategy::processes}) {
    Fleet fleet(test::mlp_model(), cpu_fleet(s, 1));
    try {
      fleet.run(Device::cpu(), {});
      ADD_FAILURE() << "run() before start() did not fail";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("before start(). Call start() first"), std::string::npos) << e.what();
    }
  }
}

TEST(Fleet, AWorkerStoppedWhileStartingFailsOnlyItsDeviceAtTheDeadline) {
  const DelayedWorkerStart delay("cpu:1=600");  // cpu:1's worker waits, so that it is stopped mid-start
  FleetOptions o = cpu_fleet(Strategy::processes, 2);
  o.start_timeout_s = 6;  // long enough for cpu:0 to start under a sanitizer on a busy machine
  Fleet fleet(test::mlp_model(), o);
  fleet.start();
  const int pid = worker_pid(fleet, 1);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  EXPECT_FALSE(fleet.wait());  // returns: the stopped worker's device fails at its deadline
  const auto st = fleet.status();
  EXPECT_EQ(st[0].state, DeviceState::ready) << st[0].error;
  ASSERT_EQ(st[1].state, DeviceState::failed);
  EXPECT_NE(st[1].error.find("cpu:1 did not become ready within 6 s: its worker (pid " + std::to_string(pid) + ") did not answer"),
            std::string::npos)
      << st[1].error;
  EXPECT_TRUE(process_is_gone(pid)) << "the stopped worker was not killed";
  const auto inputs = random_inputs(fleet.inputs(), 1);
  EXPECT_EQ(fleet.run(Device::cpu(0), inputs).size(), 1u);
  try {
    fleet.run(Device::cpu(1), inputs);
    ADD_FAILURE() << "the timed-out device ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu:1 failed to start: cpu:1 did not become ready within 6 s"), std::string::npos) << e.what();
  }
}

TEST(Fleet, WaitWithATimeoutReturnsFalseWhileADeviceStartsAndRunWaitsOnlyUntilTheStartDeadline) {
  const DelayedWorkerStart delay("cpu=600");
  FleetOptions o = cpu_fleet(Strategy::processes, 1);
  o.start_timeout_s = 2;
  Fleet fleet(test::mlp_model(), o);
  fleet.start();
  EXPECT_FALSE(fleet.wait(0.05));
  EXPECT_EQ(fleet.status()[0].state, DeviceState::starting);
  try {
    fleet.run(Device::cpu(), random_inputs({{"input", ElementType::float32, {1, 64}, {}}}, 1));
    ADD_FAILURE() << "run() on a device that never became ready returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not become ready within 2 s"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fleet.wait());
  EXPECT_EQ(fleet.status()[0].state, DeviceState::failed);
  EXPECT_THROW(fleet.wait(-1), Error);
}

// Ctrl-C in Python ends the `with` block while a worker starts: the fleet's exit stops the worker at
// once instead of waiting for its start, its device fails, and nothing is left for later starts.
TEST(Fleet, ShutdownWhileADeviceStartsStopsItsWorkerAtOnce) {
  const DelayedWorkerStart delay("cpu=600");
  FleetOptions o = cpu_fleet(Strategy::processes, 1);
  o.cache_dir = test::fresh_dir("shutdown-while-starting-cache").string();
  Fleet fleet(test::mlp_model(), o);
  fleet.start();
  const int pid = worker_pid(fleet, 0);
  EXPECT_FALSE(fleet.wait(0.2));
  const auto begin = std::chrono::steady_clock::now();
  fleet.shutdown();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(), 5.0);
  EXPECT_EQ(::kill(pid, 0), -1) << "the worker " << pid << " still runs";
  EXPECT_EQ(fleet.status()[0].state, DeviceState::failed);
  EXPECT_TRUE(fleet.left_behind().empty());
}

// Fleet::shutdown held the fleet's mutex through its socket I/O (releasing sessions, handing workers
// over, stopping them: up to 10 s each), so that status() on another thread waited that long (issue 50).
TEST(Fleet, StatusAnswersWhileShutdownWaitsForAWorker) {
  Fleet fleet(test::mlp_model(), cpu_fleet(Strategy::processes, 1));
  fleet.start();
  ASSERT_TRUE(fleet.wait(120));
  test::stop_process(fleet.status()[0].pid);  // the worker will not answer the stop request: shutdown waits for it
  auto shutting = std::async(std::launch::async, [&fleet] { fleet.shutdown(); });
  std::vector<DeviceStatus> seen;
  do {
    seen = fleet.status();
  } while (seen[0].state != DeviceState::stopped);
  EXPECT_EQ(shutting.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "status() returned only once shutdown had let go of the worker";
  EXPECT_THROW(fleet.run(Device::cpu(0), random_inputs(fleet.inputs(), 1)), Error) << "a run after shutdown began";
  shutting.get();
}

// A child forked from a process that holds a fleet has a copy of it but none of its threads, and its
// workers are the parent's: the copy refuses every use and goes without stopping anything. The child
// hung (two hours, what_is_left()'s wait) or aborted as it ended, and could stop the parent's workers
// (issue 58's audit).
TEST(Fleet, AForkedChildsCopyIsRefusedAndEndsWithoutTouchingTheParents) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer's exit check in the child counts the parent's threads, which a forked child never
  // has, as leaked (exit code 66): this test runs in the other builds.
  GTEST_SKIP() << "a child forked from a threaded process ends with ThreadSanitizer's thread-leak report";
#endif
  for (const Strategy strategy : {Strategy::processes, Strategy::threads}) {
    Fleet fleet(test::mlp_model(), cpu_fleet(strategy, 1));
    fleet.start();
    ASSERT_TRUE(fleet.wait(120));
    const auto inputs = random_inputs(fleet.inputs(), 1);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::alarm(20);  // a child that hangs ends by SIGALRM, which the parent sees
      int code = 0;
      try {
        fleet.run(Device::cpu(0), inputs);
        code = 2;  // used the parent's session or worker
      } catch (const Error& e) {
        if (std::string(e.what()).find("forked") == std::string::npos) code = 3;
      }
      fleet.shutdown();
      if (!fleet.what_is_left().empty()) code = 4;
      fleet.~Fleet();  // as the child's exit would: it must return at once
      ::_exit(code);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << to_string(strategy) << ": the child ended by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << to_string(strategy);
    EXPECT_EQ(fleet.run(Device::cpu(0), inputs).size(), 1u) << to_string(strategy) << ": the parent's fleet after the child";
  }
}

TEST(Fleet, InputsAndOutputsAreKnownBeforeStart) {
  Fleet fleet(test::dynamic_mlp_model(), cpu_fleet(Strategy::sequential, 1));
  const auto inputs = fleet.inputs();
  const auto outputs = fleet.outputs();
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].name, "input");
  EXPECT_EQ(inputs[0].shape[0], -1);
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  EXPECT_EQ(fleet.inputs()[0].shape, inputs[0].shape);
  EXPECT_EQ(fleet.inputs()[0].dim_names, inputs[0].dim_names);
  EXPECT_EQ(fleet.outputs()[0].name, outputs[0].name);
}

TEST(Fleet, ADeviceNotInTheFleetIsRefusedWithTheDevicesItHas) {
  Fleet fleet(test::mlp_model(), cpu_fleet(Strategy::sequential, 2));
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const Error e = test::error_from([&] { fleet.ready(Device::cuda(0)); });
  EXPECT_NE(std::string(e.what()).find("device cuda:0 is not part of this fleet; it has: cpu,cpu:1"), std::string::npos) << e.what();
}

TEST(Fleet, AWorkerStoppedMidRunFailsTheRunAtTheDeadline) {
  FleetOptions o = cpu_fleet(Strategy::processes, 2);
  o.run_timeout_s = 2;
  Fleet fleet(test::mlp_model(), o);
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const int pid = fleet.status()[0].pid;
  test::stop_process(pid);
  const auto inputs = random_inputs(fleet.inputs(), 1);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second finds the device failed
    try {
      fleet.run(Device::cpu(0), inputs);
      ADD_FAILURE() << "a stopped worker answered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cpu did not finish a run within 2 s: its worker (pid " + std::to_string(pid) + ") did not answer"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(process_is_gone(pid)) << "the stopped worker was not killed";
  EXPECT_EQ(fleet.status()[0].state, DeviceState::failed);
  EXPECT_EQ(fleet.run(Device::cpu(1), inputs).size(), 1u);
}

// A worker process hands its warnings to its parent with its replies instead of printing them: two
// workers that each warn print one line, in the parent. (ONNX Runtime warns of an initializer no node
// uses, on the CPU too.)
TEST(Fleet, WorkersHandOnnxRuntimesWarningsToTheParentWhichSaysEachOnce) {
  onnx::GraphParts p;
  p.name = "unused";
  p.nodes.push_back(onnx::node("Identity", "id", {"x"}, {"y"}));
  p.initializers.push_back(onnx::float_scalar_tensor("unused_weight", 1.0f));
  p.inputs.push_back(onnx::value_info("x", onnx::DataType::float32, {2, 3}));
  p.outputs.push_back(onnx::value_info("y", onnx::DataType::float32, {2, 3}));
  const std::string model = (test::scratch_dir() / "unused-initializer.onnx").string();
  {
    std::ofstream out(model, std::ios::binary);
    onnx::model(std::move(p), 17, {}).write(out);
  }
  const test::CapturedLog log;
  FleetOptions o;
  o.strategy = Strategy::processes;
  o.devices = {Device::cpu(0), Device::cpu(1)};
  Fleet fleet(model, o);
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  EXPECT_EQ(log.count("Removing initializer 'unused_weight'"), 1u) << log.text();
}

// --cuda-graph (cuda.cuda_graph) on CPUs only was accepted without a word: it is said once.
TEST(Fleet, CudaGraphsOnTheCpuAreWarnedOf) {
  FleetOptions o = cpu_fleet(Strategy::sequential, 1);
  o.config.cuda.cuda_graph = true;
  const test::CapturedLog log;
  Fleet fleet(test::mlp_model(), o);
  EXPECT_EQ(log.count("`cuda.cuda_graph` is on, but the devices (cpu) are CPUs"), 1u) << log.text();
}

TEST(Fleet, TimeoutsMustBePositive) {
  FleetOptions o = cpu_fleet(Strategy::processes, 1);
  o.start_timeout_s = 0;
  EXPECT_THROW(Fleet(test::mlp_model(), o), Error);
  o.start_timeout_s = 1;
  o.run_timeout_s = std::nan("");
  EXPECT_THROW(Fleet(test::mlp_model(), o), Error);
}

TEST(Fleet, StrategiesParseAndPrint) {
  for (Strategy s : all_strategies()) EXPECT_EQ(parse_strategy(to_string(s)), s);
  EXPECT_EQ(parse_strategy("auto"), Strategy::automatic);
  EXPECT_THROW(parse_strategy("fastest"), Error);
}

TEST(Fleet, StartReportsRoundTripAndRejectMalformedInput) {
  Fleet fleet(test::mlp_model(), cpu_fleet(Strategy::fleet, 1));
  fleet.start();
  fleet.wait();
  const StartReport r = make_start_report(fleet, test::mlp_model(), monotonic_ns() - 1000);
  const StartReport back = StartReport::from_json(r.to_json());
  EXPECT_EQ(back.strategy, "fleet");
  EXPECT_TRUE(back.all_ready);
  EXPECT_EQ(back.devices.size(), 1u);
  EXPECT_EQ(back.ready_ns, r.ready_ns);
  EXPECT_EQ(back.timeline.events().size(), r.timeline.events().size());
  EXPECT_THROW(StartReport::from_json("{\"x\": 1}"), Error);
  EXPECT_THROW(StartReport::from_json("not json"), Error);
}

}  // namespace ortfleet

#include "fleet/local/local_start.hpp"

namespace ortfleet {

TEST(Fleet, WithoutAHomeForTheCacheTheFleetStartsWithoutIt) {
  const test::ScopedEnv no_cache("ORTFLEET_CACHE", std::nullopt);
  const test::ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
  const test::ScopedEnv no_home("HOME", std::nullopt);
  EXPECT_EQ(detail::tuned_for_fleet(RunConfig{}, Device::cpu(), 1).session.optimized_model_cache, false);
  FleetOptions o;
  o.devices = {Device::cpu()};
  o.strategy = Strategy::fleet;
  Fleet fleet(test::mlp_model(), o);
  fleet.start();
  EXPECT_TRUE(fleet.wait()) << fleet.status().front().error;
}

TEST(Fleet, TheFleetStrategyTunesOnlyWhatTheUserLeftUnset) {
  const RunConfig defaults;
  const RunConfig gpu = detail::tuned_for_fleet(defaults, Device::cuda(0), 4);
  EXPECT_EQ(gpu.session.optimized_model_cache, true);
  EXPECT_FALSE(gpu.session.thread_spinning);
  EXPECT_GE(gpu.session.intra_op_threads, 1);
  EXPECT_LE(gpu.session.intra_op_threads, 4);
  RunConfig mine;
  mine.session.optimized_model_cache = false;
  mine.session.intra_op_threads = 7;
  const RunConfig kept = detail::tuned_for_fleet(mine, Device::cpu(), 2);
  EXPECT_EQ(kept.session.optimized_model_cache, false);
  EXPECT_EQ(kept.session.intra_op_threads, 7);
  EXPECT_TRUE(detail::tuned_for_fleet(defaults, Device::cpu(), 2).session.thread_spinning);  // CPU sessions keep spinning
  if (std::getenv("CUDA_DEVICE_MAX_CONNECTIONS") == nullptr) {
    EXPECT_EQ(gpu.session.cuda_max_connections, 1);
  }
  EXPECT_EQ(detail::tuned_for_fleet(defaults, Device::cpu(), 2).session.cuda_max_connections, 0);
}

}  // namespace ortfleet
