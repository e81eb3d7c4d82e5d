#include "fleet/worker/worker_server.hpp"

#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "base/private_dir.hpp"
#include "base/termination_cleanup.hpp"
#include "base/system_paths.hpp"
#include "engine/cache/content_hash.hpp"
#include "engine/cuda/cuda_driver.hpp"
#include "engine/cache/model_digest.hpp"
#include "fleet/worker/cache_fill.hpp"
#include "fleet/worker/device_tensors.hpp"
#include "fleet/local/local_start.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "fleet/worker/worker_ring.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/fleet/worker.hpp"
#include "ortfleet/synth/synth.hpp"
#include "process/ipc.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
using nlohmann::json;

namespace {

json failure(const std::exception& e) { return {{"event", message::kFailed}, {"error", error_to_json(e)}}; }

/// The test hooks kTestStartDelayVariable and kTestInitDelayVariable (`variable`): sleeps when it names
/// this worker's device.
void delay_if_asked(const char* variable, const std::string& device) {
  const auto setting = env_var(variable);
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


/// A session this worker keeps, and who holds it.
struct ResidentSession {
  std::string key;
  std::string model_path;  // as its first start named it
  nlohmann::json plan;     // the plan it started with: a pool moving it to another worker starts it there from this
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
    delay_if_asked(kTestInitDelayVariable, lane());
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
    return answer_to(message::init, {{"timeline", on_my_lane(timeline)}});
  }

  /// Starts the plan's session, or finds it resident; the caller then holds it.
  json start(const LocalStartPlan& plan, std::vector<std::string>& held) {
    const std::string key = session_key(plan);
    // A resident session is handed out at once, never behind another model's creation.
    if (auto resident = hand_out_resident(key, held)) return *resident;
    std::lock_guard starting(start_mutex_);  // one creation at a time: they would contend for one GPU
    if (auto resident = hand_out_resident(key, held)) return *resident;  // made while this start waited
    delay_if_asked(kTestStartDelayVariable, lane());
    auto session = std::make_shared<ResidentSession>();
    session->timeline = std::make_unique<Timeline>(main_ns_);
    Timeline& timeline = *session->timeline;
    if (!initialised_) {
      // A worker that was not initialised first starts from its exec: show its process start too.
      add_process_start(timeline);
      initialised_ = true;
    }
    session->key = key;
    session->model_path = plan.model_path;
    session->plan = plan_to_json(plan);
    session->result = start_one(plan, timeline);
    if (session->result.error && is_out_of_memory(*session->result.error) && evict(/*keep=*/0) > 0) {
      spdlog::info("{}: out of device memory; evicted the sessions nobody held and starting again", lane());
      session->result = start_one(plan, timeline);
    }
    if (session->result.error) throw *session->result.error;
    DeviceStatus status = ready_status(session->result);
    if (plan.price_cache_entry) price_entry(plan, *session, status);
    session->last_used_ns = monotonic_ns();
    {
      std::lock_guard lock(mutex_);
      sessions_[key] = session;
    }
    hold(key, held);
    evict(max_resident_);
    // Making a session frees much of what it read (a model's bytes, ONNX Runtime's graph copies) into
    // the C heap, which keeps it: handed back, the worker's resident memory is what its sessions use.
    ::malloc_trim(0);
    return ready_message(*session, status, timeline);
  }

  /// The ready reply of resident session `key`, now held by this channel too; nothing when there is none.
  std::optional<json> hand_out_resident(const std::string& key, std::vector<std::string>& held) {
    auto resident = find(key);
    if (!resident) return std::nullopt;
    hold(key, held);
    auto status = ready_status(resident->result);
    status.ready_ns = monotonic_ns();
    status.resident = true;
    return ready_message(*resident, status, Timeline(monotonic_ns()));
  }

  /// Before the pool parks this worker: hands back what no session needs, so that the checkpoint the
  /// driver keeps in host memory is the sessions' own (kParkTrimVariable says which parts).
  json trim() {
    const std::string parts = env_var(kParkTrimVariable).value_or("arena,heap,stack");
    const auto asked = [&parts](const char* part) { return parts.find(part) != std::string::npos; };
    json done = json::object();
    if (asked("arena")) {
      std::vector<std::shared_ptr<ResidentSession>> idle;
      {
        std::lock_guard lock(mutex_);
        for (const auto& [key, s] : sessions_) {
          if (s->holders == 0 && s->result.session) idle.push_back(s);
        }
      }
      int shrunk = 0;
      for (const auto& s : idle) shrunk += s->result.session->release_spare_memory() ? 1 : 0;
      done["arenas_shrunk"] = shrunk;
    }
    if (asked("stack") && device_.is_gpu()) {
      try {
        done["stack_bytes"] = CudaDriver::instance().set_stack_size(cuda_ordinal(device_), 0);
      } catch (const Error& e) {
        done["stack_error"] = e.what();
      }
    }
    if (asked("heap")) done["heap_trimmed"] = ::malloc_trim(0) == 1;
    return answer_to(message::trim, done);
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
        spdlog::debug("{}: evicting {} (least recently used, nobody holds it)", lane(), oldest->second->model_path);
        dropped.push_back(oldest->second);
        sessions_.erase(oldest);
      }
    }
    return dropped.size();
  }

  json status(bool with_plans) {
    std::lock_guard lock(mutex_);
    json list = json::array();
    const int64_t now = monotonic_ns();
    for (const auto& [key, s] : sessions_) {
      json entry = {{"session", key},
                    {"model", s->model_path},
                    {"holders", s->holders},
                    {"idle_s", static_cast<double>(now - s->last_used_ns) / 1e9},
                    {"memory_bytes", s->result.memory_bytes}};
      if (with_plans) entry["plan"] = s->plan;
      list.push_back(std::move(entry));
    }
    // No CUDA call here: a parked worker (its CUDA calls locked by the driver) answers too.
    return answer_to(message::status, {{"device", device_.to_string()}, {"pid", ::getpid()}, {"sessions", list},
                                        {"cuda_visible_devices", env_var("CUDA_VISIBLE_DEVICES").value_or("")},
                                        {"max_resident_sessions", max_resident_}});
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

  /// A background fill's start made the entry: what it saves goes beside it, and into the reply.
  void price_entry(const LocalStartPlan& plan, const ResidentSession& made, DeviceStatus& status) {
    const Session& session = *made.result.session;
    if (session.model_cache_outcome() != "miss") return;  // an entry was written (or its making failed: pricing then finds none)
    try {
      if (const auto gain = price_cache_entry(plan, session.model_cache_entry())) {
        status.model_cache_note = std::string("its entry ") + gain->text() + (gain->pays() ? "" : ": later starts load the model itself");
      }
    } catch (const std::exception& e) {
      spdlog::debug("{}: the new cache entry was not priced ({}); later starts use it", lane(), e.what());
    }
  }

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
        // What the pool's config says of one model (a job's, which left the pool) is not the primer's:
        // its warm-up inputs, shapes and node assignments name another model's inputs and nodes, and its
        // files may be gone with the job.
        primer.config.warmup = {};
        primer.config.shapes = {};
        primer.config.session.custom_op_libraries.clear();
        primer.config.session.config_entries.erase(kNodeAssignmentByName);
        primer.config.session.config_entries.erase(kNodeAssignmentByLayer);
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
    keyed.model_path.clear();  // keyed by its content below, not by its path
    keyed.profile_dir.clear();
    // Neither changes the session: how its cache entry gets made, and what the start leaves behind.
    keyed.config.session.model_cache_fill = ModelCacheFill::background;
    keyed.config.warm_pool = {};
    keyed.price_cache_entry = false;
    json j = plan_to_json(keyed);
    j["model_content"] = model_content(plan.model_path, memo_dir()).text;
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
    return answer_to(message::start, {{"session", s.key},
                                      {"status", status_to_json(status)},
                                      {"inputs", specs_to_json(s.result.session->inputs())},
                                      {"outputs", specs_to_json(s.result.session->outputs())},
                                      {"timeline", on_my_lane(timeline)}});
  }

  Device device_;
  int64_t main_ns_;
  std::mutex start_mutex_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<ResidentSession>> sessions_;
  size_t max_resident_ = 64;
  bool initialised_ = false;
};

