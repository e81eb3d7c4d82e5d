#include "fleet/worker/worker_channel.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>

#include "base/crash_report.hpp"
#include "base/environment.hpp"
#include "base/system_paths.hpp"
#include "engine/providers/provider_registry.hpp"
#include "fleet/worker/device_tensors.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr const char* kWorkerName = "ortfleet-worker";
// Control requests (init, release, attach, status) are quick; a worker silent this long is hung.
constexpr double kControlTimeoutS = 60;
// Letting go of a session at shutdown: not worth holding up a job's exit for long.
constexpr double kReleaseTimeoutS = 10;
// How a worker ended when this process could not wait for it (an adopted one, or one reaped elsewhere).
constexpr int kUnknownStatus = -1;

/// What a request was for, in the user's words ("a run", not the protocol's "ring"): what a worker that
/// failed it was doing.
std::string request_in_words(const std::string& op) {
  static const std::map<std::string, std::string> words = {
      {message::init.op, "its start-up"},       {message::start.op, "a start"},
      {message::run.op, "a run"},               {message::ring.op, "a run"},  // the ring carries the runs: set up before the first
      {message::release.op, "the release of a session"}, {message::attach.op, "a start on it (attaching a channel)"},
      {message::evict.op, "an eviction"},      {message::status.op, "a status request"},
      {message::stop.op, "its stop"},          {message::adopt.op, "its adoption by a pool"},
      {message::trim.op, "a trim of its memory"},
  };
  const auto found = words.find(op);
  return found != words.end() ? found->second : "request '" + op + "'";
}

std::string timeout_hint() {
  return "The worker was killed. If this is expected to take that long, raise the timeout (" + named(Setting::start_timeout) +
         " for a start, " + named(Setting::run_timeout) + " for a run); else look for what stopped it (SIGSTOP, a debugger, a hung GPU driver)";
}
}  // namespace

std::string seconds_text(double seconds) { return fmt::format("{:g} s", seconds); }

std::string find_worker_executable(const std::string& explicit_path) {
  std::vector<fs::path> candidates;
  if (!explicit_path.empty()) candidates.emplace_back(explicit_path);
  else if (auto v = env_value(EnvVar::worker)) candidates.emplace_back(*v);
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
              "Set ORTFLEET_WORKER to its path, or use " + named(Setting::strategy, "threads") + " or sequential");
}

std::string resolve_ort_library(const std::string& explicit_library) {
  if (!explicit_library.empty()) return explicit_library;
  for (const auto& c : runtime_candidates()) {
    if (c.exists) return c.path;
  }
  return {};
}

WorkerRuntime resolve_worker_runtime(const std::string& explicit_executable, const std::string& explicit_library) {
  WorkerRuntime runtime;
  runtime.executable = find_worker_executable(explicit_executable);
  runtime.ort_library = resolve_ort_library(explicit_library);
  return runtime;
}

// --- one channel, the parent's or a client's side ---------------------------------------------------

WorkerChannel::WorkerChannel(UniqueFd socket, Device device, int pid, Hooks hooks)
    : device_(std::move(device)),
      pid_(pid),
      hooks_(std::move(hooks)),
      channel_(std::move(socket)),
      transfers_(std::make_unique<DeviceTensorsClient>(device_)) {}

WorkerChannel::~WorkerChannel() { close_ring(); }

void WorkerChannel::close_ring() {
  std::shared_ptr<RingClient> ring;
  {
    std::lock_guard ring_lock(ring_mutex_);
    ring = ring_;
  }
  if (ring) ring->shutdown();
}

bool WorkerChannel::alive() const { return reachable_.load(); }  // never waits on a request in flight

void WorkerChannel::gone(const std::string& doing) {
  reachable_ = false;
  if (hooks_.gone) {  // a worker whose messages this process never sees (a pool's): the hook says where they are
    const Error said = hooks_.gone(doing);
    if (gone_.empty()) gone_ = said.what_failed();
    throw said;
  }
  const std::string how = hooks_.how_it_ended ? hooks_.how_it_ended() : "closed its connection";
  const std::string what = "the worker process for " + device_.to_string() + " " + how + " during " + doing;
  if (gone_.empty()) gone_ = what;
  // A crash inside ONNX Runtime comes with its own line (what, where, and the command that finds the
  // node); anything else left its reason on the worker's stderr.
  const bool explained = how.find("inside ONNX Runtime") != std::string::npos;
  throw Error(what, explained ? "" : "Its messages above say why; run with " + named(Setting::strategy, "threads") + " to see the failure in-process",
              device_.to_string());
}

