#include "fleet/worker/worker_server.hpp"

#include "fleet/local/plan_paths.hpp"

#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "base/environment.hpp"
#include "base/system_paths.hpp"
#include "base/termination_cleanup.hpp"
#include "engine/providers/provider_registry.hpp"
#include "fleet/worker/device_tensors.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "fleet/worker/worker_ring.hpp"
#include "fleet/worker/worker_sessions.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
using nlohmann::json;

/// The threads serving the channels attached to a worker (a pool server's clients), one a channel.
struct AttachedChannels {
  std::mutex mutex;
  std::vector<std::thread> threads;
};

namespace {

json failure(const std::exception& e) { return {{"event", message::kFailed}, {"error", error_to_json(e)}}; }

/// The worker's ring pages pinned for its GPU's copies, or nothing (CPU sessions; a driver that refuses).
std::shared_ptr<void> pin_for(const Device& device, const RequestRing& ring) {
  const DeviceMemory* memory = provider_for(device).memory();
  if (memory == nullptr) return nullptr;
  // Pinning makes every page of the ring resident: a ring grown for huge inputs stays pageable.
  constexpr size_t kMaxPinnedBytes = size_t{1} << 30;
  if (ring.mapping_bytes() > kMaxPinnedBytes) {
    spdlog::debug("{}: the request ring ({} bytes) is too large to pin; its copies are staged", device.to_string(), ring.mapping_bytes());
    return nullptr;
  }
  try {
    return memory->pin_host(device, ring.mapping(), ring.mapping_bytes());
  } catch (const Error& e) {
    spdlog::debug("{}: the request ring stays pageable (its copies are staged): {}", device.to_string(), e.what());
    return nullptr;
  }
}

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

/// One channel of the worker served until it closes: what it holds, its buffers and request ring, and a
/// handler per kind of request (routes()). Requests are answered in order, each with its kind's answer
/// or a failure.
class ChannelServer {
 public:
  ChannelServer(MessageChannel& channel, WorkerSessions& sessions, bool control, AttachedChannels& attached)
      : channel_(channel),
        sessions_(sessions),
        control_(control),
        attached_(attached),
        transfers_(std::make_shared<DeviceTensorsServer>(sessions.device())) {}

  /// Serves until the channel closes (or, on the control channel, a stop request). What this channel
  /// holds is let go when it ends.
  void serve();

 private:
  /// What a handler gives back: the reply, the descriptors sent with it, and whether the channel ends
  /// once it is sent.
  struct Handled {
    Handled(json body, std::vector<int> descriptors = {}, bool ends = false) : reply(std::move(body)), fds(std::move(descriptors)), last(ends) {}
    json reply;
    std::vector<int> fds;
    bool last;
  };
  using Handler = Handled (ChannelServer::*)(Message& request);
  /// A kind of request and what handles it. A kind only the control channel may send (the parent's)
  /// is unknown on other channels (a pool server's clients).
  struct Route {
    const MessageKind* kind;
    Handler handle;
    bool control_only;
  };
  /// The one table of what a worker answers (fleet/worker/worker_protocol.hpp says what each means).
  static const std::vector<Route>& routes();

  Handled on_init(Message& request);
  Handled on_start(Message& request);
  Handled on_run(Message& request);
  Handled on_ring(Message& request);
  Handled on_release(Message& request);
  Handled on_evict(Message& request);
  Handled on_status(Message& request);
  Handled on_trim(Message& request);
  Handled on_stop(Message& request);
  Handled on_adopt(Message& request);
  Handled on_attach(Message& request);

  /// Sends `body` with ONNX Runtime's warnings since the last reply, for the parent to count.
  void reply(json body, const std::vector<int>& fds = {});