/// A pool took this worker over from the job that spawned it: the job's stdout and stderr are let go
/// (a parent reading the job's output to its end must not wait for the pool), and the job's session
/// and process group too (a terminal's Ctrl-C to the job must not reach the pool's worker).
void become_pools(int log_fd) {
  std::fflush(nullptr);
  if (::dup2(log_fd, STDOUT_FILENO) < 0 || ::dup2(log_fd, STDERR_FILENO) < 0) {
    throw Error(std::string("cannot send the worker's output to the pool's log: ") + std::strerror(errno));
  }
  if (::setsid() < 0 && errno != EPERM) spdlog::debug("setsid: {}", std::strerror(errno));  // EPERM: a group leader already
}

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
  // Every reply carries ONNX Runtime's warnings since the last one, for the parent to count.
  const auto reply = [&channel](json body, const std::vector<int>& fds = {}) {
    if (auto warnings = take_ort_warnings(); !warnings.empty()) body["ort_warnings"] = ort_warnings_to_json(warnings);
    channel.send(body, fds);
  };
  while (true) {
    std::optional<Message> request;
    try {
      Received received = channel.receive();
      if (received.kind == Received::Kind::malformed) {
        // Not one of ours (a pool client's channel may be anyone's of this user): refused, and the
        // channel, this worker and the sessions other channels hold go on.
        spdlog::warn("{}: refused a malformed request ({})", state.device().to_string(), received.problem);
        reply(failure(Error("malformed request: " + received.problem, "Send the worker protocol's JSON requests (fleet/worker/worker_protocol.hpp)")));
        continue;
      }
      if (received.kind != Received::Kind::message) break;  // the peer went away
      request = std::move(received.message);
    } catch (const std::exception&) {
      break;
    }
    const std::string op = op_of(request->body);
    try {
      if (is_request(op, message::stop) && control) {
        state.release_all(held);
        reply(answer_to(message::stop));
        return true;
      }
      if (is_request(op, message::init)) {
        reply(state.initialise(plan_from_json(request->body.at("plan")), request->body.value("max_resident_sessions", size_t{0}),
                                      request->body.value("prime", true)));
      } else if (is_request(op, message::start)) {
        reply(state.start(plan_from_json(request->body.at("plan")), held));
      } else if (is_request(op, message::run)) {
        auto session = state.to_run(request->body.value("session", ""));
        if (request->fds.empty()) throw Error("a run request came without its shared memory");
        auto given = unpack_tensors(request->body.at("inputs"), inputs.map(std::move(request->fds.front())));
        auto outputs = session->result.session->run(given);
        const json described = pack_tensors(outputs, output_buffer);
        reply(answer_to(message::run, {{"outputs", described}}), {output_buffer->fd()});
      } else if (is_request(op, message::ring)) {
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
        reply(answer_to(message::ring));
      } else if (is_request(op, message::adopt) && control) {
        if (request->fds.empty()) throw Error("an adopt request came without the pool's log");
        become_pools(request->fds.front().get());
        ring_server.reset();  // the job's ring and the outputs it leased go with the job
        transfers = std::make_shared<DeviceTensorsServer>(state.device());
        state.release_all(held);
        reply(answer_to(message::adopt));
      } else if (is_request(op, message::release)) {
        state.release(request->body.value("session", ""), held);
        reply(answer_to(message::release));
      } else if (is_request(op, message::evict)) {
        reply(answer_to(message::evict, {{"count", state.evict(0)}}));
      } else if (is_request(op, message::status)) {
        reply(state.status(request->body.value("with_plans", false)));
      } else if (is_request(op, message::trim)) {
        reply(state.trim());
      } else if (is_request(op, message::attach) && control) {
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
        reply(answer_to(message::attach));
      } else {
        throw Error("unknown request '" + op + "'", "The worker and its parent come from different ortfleet builds");
      }
    } catch (const std::exception& e) {
      try {
        reply(failure(e));
      } catch (const std::exception&) {
        break;
      }
    }
  }
  state.release_all(held);
  return control;  // the control channel closing means the parent is gone
}

}  // namespace