void WorkerChannel::unresponsive(const std::string& timed_out, const std::string& timeout_hint) {
  // Silent but alive (stopped, hung in a driver call): it will not answer later either, and it may
  // hold a GPU.
  if (hooks_.kill) hooks_.kill();
  gone_ = timed_out + (hooks_.kill ? "; it was killed" : "");
  reachable_ = false;
  throw Error(timed_out, timeout_hint, device_.to_string());
}

std::string WorkerChannel::run_timed_out(double timeout_s) const {
  return fmt::format("{} did not finish a run within {}: its worker (pid {}) did not answer", device_.to_string(),
                     seconds_text(timeout_s), pid_);
}

Error WorkerChannel::no_worker_error() const {
  return Error(device_.to_string() + " has no worker any more: " + gone_, "Start a new Fleet", device_.to_string());
}

void WorkerChannel::throw_if_gone() const {
  if (!gone_.empty()) throw no_worker_error();
}

std::optional<Error> WorkerChannel::gone_error() const {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || gone_.empty()) return std::nullopt;
  return no_worker_error();
}

Message WorkerChannel::expect(Received reply, const char* expected, const std::string& doing, const std::string& timed_out,
                              const std::string& timeout_hint) {
  if (reply.kind == Received::Kind::timed_out) unresponsive(timed_out, timeout_hint);
  if (reply.kind == Received::Kind::closed) gone(doing);
  if (reply.kind == Received::Kind::malformed) {
    throw Error("the worker process (pid " + std::to_string(pid_) + ") sent a malformed message during " + doing + ": " + reply.problem,
                "The worker and its parent come from different ortfleet builds?", device_.to_string());
  }
  // ONNX Runtime's warnings in the worker, counted here with this process's: said once, not per worker.
  if (const auto warnings = reply.message.body.find("ort_warnings"); warnings != reply.message.body.end()) {
    add_ort_warnings(ort_warnings_from_json(*warnings));
    reply.message.body.erase(warnings);
  }
  if (event_of(reply.message.body) != expected) {
    throw error_from_json(reply.message.body.value("error", json()), device_.to_string());
  }
  return std::move(reply.message);
}

Message WorkerChannel::call(const MessageKind& kind, json fields, double timeout_s, const std::vector<int>& fds) {
  std::lock_guard lock(mutex_);
  const std::string op = kind.op;
  const bool starting = is_request(op, message::start), running = is_request(op, message::run);
  throw_if_gone();
  try {
    channel_.send(request_of(kind, std::move(fields)), fds);
  } catch (const Error&) {
    gone(request_in_words(op));  // the worker is gone: say how it ended
  }
  const std::string doing = request_in_words(op);
  const std::string timed_out =
      starting ? fmt::format("{} did not become ready within {}: its worker (pid {}) did not answer", device_.to_string(),
                             seconds_text(timeout_s), pid_)
      : running ? run_timed_out(timeout_s)
                : fmt::format("the worker for {} (pid {}) did not answer {} within {}", device_.to_string(), pid_, doing,
                              seconds_text(timeout_s));
  return expect(channel_.receive(deadline_in(timeout_s, monotonic_ns())), kind.answer, doing, timed_out, timeout_hint());
}

WorkerReady WorkerChannel::start(const LocalStartPlan& plan, double timeout_s) {
  WorkerReady ready = ready_from_json(call(message::start, {{"plan", plan_to_json(plan)}}, timeout_s).body);
  ring(timeout_s);  // now, so that the first run does not pay for it
  return ready;
}

WorkerReady ready_from_json(const json& body) {
  WorkerReady ready;
  ready.session = body.at("session").get<std::string>();
  ready.status = status_from_json(body.at("status"));
  ready.inputs = specs_from_json(body.at("inputs"));
  ready.outputs = specs_from_json(body.at("outputs"));
  ready.timeline = Timeline::from_json(body.at("timeline").dump()).events();
  return ready;
}

