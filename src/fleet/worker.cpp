#include "fleet/worker.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "base/system_paths.hpp"
#include "engine/cuda_driver.hpp"
#include "fleet/wire.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/fleet/worker.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kChannelFd = 3;
constexpr const char* kWorkerName = "ortfleet-worker";
// The parent's log level, so that `ortfleet -v` shows a worker's debug messages (ONNX Runtime's raw
// error text among them) too.
constexpr const char* kLogLevelVariable = "ORTFLEET_WORKER_LOG_LEVEL";

json failure(const std::exception& e) { return {{"event", "failed"}, {"error", error_to_json(e)}}; }

/// The test hook kTestStartDelayVariable: sleeps when it names this worker's device.
void delay_start_if_asked(const std::string& device) {
  const auto setting = env_var(kTestStartDelayVariable);
  if (!setting) return;
  const auto equals = setting->rfind('=');
  if (equals == std::string::npos || setting->substr(0, equals) != device) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(std::stod(setting->substr(equals + 1))));
}
}  // namespace

std::string seconds_text(double seconds) { return fmt::format("{:g} s", seconds); }

std::string find_worker_executable(const std::string& explicit_path) {
  std::vector<fs::path> candidates;
  if (!explicit_path.empty()) candidates.emplace_back(explicit_path);
  else if (auto v = env_var("ORTFLEET_WORKER")) candidates.emplace_back(*v);
  else {
    const fs::path here = own_binary_dir();
    candidates = {here / kWorkerName, here / "bin" / kWorkerName, here / ".." / "bin" / kWorkerName};
  }
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c).string();
  }
  std::string looked;
  for (const auto& c : candidates) looked += (looked.empty() ? "" : ", ") + c.string();
  throw Error("the worker executable " + std::string(kWorkerName) + " was not found (looked at " + looked + ")",
              "Set ORTFLEET_WORKER to its path, or use --strategy threads or sequential");
}

WorkerProcess::WorkerProcess(const std::string& executable, const Device& device) : device_(device) {
  auto [mine, theirs] = MessageChannel::socket_pair();
  SpawnRequest request;
  request.argv = {executable, "--channel-fd=" + std::to_string(kChannelFd), "--device=" + device.to_string()};  // the device shows in ps
  request.descriptors = {{theirs.get(), kChannelFd}};
  const auto level = spdlog::level::to_string_view(spdlog::get_level());
  request.environment[kLogLevelVariable] = std::string(level.data(), level.size());
  try {
    const Spawned spawned = spawn_process(request);
    pid_ = spawned.pid;
    spawn_ns_ = spawned.spawn_ns;
  } catch (const Error& e) {
    throw Error("cannot start the worker process: " + e.what_failed(), "Check that it is executable, or set ORTFLEET_WORKER",
                device.to_string());
  }
  channel_ = std::make_unique<MessageChannel>(std::move(mine));
}

WorkerProcess::~WorkerProcess() { stop(); }

void WorkerProcess::died(const std::string& doing) {
  int status = 0;
  std::string how = "closed its connection";
  if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) {
    how = describe_exit_status(status);
    pid_ = -1;
  }
  const std::string what = "the worker process for " + device_.to_string() + " " + how + " while " + doing;
  if (gone_.empty()) gone_ = what;
  throw Error(what, "Its messages above say why; run with --strategy threads to see the failure in-process", device_.to_string());
}

void WorkerProcess::unresponsive(const Error& why) {
  // Silent but alive (stopped, hung in a driver call): it will not answer later either, and it may hold
  // a GPU. SIGKILL ends a stopped process too.
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  gone_ = why.what_failed() + "; it was killed";
  throw why;
}

bool WorkerProcess::alive() const {
  std::lock_guard lock(mutex_);
  return gone_.empty() && pid_ > 0;
}

Message WorkerProcess::expect(Received reply, const char* expected, const std::string& doing, const std::string& timed_out,
                              const std::string& timeout_hint) {
  if (reply.kind == Received::Kind::timed_out) unresponsive(Error(timed_out, timeout_hint, device_.to_string()));
  if (reply.kind == Received::Kind::closed) died(doing);
  if (!reply.message.body.is_object()) throw Error("the worker process sent a message that is not an object", {}, device_.to_string());
  if (reply.message.body.value("event", "") != expected) {
    throw error_from_json(reply.message.body.value("error", json()), device_.to_string());
  }
  return std::move(reply.message);
}

WorkerProcess::Ready WorkerProcess::start(const LocalStartPlan& plan, double timeout_s) {
  std::lock_guard lock(mutex_);
  const int64_t deadline = deadline_in(timeout_s, monotonic_ns());
  const int pid = pid_;
  channel_->send({{"op", "start"}, {"plan", plan_to_json(plan)}});
  const json body =
      expect(channel_->receive(deadline), "ready", "starting",
             fmt::format("{} did not become ready within {}: its worker (pid {}) did not answer", device_.to_string(),
                         seconds_text(timeout_s), pid),
             "The worker was killed. If start-ups this long are expected, raise the start timeout (ortfleet start "
             "--timeout, FleetOptions::start_timeout_s, Fleet(start_timeout=...)); else look for what stopped it "
             "(SIGSTOP, a debugger, a hung GPU driver)")
          .body;
  Ready ready;
  ready.status = status_from_json(body.at("status"));
  ready.inputs = specs_from_json(body.at("inputs"));
  ready.outputs = specs_from_json(body.at("outputs"));
  ready.timeline = Timeline::from_json(body.at("timeline").dump()).events();
  return ready;
}