namespace {

/// Lowers this thread's CPU and I/O priority; threads it makes later inherit both.
void lower_priority() {
  constexpr int kNice = 10;
  if (::setpriority(PRIO_PROCESS, 0, kNice) != 0) spdlog::debug("could not lower the worker's CPU priority: {}", std::strerror(errno));
  // The lowest best-effort I/O priority (ioprio_set has no glibc wrapper): the job's reads come first.
  constexpr int kClassBestEffort = 2;
  constexpr int kClassShift = 13;
  constexpr int kLowest = 7;
  constexpr int kWhoProcess = 1;
  if (::syscall(SYS_ioprio_set, kWhoProcess, 0, (kClassBestEffort << kClassShift) | kLowest) != 0) {
    spdlog::debug("could not lower the worker's I/O priority: {}", std::strerror(errno));
  }
}

/// A worker lives for its parent: when the control channel's other end is gone (the parent died, or
/// closed it while this worker was busy creating a session, which can take an hour), the worker stops
/// within `grace_s`, by SIGTERM, so that what it was writing is removed (base/termination_cleanup.hpp).
/// A parent that closes the channel on an idle worker sees it exit on its own first.
void watch_lifeline(int fd, double grace_s) {
  std::thread([fd, grace_s] {
    pollfd watch{fd, POLLRDHUP, 0};
    while (::poll(&watch, 1, -1) < 0 && errno == EINTR) {
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_s));
    ::raise(SIGTERM);
  }).detach();
}

}  // namespace

int worker_main(int channel_fd, const Device& device, bool narrowed) {
  const int64_t main_ns = monotonic_ns();
  if (env_var(kBackgroundVariable).value_or("") == "1") lower_priority();  // before any thread exists
  install_termination_cleanup();
  if (auto level = env_var(kLogLevelVariable)) spdlog::set_level(spdlog::level::from_str(*level));
  if (narrowed) set_narrowed_device(device);
  set_ort_warning_mode(OrtWarningMode::hand_over);  // the parent says them, once for every worker
  MessageChannel channel{UniqueFd(channel_fd)};
  watch_lifeline(channel.fd(), /*grace_s=*/2);
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