std::shared_ptr<RingClient> WorkerChannel::ring(double timeout_s) {
  std::lock_guard ring_lock(ring_mutex_);
  if (ring_opened_) return ring_;
  ring_opened_ = true;
  if (!ring_chosen_.value_or(env_on(EnvVar::worker_ring).value_or(true))) return nullptr;
  auto ring = RequestRing::create(RingClient::kSlots, RingClient::kInitialSlotBytes);
  call(message::ring, nullptr, std::min(timeout_s, kControlTimeoutS), {ring->fd()});
  RingClient::Peer peer;
  peer.device = device_.to_string();
  peer.alive = [this] { return !channel_.peer_closed(); };
  peer.install = [this](int fd) { call(message::ring, nullptr, kControlTimeoutS, {fd}); };
  peer.failure = [this](RequestRing::Wait why, double run_timeout_s) { return ring_failure(why, run_timeout_s); };
  peer.receive = [this](std::vector<WireTensor> outputs, bool outputs_on_device) {
    return transfers_->outputs(std::move(outputs), outputs_on_device);
  };
  ring_ = std::make_shared<RingClient>(std::move(peer), std::move(ring));
  return ring_;
}

void WorkerChannel::choose_request_ring(bool use) {
  std::lock_guard ring_lock(ring_mutex_);
  ring_chosen_ = use;
}

std::exception_ptr WorkerChannel::ring_failure(RequestRing::Wait why, double timeout_s) {
  std::lock_guard lock(mutex_);
  try {
    throw_if_gone();  // another run already found out
    if (why == RequestRing::Wait::timed_out) unresponsive(run_timed_out(timeout_s), timeout_hint());
    gone(request_in_words(message::run.op));
  } catch (...) {
    return std::current_exception();
  }
}

std::future<std::vector<Tensor>> WorkerChannel::run_async(const std::string& session, const std::vector<Tensor>& inputs, double timeout_s,
                                                          bool outputs_on_device) {
  {
    std::lock_guard lock(mutex_);
    throw_if_gone();
  }
  if (const auto ring = this->ring(timeout_s)) return ring->run_async(transfers_->request(inputs, outputs_on_device), session, timeout_s);
  // The socket carries one run at a time: a thread waits for this one (the inputs' memory is copied first).
  std::vector<Tensor> copies;
  for (const auto& t : transfers_->host_inputs(inputs)) copies.push_back(Tensor::host_copy(t.name, t.type, t.shape, t.data));
  return std::async(std::launch::async, [this, session, copies = std::move(copies), timeout_s, outputs_on_device] {
    return run_on_socket(session, copies, timeout_s, outputs_on_device);
  });
}

std::vector<Tensor> WorkerChannel::run(const std::string& session, const std::vector<Tensor>& inputs, double timeout_s, bool outputs_on_device) {
  {
    std::lock_guard lock(mutex_);
    throw_if_gone();
  }
  if (const auto ring = this->ring(timeout_s)) return ring->run(transfers_->request(inputs, outputs_on_device), session, timeout_s);
  return run_on_socket(session, transfers_->host_inputs(inputs), timeout_s, outputs_on_device);
}

std::vector<Tensor> WorkerChannel::run_on_socket(const std::string& session, const std::vector<Tensor>& host, double timeout_s,
                                                 bool outputs_on_device) {
  std::lock_guard one_run(socket_run_mutex_);
  const json described = pack_tensors(host, input_buffer_);
  Message reply = call(message::run, {{"session", session}, {"inputs", described}}, timeout_s, {input_buffer_->fd()});
  if (reply.fds.empty()) throw Error("the worker sent outputs without their shared memory", {}, device_.to_string());
  // The worker writes its next outputs into the same buffer: hand out copies (outputs are small next
  // to inputs: logits, embeddings) and keep the mapping for the next call.
  std::vector<Tensor> outputs;
  for (const auto& t : unpack_tensors(reply.body.at("outputs"), outputs_.map(std::move(reply.fds.front())))) {
    outputs.push_back(Tensor::host_copy(t.name, t.type, t.shape, t.data));
  }
  return transfers_->outputs(host_message(outputs).tensors, outputs_on_device);
}

TransferCounters WorkerChannel::transfer_counters() const { return transfers_->counters(); }

void WorkerChannel::release(const std::string& session) {
  try {
    call(message::release, {{"session", session}}, kReleaseTimeoutS);
  } catch (const Error& e) {
    spdlog::debug("releasing a session on {}: {}", device_.to_string(), e.what());
  }
}

// --- the worker process, as its parent sees it -------------------------------------------------------