std::vector<Tensor> WorkerProcess::run(const std::vector<Tensor>& inputs, double timeout_s) {
  std::lock_guard lock(mutex_);
  if (!gone_.empty()) throw Error(device_.to_string() + " has no worker any more: " + gone_, "Start a new Fleet", device_.to_string());
  // Device tensors are copied to the host first: a worker is another process (and CUDA context).
  std::vector<Tensor> host;
  for (const auto& t : inputs) {
    if (!t.on_gpu()) {
      host.push_back(t);
      continue;
    }
    Tensor copy = Tensor::host_copy(t.name, t.type, t.shape, nullptr);
    CudaDriver::instance().copy_to_host(t.device.index, copy.data, t.data, t.bytes);
    host.push_back(std::move(copy));
  }
  const json described = pack_tensors(host, input_buffer_);
  try {
    channel_->send({{"op", "run"}, {"inputs", described}}, {input_buffer_->fd()});
  } catch (const Error&) {
    died("running");  // the worker is gone: say how it ended
  }
  const int pid = pid_;
  Message reply = expect(channel_->receive(deadline_in(timeout_s, monotonic_ns())), "outputs", "running",
                         fmt::format("{} did not finish a run within {}: its worker (pid {}) did not answer",
                                     device_.to_string(), seconds_text(timeout_s), pid),
                         "The worker was killed. If runs this long are expected, raise the run timeout "
                         "(FleetOptions::run_timeout_s, Fleet(run_timeout=...)); else look for what stopped it "
                         "(SIGSTOP, a debugger, a hung GPU driver)");
  if (reply.fds.empty()) throw Error("the worker sent outputs without their shared memory", {}, device_.to_string());
  // The worker writes its next outputs into the same buffer: hand out copies (outputs are small next
  // to inputs: logits, embeddings) and keep the mapping for the next call.
  std::vector<Tensor> outputs;
  for (const auto& t : unpack_tensors(reply.body.at("outputs"), outputs_.map(std::move(reply.fds.front())))) {
    outputs.push_back(Tensor::host_copy(t.name, t.type, t.shape, t.data));
  }
  return outputs;
}

void WorkerProcess::stop() {
  std::lock_guard lock(mutex_);
  if (pid_ <= 0) return;
  try {
    channel_->send({{"op", "stop"}});
  } catch (const Error&) {
    // already gone; reaped below
  }
  // Give it time to release its GPU memory cleanly, then insist.
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

// --- the worker's side --------------------------------------------------------------------------

int worker_main(int channel_fd) {
  const int64_t main_ns = monotonic_ns();
  if (auto level = env_var(kLogLevelVariable)) spdlog::set_level(spdlog::level::from_str(*level));
  MessageChannel channel{UniqueFd(channel_fd)};
  Timeline timeline(main_ns);
  std::vector<LocalDeviceResult> results;
  std::shared_ptr<SharedBuffer> output_buffer;  // reused: the parent copies outputs out before the next request
  ReceivedBuffer inputs;                       // the parent's input buffer, mapped once
  std::string lane;
  while (true) {
    std::optional<Message> request;
    try {
      Received received = channel.receive();
      if (received.kind != Received::Kind::message) return 0;  // the parent went away
      request = std::move(received.message);
    } catch (const std::exception&) {
      return 1;
    }
    const std::string op = request->body.value("op", "");
    try {
      if (op == "stop") {
        results.clear();  // sessions release their GPU memory before the process ends
        return 0;
      }
      if (op == "start") {
        LocalStartPlan plan = plan_from_json(request->body.at("plan"));
        lane = plan.devices.empty() ? "worker" : plan.devices.front().to_string();
        delay_start_if_asked(lane);
        if (auto spawn = env_var(kSpawnTimeVariable)) timeline.add({phase::process_start, lane, std::stoll(*spawn), main_ns, 0, {}});
        start_locally(plan, timeline, results, [](size_t) {});
        if (results.empty()) throw Error("the start request named no device");
        const auto& r = results.front();
        if (r.error) {
          channel.send(failure(*r.error));
          continue;
        }
        // Every phase of this process, shared ones too, is reported on this worker's lane.
        Timeline mine(timeline.origin_ns());
        for (auto e : timeline.events()) {
          if (e.lane == "process") e.lane = lane;
          mine.add(std::move(e));
        }
        channel.send({{"event", "ready"},
                      {"status", status_to_json(ready_status(r))},
                      {"inputs", specs_to_json(r.session->inputs())},
                      {"outputs", specs_to_json(r.session->outputs())},
                      {"timeline", json::parse(mine.to_json())}});
        continue;
      }
      if (op == "run") {
        if (results.empty() || results.front().session == nullptr) throw Error("the session is not ready", "Send a start request first");
        if (request->fds.empty()) throw Error("a run request came without its shared memory");
        auto outputs = results.front().session->run(unpack_tensors(request->body.at("inputs"), inputs.map(std::move(request->fds.front()))));
        const json described = pack_tensors(outputs, output_buffer);
        channel.send({{"event", "outputs"}, {"outputs", described}}, {output_buffer->fd()});
        continue;
      }
      throw Error("unknown request '" + op + "'", "The worker and its parent come from different ortfleet builds");
    } catch (const std::exception& e) {
      try {
        channel.send(failure(e));
      } catch (const std::exception&) {
        return 1;
      }
    }
  }
}

}  // namespace ortfleet::detail

int ortfleet::run_worker_process(int channel_fd) { return detail::worker_main(channel_fd); }