  MessageChannel& channel_;
  WorkerSessions& sessions_;
  bool control_;
  AttachedChannels& attached_;
  std::vector<std::string> held_;                // the sessions this channel holds
  std::shared_ptr<SharedBuffer> output_buffer_;  // reused: the peer copies outputs out before its next request
  ReceivedBuffer inputs_;                        // the peer's input buffer, mapped once
  // Device tensors of this channel's runs: mapped inputs and outputs leased to the peer. Declared
  // before the ring server, whose thread uses it.
  std::shared_ptr<DeviceTensorsServer> transfers_;
  std::unique_ptr<RingServer> ring_server_;  // this channel's runs, once the peer sent a ring
};

const std::vector<ChannelServer::Route>& ChannelServer::routes() {
  static const std::vector<Route> table = {
      {&message::init, &ChannelServer::on_init, false},     {&message::start, &ChannelServer::on_start, false},
      {&message::run, &ChannelServer::on_run, false},       {&message::ring, &ChannelServer::on_ring, false},
      {&message::release, &ChannelServer::on_release, false}, {&message::evict, &ChannelServer::on_evict, false},
      {&message::status, &ChannelServer::on_status, false}, {&message::trim, &ChannelServer::on_trim, false},
      {&message::stop, &ChannelServer::on_stop, true},      {&message::adopt, &ChannelServer::on_adopt, true},
      {&message::attach, &ChannelServer::on_attach, true},
  };
  return table;
}

void ChannelServer::serve() {
  while (true) {
    std::optional<Message> request;
    try {
      Received received = channel_.receive();
      if (received.kind == Received::Kind::malformed) {
        // Not one of ours (a pool client's channel may be anyone's of this user): refused, and the
        // channel, this worker and the sessions other channels hold go on.
        spdlog::warn("{}: refused a malformed request ({})", sessions_.device().to_string(), received.problem);
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
      const auto& table = routes();
      const auto route = std::find_if(table.begin(), table.end(),
                                      [&](const Route& r) { return is_request(op, *r.kind) && (control_ || !r.control_only); });
      if (route == table.end()) throw Error("unknown request '" + op + "'", "The worker and its parent come from different ortfleet builds");
      Handled handled = (this->*(route->handle))(*request);
      reply(std::move(handled.reply), handled.fds);
      if (handled.last) return;
    } catch (const std::exception& e) {
      try {
        reply(failure(e));
      } catch (const std::exception&) {
        break;
      }
    }
  }
  sessions_.release_all(held_);
}

void ChannelServer::reply(json body, const std::vector<int>& fds) {
  if (auto warnings = take_ort_warnings(); !warnings.empty()) body["ort_warnings"] = ort_warnings_to_json(warnings);
  channel_.send(body, fds);
}

ChannelServer::Handled ChannelServer::on_init(Message& request) {
  return sessions_.initialise(plan_from_json(request.body.at("plan")), request.body.value("max_resident_sessions", size_t{0}),
                              request.body.value("prime", true));
}

ChannelServer::Handled ChannelServer::on_start(Message& request) { return sessions_.start(plan_from_json(request.body.at("plan")), held_); }

ChannelServer::Handled ChannelServer::on_run(Message& request) {
  auto session = sessions_.to_run(request.body.value("session", ""));
  if (request.fds.empty()) throw Error("a run request came without its shared memory");
  auto given = unpack_tensors(request.body.at("inputs"), inputs_.map(std::move(request.fds.front())));
  auto outputs = session->result.session->run(given);
  const json described = pack_tensors(outputs, output_buffer_);
  return {answer_to(message::run, {{"outputs", described}}), {output_buffer_->fd()}};
}

ChannelServer::Handled ChannelServer::on_ring(Message& request) {
  if (request.fds.empty()) throw Error("a ring request came without its shared memory");
  auto ring = RequestRing::attach(std::move(request.fds.front()));
  if (!ring_server_) {
    ring_server_ = std::make_unique<RingServer>(
        [&sessions = sessions_, transfers = transfers_](const std::string& key, const RingMessage& run_request) {
          const auto session = sessions.to_run(key);
          return transfers->response(session->result.session->run(transfers->inputs(run_request), run_request.outputs_on_device),
                                     run_request.outputs_on_device);
        },
        [device = sessions_.device()](const RequestRing& r) { return pin_for(device, r); },
        [transfers = transfers_](const RingMessage& response) { transfers->discard(response); });
  }
  ring_server_->serve(std::move(ring));
  return {answer_to(message::ring)};
}

ChannelServer::Handled ChannelServer::on_release(Message& request) {
  sessions_.release(request.body.value("session", ""), held_);
  return {answer_to(message::release)};
}

ChannelServer::Handled ChannelServer::on_evict(Message& request) {
  // With a model: only that file's sessions (a pool drops the old content of a file rewritten in place).
  const std::string model = text_field(request.body, "model");
  return {answer_to(message::evict, {{"count", model.empty() ? sessions_.evict(0) : sessions_.evict_model(model)}})};
}

ChannelServer::Handled ChannelServer::on_status(Message& request) { return sessions_.status(request.body.value("with_plans", false)); }

ChannelServer::Handled ChannelServer::on_trim(Message&) { return sessions_.trim(); }

ChannelServer::Handled ChannelServer::on_stop(Message&) {
  sessions_.release_all(held_);
  return {answer_to(message::stop), {}, /*ends=*/true};
}

ChannelServer::Handled ChannelServer::on_adopt(Message& request) {
  if (request.fds.empty()) throw Error("an adopt request came without the pool's log");
  become_pools(request.fds.front().get());
  ring_server_.reset();  // the job's ring and the outputs it leased go with the job
  transfers_ = std::make_shared<DeviceTensorsServer>(sessions_.device());
  sessions_.release_all(held_);
  return {answer_to(message::adopt)};
}

ChannelServer::Handled ChannelServer::on_attach(Message& request) {
  if (request.fds.empty()) throw Error("an attach request came without its socket");
  auto client = std::make_shared<MessageChannel>(std::move(request.fds.front()));
  std::vector<std::string> to_hold = request.body.value("hold", std::vector<std::string>());
  std::vector<std::string> client_held;  // held for as long as the client's channel is open
  for (const auto& key : to_hold) sessions_.hold(key, client_held);
  std::lock_guard lock(attached_.mutex);
  attached_.threads.emplace_back([client, &sessions = sessions_, &attached = attached_, client_held]() mutable {
    ChannelServer(*client, sessions, /*control=*/false, attached).serve();
    sessions.release_all(client_held);
  });
  return {answer_to(message::attach)};
}

/// Lowers this thread's CPU and I/O priority to idle; threads it makes later inherit both. A background
/// worker (the cache entry a start missed) then runs on what the job leaves over: on 2 cores a fill at
/// nice 10 still took a third of them from the job's first calls (bench: a first start 1.24x its start
/// without the cache), and an idle-class one none.
void lower_priority() {
  constexpr int kNice = 19;
  if (::setpriority(PRIO_PROCESS, 0, kNice) != 0) spdlog::debug("could not lower the worker's CPU priority: {}", std::strerror(errno));
  sched_param idle{};
  if (::sched_setscheduler(0, SCHED_IDLE, &idle) != 0) spdlog::debug("could not make the worker idle-class: {}", std::strerror(errno));
  // The idle I/O class (ioprio_set has no glibc wrapper): its reads and writes wait for the disk to be idle.
  constexpr int kClassIdle = 3;
  constexpr int kClassShift = 13;
  constexpr int kWhoProcess = 1;
  if (::syscall(SYS_ioprio_set, kWhoProcess, 0, kClassIdle << kClassShift) != 0) {
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

WorkerServer::WorkerServer(Device device, int64_t main_ns, std::string origin)
    : sessions_(std::make_unique<WorkerSessions>(std::move(device), main_ns, std::move(origin))),
      attached_(std::make_unique<AttachedChannels>()) {}

WorkerServer::~WorkerServer() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(attached_->mutex);
    threads.swap(attached_->threads);
  }
  for (auto& t : threads) t.join();
}

void WorkerServer::serve(MessageChannel& control) { ChannelServer(control, *sessions_, /*control=*/true, *attached_).serve(); }

void WorkerServer::clear() { sessions_->clear(); }

int worker_main(int channel_fd, const Device& device, bool narrowed) {
  const int64_t main_ns = monotonic_ns();
  if (env_on(EnvVar::worker_background).value_or(false)) lower_priority();  // before any thread exists
  install_termination_cleanup();
  if (auto level = env_value(EnvVar::worker_log_level)) spdlog::set_level(spdlog::level::from_str(*level));
  if (narrowed) provider_for(device).use_narrowed(device);
  set_ort_warning_mode(OrtWarningMode::hand_over);  // the parent says them, once for every worker
  MessageChannel channel{UniqueFd(channel_fd)};
  watch_lifeline(channel.fd(), /*grace_s=*/2);
  // In "/": a worker a pool keeps after its job (or a background fill) never pins the job's folder.
  WorkerServer server(device, main_ns, work_in_root());
  server.serve(channel);
  // Clients of a pool server keep their channels until they close them; the server is gone, and so
  // is this worker: end without waiting for them (exit closes their sockets, they see the worker go).
  server.clear();
  std::fflush(nullptr);
  ::_exit(0);
}

}  // namespace ortfleet::detail
