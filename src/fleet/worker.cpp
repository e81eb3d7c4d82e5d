#include "fleet/worker.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "base/private_dir.hpp"
#include "base/system_paths.hpp"
#include "engine/content_hash.hpp"
#include "engine/cuda_driver.hpp"
#include "engine/model_digest.hpp"
#include "fleet/device_tensors.hpp"
#include "fleet/wire.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/fleet/worker.hpp"
#include "ortfleet/synth/synth.hpp"
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
// Control requests (init, release, attach, status) are quick; a worker silent this long is hung.
constexpr double kControlTimeoutS = 60;
// Letting go of a session at shutdown: not worth holding up a job's exit for long.
constexpr double kReleaseTimeoutS = 10;

json failure(const std::exception& e) { return {{"event", "failed"}, {"error", error_to_json(e)}}; }

/// The test hook kTestStartDelayVariable: sleeps when it names this worker's device.
void delay_start_if_asked(const std::string& device) {
  const auto setting = env_var(kTestStartDelayVariable);
  if (!setting) return;
  const auto equals = setting->rfind('=');
  if (equals == std::string::npos || setting->substr(0, equals) != device) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(std::stod(setting->substr(equals + 1))));
}

/// The worker's ring pages pinned for its GPU's copies, or nothing (CPU sessions; a driver that refuses).
std::shared_ptr<void> pin_for(const Device& device, const RequestRing& ring) {
  if (!device.is_gpu()) return nullptr;
  // Pinning makes every page of the ring resident: a ring grown for huge inputs stays pageable.
  constexpr size_t kMaxPinnedBytes = size_t{1} << 30;
  if (ring.mapping_bytes() > kMaxPinnedBytes) {
    spdlog::debug("{}: the request ring ({} bytes) is too large to pin; its copies are staged", device.to_string(), ring.mapping_bytes());
    return nullptr;
  }
  try {
    return CudaDriver::instance().register_host(cuda_ordinal(device), ring.mapping(), ring.mapping_bytes());
  } catch (const Error& e) {
    spdlog::debug("{}: the request ring stays pageable (its copies are staged): {}", device.to_string(), e.what());
    return nullptr;
  }
}

const char* kTimeoutHint =
    "The worker was killed. If this is expected to take that long, raise the timeout (ortfleet start --timeout, "
    "FleetOptions::start_timeout_s / run_timeout_s, Fleet(start_timeout=..., run_timeout=...)); else look for what "
    "stopped it (SIGSTOP, a debugger, a hung GPU driver)";
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