WorkerProcess::WorkerProcess(const std::string& executable, const Device& device, bool narrow, bool background) : device_(device) {
  auto [mine, theirs] = MessageChannel::socket_pair();
  SpawnRequest request;
  request.argv = {executable, kWorkerChannelFdArgument + std::to_string(kWorkerChannelFd), kWorkerDeviceArgument + device.to_string()};  // the device shows in ps
  int crash_pipe[2] = {-1, -1};
  if (::pipe2(crash_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("cannot make a pipe for the worker", std::strerror(errno), device.to_string());
  crash_reports_ = UniqueFd(crash_pipe[0]);
  const UniqueFd crash_writer(crash_pipe[1]);
  request.descriptors = {{theirs.get(), kWorkerChannelFd}, {crash_writer.get(), kWorkerCrashFd}};
  request.environment[env_name(EnvVar::crash_fd)] = std::to_string(kWorkerCrashFd);
  const auto level = spdlog::level::to_string_view(spdlog::get_level());
  request.environment[env_name(EnvVar::worker_log_level)] = std::string(level.data(), level.size());
  if (background) request.environment[env_name(EnvVar::worker_background)] = "1";
  else request.unset_environment.push_back(env_name(EnvVar::worker_background));
  // What the device's provider sets in its workers (a GPU worker's cuDNN record; with `narrow`, only its
  // own GPU visible).
  WorkerEnvironment provided = provider_for(device).worker_environment(device, executable, narrow);
  if (provided.narrowed) {
    visible_ = provided.visible_devices;
    request.argv.push_back(kWorkerNarrowedArgument);
  }
  for (auto& [name, value] : provided.variables) request.environment[name] = std::move(value);
  try {
    const Spawned spawned = spawn_process(request);
    pid_ = spawned.pid;
    spawn_ns_ = spawned.spawn_ns;
  } catch (const Error& e) {
    throw Error("cannot start the worker process: " + e.what_failed(), "Check that it is executable, or set ORTFLEET_WORKER",
                device.to_string());
  }
  WorkerChannel::Hooks hooks;
  hooks.how_it_ended = [this] { return how_it_ended(); };
  hooks.kill = [this] { kill_now(); };
  channel_ = std::make_unique<WorkerChannel>(std::move(mine), device, pid_, std::move(hooks));
}

WorkerProcess::WorkerProcess(AdoptedWorker adopted)
    : device_(adopted.device), visible_(std::move(adopted.visible_devices)), pid_(adopted.pid), crash_reports_(std::move(adopted.crash_reports)) {
  adopted_ = adopted.watch ? std::move(adopted.watch) : std::make_unique<PidFd>(pid_);
  WorkerChannel::Hooks hooks;
  hooks.how_it_ended = [this] { return how_it_ended(); };
  hooks.kill = [this] { kill_now(); };
  channel_ = std::make_unique<WorkerChannel>(std::move(adopted.channel), device_, pid_, std::move(hooks));
}

WorkerProcess::~WorkerProcess() { stop(); }

WorkerChannel::Hooks WorkerProcess::observer_hooks(bool end_when_unresponsive) {
  WorkerChannel::Hooks hooks;
  if (end_when_unresponsive) hooks.kill = [this] { terminate(kUnresponsiveGraceS); };
  hooks.how_it_ended = [this] {
    // The channel closed: the worker is dying, or closed only this channel. Never wait for it long.
    for (int i = 0; i < 20; ++i) {
      const std::string ended = exited();
      if (!ended.empty()) return ended;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::string("closed its connection");
  };
  return hooks;
}

std::string WorkerProcess::describe_end(int status) {
  std::string how = status == kUnknownStatus ? std::string("exited") : describe_exit_status(status);
  std::string lines;
  char buffer[4096];
  for (ssize_t n = 0; crash_reports_ && (n = ::read(crash_reports_.get(), buffer, sizeof buffer)) > 0;) lines.append(buffer, static_cast<size_t>(n));
  while (!lines.empty() && lines.back() == '\n') lines.pop_back();
  if (lines.empty()) return how;
  const auto last = lines.rfind('\n');
  std::string line = last == std::string::npos ? lines : lines.substr(last + 1);
  if (line.rfind("ortfleet: ", 0) == 0) line = line.substr(10);
  return how + " (" + line + ")";
}

bool WorkerProcess::reap_if_ended() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (adopted_) {
    // Not our child: its new parent reaps it; the pidfd says when it has exited, not how.
    if (!adopted_->exited(0)) return false;
    status = kUnknownStatus;
  } else {
    const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
    if (reaped == 0 || (reaped < 0 && errno != ECHILD)) return false;
    if (reaped < 0) status = kUnknownStatus;  // reaped by someone else (SIGCHLD ignored): gone, how unknown
  }
  ended_ = describe_end(status);
  pid_ = -1;
  return true;
}

bool WorkerProcess::ended_after(double wait_s) {
  // Looked at under the lock, waited for without it: pid() and exited() answer at once meanwhile.
  const int64_t deadline = deadline_in(wait_s, monotonic_ns());
  for (;;) {
    {
      std::lock_guard lock(process_mutex_);
      if (reap_if_ended()) return true;
    }
    if (monotonic_ns() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void WorkerProcess::send_signal(int signal) const {
  std::lock_guard lock(process_mutex_);
  if (pid_ <= 0) return;
  if (adopted_) adopted_->signal(signal);
  else ::kill(pid_, signal);
}

std::string WorkerProcess::ended_text() const {
  std::lock_guard lock(process_mutex_);
  return ended_;
}

std::string WorkerProcess::how_it_ended() {
  // The channel closed: the process is ending, or closed it and lives on (stuck in its exit, or held
  // stopped). Waited for a while, never for ever: a status or a stop of the pool must not hang on it.
  if (ended_after(kEndWaitS)) {
    const std::string ended = ended_text();
    return ended.empty() ? "closed its connection" : ended;
  }
  return fmt::format("closed its connection (its process, pid {}, still runs {})", pid(), seconds_text(kEndWaitS) + " later");
}

void WorkerProcess::kill_now() {
  if (pid() <= 0) return;
  send_signal(SIGKILL);  // SIGKILL ends a stopped process too
  const bool ended = ended_after(kEndWaitS);
  std::lock_guard lock(process_mutex_);
  ended_ = ended ? "was killed for not answering" : "was sent SIGKILL for not answering (it had not ended " + seconds_text(kEndWaitS) + " later)";
}

std::string WorkerProcess::exited() {
  std::lock_guard lock(process_mutex_);
  reap_if_ended();
  return pid_ > 0 ? std::string() : (ended_.empty() ? "stopped" : ended_);
}

bool WorkerProcess::alive() const {
  // The channel's lock is not taken under the process's: a failing channel call holds its own lock
  // while it asks the process how it ended.
  return pid() > 0 && channel_->alive();
}

std::vector<TimelineEvent> WorkerProcess::initialise(const LocalStartPlan& plan, size_t max_resident_sessions, bool prime,
                                                  double timeout_s) {
  const json body =
      channel_->call(message::init, {{"plan", plan_to_json(plan)}, {"max_resident_sessions", max_resident_sessions}, {"prime", prime}}, timeout_s)
          .body;
  return Timeline::from_json(body.at("timeline").dump()).events();
}

UniqueFd WorkerProcess::attach(const std::vector<std::string>& sessions, double timeout_s) {
  auto [mine, theirs] = MessageChannel::socket_pair();
  channel_->call(message::attach, {{"hold", sessions}}, timeout_s, {theirs.get()});
  return std::move(mine);
}

void WorkerProcess::kill_after(double grace_s, const std::string& why) {
  if (ended_after(grace_s)) return;
  send_signal(SIGKILL);
  // A process in an uninterruptible wait (a hung driver call) ends once that returns: not waited for
  // past kEndWaitS; a later exited() reaps it.
  const bool ended = ended_after(kEndWaitS);
  if (!ended) spdlog::debug("{}: the worker pid {} had not ended {} after SIGKILL", device_.to_string(), pid(), seconds_text(kEndWaitS));
  std::lock_guard lock(process_mutex_);
  ended_ = why;
}

void WorkerProcess::terminate(double grace_s) {
  channel_->close_ring();
  if (pid() <= 0) return;
  send_signal(SIGTERM);
  kill_after(grace_s, "was killed: it did not stop within " + seconds_text(grace_s) + " of SIGTERM");
}

void WorkerProcess::stop() {
  channel_->close_ring();  // runs in flight end before the process they wait for is reaped
  if (pid() <= 0) return;
  try {
    channel_->call(message::stop, nullptr, 10);
  } catch (const Error&) {
    // already gone, or not answering: reaped below
  }
  // Give it time to release its GPU memory cleanly, then insist.
  kill_after(10, "was killed: it did not stop within 10 s of its stop request");
}

std::pair<int, int> WorkerProcess::handover_fds() {
  channel_->close_ring();
  return {channel_->fd(), crash_reports_.get()};
}

void WorkerProcess::handed_over() {
  std::lock_guard lock(process_mutex_);
  pid_ = -1;  // this object no longer owns it: stop() and the destructor leave it running
  ended_ = "was handed over to the warm pool";
}

}  // namespace ortfleet::detail
