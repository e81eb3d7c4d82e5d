#include "worker.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cuda_driver.hpp"
#include "ortfleet/error.hpp"
#include "ortfleet/fleet.hpp"
#include "system_paths.hpp"

extern char** environ;

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kChannelFd = 3;
constexpr const char* kWorkerName = "ortfleet-worker";

json error_json(const std::string& what) { return {{"event", "failed"}, {"error", what}}; }

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")" +
           (sig == SIGKILL ? ", possibly by the out-of-memory killer" : "");
  }
  return "ended (status " + std::to_string(status) + ")";
}
}  // namespace

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

json plan_to_json(const LocalStartPlan& plan) {
  json devices = json::array();
  for (const auto& d : plan.devices) devices.push_back(d.to_string());
  const char* mode = plan.mode == LocalMode::sequential ? "sequential" : plan.mode == LocalMode::threads ? "threads" : "overlapped";
  return {{"model", plan.model_path}, {"devices", devices}, {"config", json::parse(plan.config.to_json())},
          {"mode", mode}, {"warmup_runs", plan.warmup_runs}, {"dynamic_dim", plan.dynamic_dim},
          {"fleet_size", plan.fleet_size}, {"ort_library", plan.ort_library}, {"cache_dir", plan.cache_dir},
          {"profile_dir", plan.profile_dir}};
}

LocalStartPlan plan_from_json(const json& j) {
  LocalStartPlan plan;
  plan.model_path = j.at("model").get<std::string>();
  for (const auto& d : j.at("devices")) plan.devices.push_back(Device::parse(d.get<std::string>()));
  plan.config = RunConfig::from_json(j.at("config").dump(), "the fleet's start request");
  const std::string mode = j.at("mode").get<std::string>();
  plan.mode = mode == "sequential" ? LocalMode::sequential : mode == "threads" ? LocalMode::threads : LocalMode::overlapped;
  plan.warmup_runs = j.at("warmup_runs").get<int>();
  plan.dynamic_dim = j.at("dynamic_dim").get<int64_t>();
  plan.fleet_size = j.at("fleet_size").get<int>();
  plan.ort_library = j.at("ort_library").get<std::string>();
  plan.cache_dir = j.at("cache_dir").get<std::string>();
  plan.profile_dir = j.at("profile_dir").get<std::string>();
  return plan;
}

WorkerProcess::WorkerProcess(const std::string& executable, const Device& device) : device_(device) {
  auto [mine, theirs] = MessageChannel::socket_pair();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 onto fd 3 clears close-on-exec, so the worker inherits exactly this descriptor.
  if (theirs.get() == kChannelFd) {
    UniqueFd moved(::fcntl(theirs.get(), F_DUPFD_CLOEXEC, kChannelFd + 1));
    theirs = std::move(moved);
  }
  posix_spawn_file_actions_adddup2(&actions, theirs.get(), kChannelFd);

  spawn_ns_ = monotonic_ns();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "ORTFLEET_SPAWN_NS=", 18) != 0) env_strings.emplace_back(*e);
  }
  env_strings.push_back("ORTFLEET_SPAWN_NS=" + std::to_string(spawn_ns_));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = executable;
  std::string arg1 = "--channel-fd=" + std::to_string(kChannelFd);
  std::string arg2 = "--device=" + device.to_string();  // shows in ps
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw Error("cannot start the worker process " + executable + ": " + std::strerror(rc),
                "Check that it is executable, or set ORTFLEET_WORKER", device.to_string());
  }
  pid_ = pid;
  channel_ = std::make_unique<MessageChannel>(std::move(mine));
}

WorkerProcess::~WorkerProcess() { stop(); }

void WorkerProcess::died(const std::string& doing) {
  int status = 0;
  std::string how = "closed its connection";
  if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) {
    how = describe_exit(status);
    pid_ = -1;
  }
  throw Error("the worker process for " + device_.to_string() + " " + how + " while " + doing,
              "Its messages above say why; run with --strategy threads to see the failure in-process", device_.to_string());
}