std::string resolve_ort_library(const std::string& explicit_library) {
  if (!explicit_library.empty()) return explicit_library;
  for (const auto& c : runtime_candidates()) {
    if (c.exists) return c.path;
  }
  return {};
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

bool WorkerChannel::alive() const {
  std::lock_guard lock(mutex_);
  return gone_.empty();
}

void WorkerChannel::gone(const std::string& doing) {
  const std::string how = hooks_.how_it_ended ? hooks_.how_it_ended() : "closed its connection";
  const std::string what = "the worker process for " + device_.to_string() + " " + how + " while " + doing;
  if (gone_.empty()) gone_ = what;
  throw Error(what, "Its messages above say why; run with --strategy threads to see the failure in-process", device_.to_string());
}

void WorkerChannel::unresponsive(const std::string& timed_out, const std::string& timeout_hint) {
  // Silent but alive (stopped, hung in a driver call): it will not answer later either, and it may
  // hold a GPU.
  if (hooks_.kill) hooks_.kill();
  gone_ = timed_out + (hooks_.kill ? "; it was killed" : "");
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
  if (!reply.message.body.is_object()) throw Error("the worker process sent a message that is not an object", {}, device_.to_string());
  if (reply.message.body.value("event", "") != expected) {
    throw error_from_json(reply.message.body.value("error", json()), device_.to_string());
  }
  return std::move(reply.message);
}

Message WorkerChannel::call(const json& request, const char* expected, double timeout_s, const std::vector<int>& fds) {
  std::lock_guard lock(mutex_);
  const std::string op = request.value("op", "request");
  throw_if_gone();
  try {
    channel_.send(request, fds);
  } catch (const Error&) {
    gone(op == "run" ? "running" : "handling '" + op + "'");  // the worker is gone: say how it ended
  }
  const std::string doing = op == "start" ? "starting" : op == "run" ? "running" : "handling '" + op + "'";
  const std::string timed_out =
      op == "start" ? fmt::format("{} did not become ready within {}: its worker (pid {}) did not answer", device_.to_string(),
                                  seconds_text(timeout_s), pid_)
      : op == "run" ? run_timed_out(timeout_s)
                    : fmt::format("the worker for {} (pid {}) did not answer '{}' within {}", device_.to_string(), pid_, op,
                                  seconds_text(timeout_s));
  return expect(channel_.receive(deadline_in(timeout_s, monotonic_ns())), expected, doing, timed_out, kTimeoutHint);
}

WorkerReady WorkerChannel::start(const LocalStartPlan& plan, double timeout_s) {
  WorkerReady ready = ready_from_json(call({{"op", "start"}, {"plan", plan_to_json(plan)}}, "ready", timeout_s).body);
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
  if (const auto setting = env_var(kRingVariable); setting && *setting == "0") return nullptr;
  auto ring = RequestRing::create(RingClient::kSlots, RingClient::kInitialSlotBytes);
  call({{"op", "ring"}}, "ring", std::min(timeout_s, kControlTimeoutS), {ring->fd()});
  RingClient::Peer peer;
  peer.device = device_.to_string();
  peer.alive = [this] { return !channel_.peer_closed(); };
  peer.install = [this](int fd) { call({{"op", "ring"}}, "ring", kControlTimeoutS, {fd}); };
  peer.failure = [this](RequestRing::Wait why, double run_timeout_s) { return ring_failure(why, run_timeout_s); };
  peer.receive = [this](std::vector<WireTensor> outputs, bool outputs_on_device) {
    return transfers_->outputs(std::move(outputs), outputs_on_device);
  };
  ring_ = std::make_shared<RingClient>(std::move(peer), std::move(ring));
  return ring_;
}

std::exception_ptr WorkerChannel::ring_failure(RequestRing::Wait why, double timeout_s) {
  std::lock_guard lock(mutex_);
  try {
    throw_if_gone();  // another run already found out
    if (why == RequestRing::Wait::timed_out) unresponsive(run_timed_out(timeout_s), kTimeoutHint);
    gone("running");
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
  Message reply = call({{"op", "run"}, {"session", session}, {"inputs", described}}, "outputs", timeout_s, {input_buffer_->fd()});
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
    call({{"op", "release"}, {"session", session}}, "released", kReleaseTimeoutS);
  } catch (const Error& e) {
    spdlog::debug("releasing a session on {}: {}", device_.to_string(), e.what());
  }
}

// --- the worker process, as its parent sees it -------------------------------------------------------

WorkerProcess::WorkerProcess(const std::string& executable, const Device& device, bool narrow) : device_(device) {
  auto [mine, theirs] = MessageChannel::socket_pair();
  SpawnRequest request;
  request.argv = {executable, "--channel-fd=" + std::to_string(kChannelFd), "--device=" + device.to_string()};  // the device shows in ps
  request.descriptors = {{theirs.get(), kChannelFd}};
  const auto level = spdlog::level::to_string_view(spdlog::get_level());
  request.environment[kLogLevelVariable] = std::string(level.data(), level.size());
  if (narrow) {
    if (auto visible = narrowed_visible_devices(device)) {
      visible_ = *visible;
      request.environment["CUDA_VISIBLE_DEVICES"] = visible_;
      request.argv.push_back("--narrowed");
    }
  }
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

WorkerProcess::~WorkerProcess() { stop(); }

std::string WorkerProcess::how_it_ended() {
  std::lock_guard lock(process_mutex_);
  int status = 0;
  if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) {
    ended_ = describe_exit_status(status);
    pid_ = -1;
  }
  return ended_.empty() ? "closed its connection" : ended_;
}

void WorkerProcess::kill_now() {
  std::lock_guard lock(process_mutex_);
  // SIGKILL ends a stopped process too.
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  ended_ = "was killed for not answering";
  pid_ = -1;
}

std::string WorkerProcess::exited() {
  std::lock_guard lock(process_mutex_);
  int status = 0;
  if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
    ended_ = describe_exit_status(status);
    pid_ = -1;
  }
  return pid_ > 0 ? std::string() : (ended_.empty() ? "stopped" : ended_);
}