json WorkerProcess::start(const LocalStartPlan& plan) {
  std::lock_guard lock(mutex_);
  channel_->send({{"op", "start"}, {"plan", plan_to_json(plan)}});
  auto reply = channel_->receive();
  if (!reply) died("starting");
  if (reply->body.value("event", "") != "ready") {
    throw Error(reply->body.value("error", std::string("the worker failed without saying why")), {}, device_.to_string());
  }
  return reply->body;
}

std::vector<Tensor> WorkerProcess::run(const std::vector<Tensor>& inputs) {
  std::lock_guard lock(mutex_);
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
  auto reply = channel_->receive();
  if (!reply) died("running");
  if (reply->body.value("event", "") != "outputs") {
    throw Error(reply->body.value("error", std::string("the worker failed without saying why")), {}, device_.to_string());
  }
  if (reply->fds.empty()) throw Error("the worker sent outputs without their shared memory", {}, device_.to_string());
  // The worker writes its next outputs into the same buffer: hand out copies (outputs are small next
  // to inputs: logits, embeddings) and keep the mapping for the next call.
  std::vector<Tensor> outputs;
  for (const auto& t : unpack_tensors(reply->body.at("outputs"), outputs_.map(std::move(reply->fds.front())))) {
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
  MessageChannel channel{UniqueFd(channel_fd)};
  Timeline timeline(main_ns);
  std::vector<LocalDeviceResult> results;
  std::shared_ptr<SharedBuffer> output_buffer;  // reused: the parent copies outputs out before the next request
  ReceivedBuffer inputs;                       // the parent's input buffer, mapped once
  std::string lane;
  while (true) {
    std::optional<Message> request;
    try {
      request = channel.receive();
    } catch (const std::exception&) {
      return 1;
    }
    if (!request) return 0;  // the parent went away
    const std::string op = request->body.value("op", "");
    try {
      if (op == "stop") {
        results.clear();  // sessions release their GPU memory before the process ends
        return 0;
      }
      if (op == "start") {
        LocalStartPlan plan = plan_from_json(request->body.at("plan"));
        lane = plan.devices.empty() ? "worker" : plan.devices.front().to_string();
        if (auto spawn = env_var("ORTFLEET_SPAWN_NS")) {
          timeline.add({phase::process_start, lane, std::stoll(*spawn), main_ns, 0, {}});
        }
        start_locally(plan, timeline, results, [](size_t) {});
        json reply;
        if (results.empty() || results.front().session == nullptr) {
          reply = error_json(results.empty() ? "no device" : results.front().error);
        } else {
          const auto& r = results.front();
          reply = {{"event", "ready"},
                   {"ready_ns", r.ready_ns},
                   {"inputs", specs_to_json(r.session->inputs())},
                   {"outputs", specs_to_json(r.session->outputs())},
                   {"provider", r.session->provider().path},
                   {"provider_note", r.session->provider().note},
                   {"profile_path", r.profile_path},
                   {"memory_bytes", r.memory_bytes}};
        }
        // Every phase of this process, shared ones too, is reported on this worker's lane.
        json events = json::array();
        for (auto e : timeline.events()) {
          if (e.lane == "process") e.lane = lane;
          events.push_back({{"name", e.name}, {"lane", e.lane}, {"start_ns", e.start_ns}, {"end_ns", e.end_ns},
                            {"pid", e.pid}, {"args", e.args}});
        }
        reply["timeline"] = events;
        channel.send(reply);
        continue;
      }
      if (op == "run") {
        if (results.empty() || results.front().session == nullptr) throw Error("the session is not ready");
        if (request->fds.empty()) throw Error("a run request came without its shared memory");
        auto outputs = results.front().session->run(unpack_tensors(request->body.at("inputs"), inputs.map(std::move(request->fds.front()))));
        const json described = pack_tensors(outputs, output_buffer);
        channel.send({{"event", "outputs"}, {"outputs", described}}, {output_buffer->fd()});
        continue;
      }
      channel.send(error_json("unknown request '" + op + "'"));
    } catch (const std::exception& e) {
      try {
        channel.send(error_json(e.what()));
      } catch (const std::exception&) {
        return 1;
      }
    }
  }
}

}  // namespace ortfleet::detail

int ortfleet::run_worker_process(int channel_fd) { return detail::worker_main(channel_fd); }