bool WorkerProcess::alive() const {
  // The channel's lock is not taken under the process's: a failing channel call holds its own lock
  // while it asks the process how it ended.
  return pid() > 0 && channel_->alive();
}

std::vector<TimelineEvent> WorkerProcess::initialise(const LocalStartPlan& plan, size_t max_resident_sessions, bool prime,
                                                  double timeout_s) {
  const json body = channel_->call({{"op", "init"},
                                    {"plan", plan_to_json(plan)},
                                    {"max_resident_sessions", max_resident_sessions},
                                    {"prime", prime}},
                                   "initialised", timeout_s)
                        .body;
  return Timeline::from_json(body.at("timeline").dump()).events();
}

UniqueFd WorkerProcess::attach(const std::vector<std::string>& sessions, double timeout_s) {
  auto [mine, theirs] = MessageChannel::socket_pair();
  channel_->call({{"op", "attach"}, {"hold", sessions}}, "attached", timeout_s, {theirs.get()});
  return std::move(mine);
}

void WorkerProcess::stop() {
  channel_->close_ring();  // runs in flight end before the process they wait for is reaped
  {
    std::lock_guard lock(process_mutex_);
    if (pid_ <= 0) return;
  }
  try {
    channel_->call({{"op", "stop"}}, "stopping", 10);
  } catch (const Error&) {
    // already gone, or not answering: reaped below
  }
  std::lock_guard lock(process_mutex_);
  if (pid_ <= 0) return;
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

namespace {

/// A session this worker keeps, and who holds it.
struct ResidentSession {
  std::string key;
  std::string model;
  // The session records later phases (a session for a new input shape) on the timeline it started
  // with: the timeline lives as long as the session, and is declared first so that it goes last.
  std::unique_ptr<Timeline> timeline;
  LocalDeviceResult result;
  int holders = 0;
  int64_t last_used_ns = 0;
};

/// Everything the worker's channels share: its device and its sessions.
class WorkerState {
 public:
  WorkerState(Device device, int64_t main_ns) : device_(std::move(device)), main_ns_(main_ns) {}

  const Device& device() const { return device_; }

  json initialise(const LocalStartPlan& plan, size_t max_resident, bool prime) {
    std::lock_guard starting(start_mutex_);
    initialised_ = true;
    Timeline timeline(main_ns_);
    add_process_start(timeline);
    const PreparedRuntime prepared = prepare_runtime(plan, timeline);
    if (prepared.error) throw *prepared.error;
    for (const auto& e : prepared.device_errors) {
      if (e) throw *e;
    }
    if (prime) prime_libraries(plan, timeline);
    if (max_resident > 0) max_resident_ = max_resident;
    return {{"event", "initialised"}, {"timeline", on_my_lane(timeline)}};
  }

  /// Starts the plan's session, or finds it resident; the caller then holds it.
  json start(const LocalStartPlan& plan, std::vector<std::string>& held) {
    std::lock_guard starting(start_mutex_);  // one creation at a time: they would contend for one GPU
    const std::string key = session_key(plan);
    if (auto resident = find(key)) {
      hold(key, held);
      auto status = ready_status(resident->result);
      status.ready_ns = monotonic_ns();
      status.resident = true;
      return ready_message(*resident, status, Timeline(monotonic_ns()));
    }
    delay_start_if_asked(lane());
    auto session = std::make_shared<ResidentSession>();
    session->timeline = std::make_unique<Timeline>(main_ns_);
    Timeline& timeline = *session->timeline;
    if (!initialised_) {
      // A worker that was not initialised first starts from its exec: show its process start too.
      add_process_start(timeline);
      initialised_ = true;
    }
    session->key = key;
    session->model = plan.model_path;
    session->result = start_one(plan, timeline);
    if (session->result.error && is_out_of_memory(*session->result.error) && evict(/*keep=*/0) > 0) {
      spdlog::info("{}: out of device memory; evicted the sessions nobody held and starting again", lane());
      session->result = start_one(plan, timeline);
    }
    if (session->result.error) throw *session->result.error;
    session->last_used_ns = monotonic_ns();
    {
      std::lock_guard lock(mutex_);
      sessions_[key] = session;
    }
    hold(key, held);
    evict(max_resident_);
    return ready_message(*session, ready_status(session->result), timeline);
  }

  /// The session a run names; throws when this worker does not have it.
  std::shared_ptr<ResidentSession> to_run(const std::string& key) {
    auto session = find(key);
    if (session == nullptr) {
      throw Error("no session '" + key + "' on " + device_.to_string() + " (it was evicted or never started)",
                  "Start the model again", device_.to_string());
    }
    return session;
  }

  std::shared_ptr<ResidentSession> find(const std::string& key) {
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(key);
    if (it == sessions_.end()) return nullptr;
    it->second->last_used_ns = monotonic_ns();
    return it->second;
  }

  void hold(const std::string& key, std::vector<std::string>& held) {
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(key);
    if (it == sessions_.end()) throw Error("no session '" + key + "' on " + lane(), "Start it first", lane());
    ++it->second->holders;
    held.push_back(key);
  }

  void release(std::string key, std::vector<std::string>& held) {  // a copy: it may be an element of `held`
    const auto mine = std::find(held.begin(), held.end(), key);
    if (mine == held.end()) return;  // not held by this channel: nothing to let go
    held.erase(mine);
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(key);
    if (it != sessions_.end()) it->second->holders = std::max(0, it->second->holders - 1);
  }

  void release_all(std::vector<std::string>& held) {
    while (!held.empty()) release(held.back(), held);
  }

  /// Drops the least recently used sessions nobody holds until at most `keep` sessions remain;
  /// how many were dropped.
  size_t evict(size_t keep) {
    std::vector<std::shared_ptr<ResidentSession>> dropped;  // destroyed outside the lock
    {
      std::lock_guard lock(mutex_);
      while (sessions_.size() > keep) {
        auto oldest = sessions_.end();
        for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
          if (it->second->holders == 0 && (oldest == sessions_.end() || it->second->last_used_ns < oldest->second->last_used_ns)) oldest = it;
        }
        if (oldest == sessions_.end()) break;
        spdlog::debug("{}: evicting {} (least recently used, nobody holds it)", lane(), oldest->second->model);
        dropped.push_back(oldest->second);
        sessions_.erase(oldest);
      }
    }
    return dropped.size();
  }

  json status() {
    std::lock_guard lock(mutex_);
    json list = json::array();
    const int64_t now = monotonic_ns();
    for (const auto& [key, s] : sessions_) {
      list.push_back({{"session", key},
                      {"model", s->model},
                      {"holders", s->holders},
                      {"idle_s", static_cast<double>(now - s->last_used_ns) / 1e9},
                      {"memory_bytes", s->result.memory_bytes}});
    }
    uint64_t memory = 0;
    try {
      memory = memory_in_use(device_);
    } catch (const std::exception&) {
      // no driver answer: the status still lists the sessions
    }
    return {{"event", "status"}, {"device", device_.to_string()}, {"pid", ::getpid()}, {"sessions", list},
            {"cuda_visible_devices", env_var("CUDA_VISIBLE_DEVICES").value_or("")},
            {"memory_bytes", memory}, {"max_resident_sessions", max_resident_}};
  }

  void clear() {
    std::lock_guard lock(mutex_);
    sessions_.clear();  // sessions release their GPU memory before the process ends
  }

 private:
  std::string lane() const { return device_.to_string(); }

  /// exec until main(), when the parent's spawn time came along.
  void add_process_start(Timeline& timeline) const {
    if (auto spawn = env_var(kSpawnTimeVariable)) timeline.add({phase::process_start, lane(), std::stoll(*spawn), main_ns_, 0, {}});
  }

  /// Every phase of this process, shared ones too, on this worker's lane.
  json on_my_lane(const Timeline& timeline) const {
    Timeline mine(timeline.origin_ns());
    for (auto e : timeline.events()) {
      if (e.lane == "process") e.lane = lane();
      mine.add(std::move(e));
    }
    return json::parse(mine.to_json());
  }

  static bool is_out_of_memory(const Error& e) { return e.what_failed().find("out of memory") != std::string::npos; }

  /// The first session of a process loads cuDNN and cuBLAS, makes their handles and loads their
  /// common kernels: a few hundred ms on a GPU that every later session skips (on the CPU, a few ms of
  /// first-use costs). A warm worker pays it before
  /// any model arrives, with two throwaway models (convolutions and a fully connected layer; attention
  /// and matrix products), not cached. Failing here only costs the first real session that time.
  void prime_libraries(const LocalStartPlan& plan, Timeline& timeline) {
    auto p = timeline.scope(phase::libraries_prime, lane());
    try {
      const auto folder = PrivateDir::temporary("ortfleet-primer");
      synth::ResNetSpec convolutions;
      convolutions.depth = 18;
      convolutions.width = 0.125;
      convolutions.image_size = 32;
      synth::TransformerSpec attention;
      attention.layers = 1;
      attention.hidden = 64;
      attention.heads = 2;
      attention.ffn_multiplier = 2;
      attention.sequence = 16;
      attention.vocabulary = 64;
      const std::string models[] = {synth::write_resnet((folder.path() / "convolutions.onnx").string(), convolutions).path,
                                    synth::write_transformer((folder.path() / "attention.onnx").string(), attention).path};
      Timeline scratch(main_ns_);  // the primer's own phases stay out of the worker's report
      for (const auto& model : models) {
        LocalStartPlan primer = plan;
        primer.model_path = model;
        primer.config.session.optimized_model_cache = false;
        primer.profile_dir.clear();
        const LocalDeviceResult r = start_one(primer, scratch);
        if (r.error) throw *r.error;
      }
    } catch (const std::exception& e) {
      p.arg("error", e.what());
      spdlog::debug("{}: priming cuDNN and cuBLAS failed ({}); the first session pays their start", lane(), e.what());
    }
  }

  LocalDeviceResult start_one(const LocalStartPlan& plan, Timeline& timeline) {
    std::vector<LocalDeviceResult> results;
    start_locally(plan, timeline, results, [](size_t) {});
    if (results.empty()) throw Error("the start request named no device");
    return std::move(results.front());
  }

  /// What makes two starts the same session: the model's content (not its path), the plan without
  /// the model's path and the runtime it runs on.
  std::string session_key(const LocalStartPlan& plan) const {
    LocalStartPlan keyed = plan;
    keyed.model_path = model_content(plan.model_path, memo_dir()).text;
    keyed.profile_dir.clear();
    json j = plan_to_json(keyed);
    const RuntimeInfo& runtime = load_runtime(plan.ort_library);
    j["runtime"] = runtime.library_path + "@" + runtime.version;
    const std::string text = j.dump();
    return hex64(xxh64(text.data(), text.size()));
  }

  /// Where content digests are remembered: the model cache's folder when it is private.
  static std::string memo_dir() {
    try {
      const auto root = ModelCache::find_default_root();
      return root ? ModelCache().dir() : std::string();
    } catch (const std::exception&) {
      return {};
    }
  }

  /// The status says whether the session was resident.
  json ready_message(const ResidentSession& s, const DeviceStatus& status, const Timeline& timeline) const {
    return {{"event", "ready"},
            {"session", s.key},
            {"status", status_to_json(status)},
            {"inputs", specs_to_json(s.result.session->inputs())},
            {"outputs", specs_to_json(s.result.session->outputs())},
            {"timeline", on_my_lane(timeline)}};
  }

  Device device_;
  int64_t main_ns_;
  std::mutex start_mutex_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<ResidentSession>> sessions_;
  size_t max_resident_ = 64;
  bool initialised_ = false;
};

/// Serves one channel until it closes (or, on the control channel, a stop request). What this channel
/// holds is let go when it ends. Returns true when the worker should exit.
bool serve_channel(MessageChannel& channel, WorkerState& state, bool control, std::vector<std::thread>& clients,
                   std::mutex& clients_mutex) {
  std::vector<std::string> held;
  std::shared_ptr<SharedBuffer> output_buffer;  // reused: the peer copies outputs out before its next request
  ReceivedBuffer inputs;                       // the peer's input buffer, mapped once
  // Device tensors of this channel's runs: mapped inputs and outputs leased to the peer. Declared
  // before the ring server, whose thread uses it.
  auto transfers = std::make_shared<DeviceTensorsServer>(state.device());
  std::unique_ptr<RingServer> ring_server;      // this channel's runs, once the peer sent a ring
  while (true) {
    std::optional<Message> request;
    try {
      Received received = channel.receive();
      if (received.kind != Received::Kind::message) break;  // the peer went away
      request = std::move(received.message);
    } catch (const std::exception&) {
      break;
    }
    const std::string op = request->body.value("op", "");
    try {
      if (op == "stop" && control) {
        state.release_all(held);
        channel.send({{"event", "stopping"}});
        return true;
      }
      if (op == "init") {
        channel.send(state.initialise(plan_from_json(request->body.at("plan")), request->body.value("max_resident_sessions", size_t{0}),
                                      request->body.value("prime", true)));
      } else if (op == "start") {
        channel.send(state.start(plan_from_json(request->body.at("plan")), held));
      } else if (op == "run") {
        auto session = state.to_run(request->body.value("session", ""));
        if (request->fds.empty()) throw Error("a run request came without its shared memory");
        auto given = unpack_tensors(request->body.at("inputs"), inputs.map(std::move(request->fds.front())));
        auto outputs = session->result.session->run(given);
        const json described = pack_tensors(outputs, output_buffer);
        channel.send({{"event", "outputs"}, {"outputs", described}}, {output_buffer->fd()});
      } else if (op == "ring") {
        if (request->fds.empty()) throw Error("a ring request came without its shared memory");
        auto ring = RequestRing::attach(std::move(request->fds.front()));
        if (!ring_server) {
          ring_server = std::make_unique<RingServer>(
              [&state, transfers](const std::string& key, const RingMessage& run_request) {
                const auto session = state.to_run(key);
                return transfers->response(session->result.session->run(transfers->inputs(run_request), run_request.outputs_on_device),
                                           run_request.outputs_on_device);
              },
              [device = state.device()](const RequestRing& r) { return pin_for(device, r); },
              [transfers](const RingMessage& response) { transfers->discard(response); });
        }
        ring_server->serve(std::move(ring));
        channel.send({{"event", "ring"}});
      } else if (op == "release") {
        state.release(request->body.value("session", ""), held);
        channel.send({{"event", "released"}});
      } else if (op == "evict") {
        channel.send({{"event", "evicted"}, {"count", state.evict(0)}});
      } else if (op == "status") {
        channel.send(state.status());
      } else if (op == "attach" && control) {
        if (request->fds.empty()) throw Error("an attach request came without its socket");
        auto client = std::make_shared<MessageChannel>(std::move(request->fds.front()));
        std::vector<std::string> to_hold = request->body.value("hold", std::vector<std::string>());
        std::vector<std::string> client_held;
        for (const auto& key : to_hold) state.hold(key, client_held);
        std::lock_guard lock(clients_mutex);
        clients.emplace_back([client, &state, &clients, &clients_mutex, client_held]() mutable {
          serve_channel(*client, state, /*control=*/false, clients, clients_mutex);
          state.release_all(client_held);
        });
        channel.send({{"event", "attached"}});
      } else {
        throw Error("unknown request '" + op + "'", "The worker and its parent come from different ortfleet builds");
      }
    } catch (const std::exception& e) {
      try {
        channel.send(failure(e));
      } catch (const std::exception&) {
        break;
      }
    }
  }
  state.release_all(held);
  return control;  // the control channel closing means the parent is gone
}

}  // namespace

int worker_main(int channel_fd, const Device& device, bool narrowed) {
  const int64_t main_ns = monotonic_ns();
  if (auto level = env_var(kLogLevelVariable)) spdlog::set_level(spdlog::level::from_str(*level));
  if (narrowed) set_narrowed_device(device);
  MessageChannel channel{UniqueFd(channel_fd)};
  WorkerState state(device, main_ns);
  std::vector<std::thread> clients;
  std::mutex clients_mutex;
  serve_channel(channel, state, /*control=*/true, clients, clients_mutex);
  // Clients of a pool server keep their channels until they close them; the server is gone, and so
  // is this worker: end without waiting for them (exit closes their sockets, they see the worker go).
  state.clear();
  std::fflush(nullptr);
  ::_exit(0);
}

}  // namespace ortfleet::detail

int ortfleet::run_worker_process(int channel_fd, const std::string& device, bool narrowed) {
  return detail::worker_main(channel_fd, Device::parse(device), narrowed);
}
