#include "ortfleet/fleet/pool_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <thread>

#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "engine/cache/file_lock.hpp"
#include "fleet/pool/pool_client.hpp"
#include "fleet/pool/pool_requests.hpp"
#include "fleet/pool/pool_start.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "fleet/worker/cache_fill.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
/// Jobs served at once (clients that opened a model or handed workers over): one past this is refused,
/// not queued. Asking the pool (status, stop, evict) is never refused for it.
constexpr int kMaxClients = 256;
/// Connections at once, each a thread of the server: one past this is closed at once.
constexpr size_t kMaxConnections = 512;
/// A connection that holds nothing (no model opened, no worker handed over) and says nothing for this
/// long is closed: silent connections cannot fill the server, and the owner's `pool stop` and `pool
/// status` get through within this long whatever else is connected.
constexpr double kSilentClientS = 10;
/// How long the workers of a pool told to stop get between SIGTERM and SIGKILL: `pool stop` and SIGTERM
/// end the pool within a few seconds whatever its workers are doing.
constexpr double kStopGraceS = 2;
/// How long a parking worker's submitted GPU work may take before it is left unparked.
constexpr double kParkLockTimeoutS = 10;

/// Whether request `op` makes its connection a job's (it opens a model or hands workers over), rather
/// than one that only asks (status, evict, stop).
bool makes_a_job(const std::string& op) {
  return detail::is_request(op, detail::message::open) || detail::is_request(op, detail::message::hand_over);
}

/// Whether process `pid` runs as this process's user (a job may hand over only its own workers).
bool runs_as_me(int pid) {
  struct stat st {};
  return pid > 0 && ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid == ::getuid();
}
}  // namespace

void check_pool_client(unsigned client_uid, unsigned server_uid, const std::string& socket_path) {
  if (client_uid == server_uid) return;
  throw Error(fmt::format("the pool server on {} serves only its own user (uid {}); this client runs as uid {}", socket_path,
                          server_uid, client_uid),
              "Start your own pool: ortfleet serve --socket PATH (or let a start of yours leave one)");
}

struct PoolServer::Impl {
  ServeOptions options;
  std::unique_ptr<WorkerPool> pool;
  detail::UniqueFd listener;
  int wake[2] = {-1, -1};  // stop() writes here to end serve()'s poll
  std::atomic<bool> stopping{false};
  std::mutex clients_mutex;
  struct ClientThread {
    std::thread thread;
    detail::UniqueFd socket;  // shut down at stop so that the thread ends; closed, under clients_mutex, when it ends
    bool done = false;        // clients_mutex
  };
  std::list<ClientThread> client_threads;  // clients_mutex

  /// Joins the threads of clients that have gone (a server may see thousands of jobs). clients_mutex held.
  void reap_client_threads() {
    for (auto it = client_threads.begin(); it != client_threads.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      it = client_threads.erase(it);
    }
  }
  std::atomic<int> clients{0};     // connections accepted and not yet closed (counted at accept: `status` sees every one before it)
  std::atomic<int> jobs{0};        // of them, those holding sessions or handed-over workers
  std::atomic<int> undecided{0};   // of them, those that have not said what they want yet (a job's open may be on its way)
  detail::FileLock server_lock;  // held while this server lives: one server per socket
  dev_t socket_dev = 0;  // the socket this server bound: removed at the end only while it is still there
  ino_t socket_ino = 0;
  std::optional<detail::SlurmJobWatch> job;  // the Slurm job it ends with

  /// Removes the socket this server made, and nothing that has taken its place since.
  void remove_own_socket() const {
    struct stat st {};
    if (socket_ino == 0 || ::lstat(options.socket_path.c_str(), &st) != 0) return;
    if (S_ISSOCK(st.st_mode) && st.st_dev == socket_dev && st.st_ino == socket_ino) ::unlink(options.socket_path.c_str());
  }

  // --- a client's open: the model started (or found resident) on a warm worker per device ---------

  /// Per device of `plan`: the session started (or found resident) on its warm worker, with a channel
  /// of its own to that worker (null when the device failed), and the device's reply.
  struct Started {
    std::vector<std::unique_ptr<detail::WorkerChannel>> channels;
    std::vector<json> replies;
  };
  Started start_everywhere(const detail::LocalStartPlan& plan, double timeout_s) {
    Started started;
    started.replies.resize(plan.devices.size());
    started.channels.resize(plan.devices.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < plan.devices.size(); ++i) {
      threads.emplace_back([&, i] {
        const Device device = plan.devices[i];
        detail::LocalStartPlan one = plan;
        one.devices = {device};
        try {
          auto done = detail::start_on_pool(*pool, std::move(one), timeout_s);  // its worker restored first if it was parked
          started.channels[i] = std::move(done.channel);
          started.replies[i] = {{"device", device.to_string()}, {"ready", std::move(done.ready)}};
        } catch (const std::exception& e) {
          started.replies[i] = {{"device", device.to_string()}, {"error", detail::error_to_json(e)}};
        }
      });
    }
    for (auto& t : threads) t.join();
    return started;
  }

  /// A client's open: the sessions started, a channel each handed over; a device whose start missed
  /// the model cache gets its entry made in the background, by this server.
  json open(const json& request, std::vector<detail::UniqueFd>& handed) {
    const detail::OpenRequest asked = detail::read_open_request(request);
    const detail::LocalStartPlan& plan = asked.plan;
    Started started = start_everywhere(plan, asked.timeout_s);
    json devices = json::array();
    for (size_t i = 0; i < started.replies.size(); ++i) {
      if (started.channels[i]) {
        // The client gets its own copy of the channel (SCM_RIGHTS); ours closes after the reply.
        handed.push_back(detail::UniqueFd(::dup(started.channels[i]->fd())));
        const json& status = started.replies[i].at("ready").value("status", json::object());
        // A session made here that missed the cache: its entry is made for later starts. A resident one
        // says what its own start found long ago.
        const bool resident = status.is_object() && status.value("resident", false);
        if (!resident && detail::text_field(status, "model_cache") == "miss") fill_in_background(plan, plan.devices[i]);
      }
      devices.push_back(std::move(started.replies[i]));
    }
    return detail::answer_to(detail::message::open, {{"devices", devices}});
  }

  /// A job's own worker, its session loaded, handed over as the job ends: kept for the next job.
  json take_over(const json& request, std::vector<detail::UniqueFd>& fds) {
    if (fds.size() != 2) {
      throw Error("a hand-over request carries a worker's channel and crash pipe (2 descriptors), not " + std::to_string(fds.size()),
                  "Send the pool protocol's requests");
    }
    const detail::HandOverRequest asked = detail::read_hand_over_request(request);
    if (!runs_as_me(asked.pid)) throw Error("process " + std::to_string(asked.pid) + " is not one of this user's", "Hand over your own workers");
    detail::AdoptedWorker worker;
    worker.pid = asked.pid;
    worker.device = asked.device;
    worker.visible_devices = asked.visible_devices;
    worker.channel = std::move(fds[0]);
    worker.crash_reports = std::move(fds[1]);
    pool->adopt(std::move(worker), asked.model, STDERR_FILENO);
    return detail::answer_to(detail::message::hand_over, {{"taken", 1}});
  }

  // --- work no client waits for: cache entries made in the background -------------------------------
  std::mutex background_mutex;
  std::list<std::shared_ptr<detail::BackgroundFill>> fills;

  /// Makes the cache entry of `plan`'s model on `device` in a background worker, unless one for this
  /// model is being made already.
  std::shared_ptr<detail::BackgroundFill> fill_in_background(const detail::LocalStartPlan& plan, const Device& device) {
    if (plan.config.session.model_cache_fill != ModelCacheFill::background) return nullptr;
    std::lock_guard lock(background_mutex);
    for (const auto& f : fills) {
      if (f->model() == plan.model_path && !f->finished()) return f;
    }
    detail::LocalStartPlan one = plan;
    one.devices = {device};
    one.ort_library = pool->options().ort_library;
    try {
      fills.push_back(std::make_shared<detail::BackgroundFill>(one, pool->options().worker_executable, pool->options().narrow_workers));
    } catch (const std::exception& e) {
      spdlog::warn("could not make the model cache entry of {} in the background: {}", plan.model_path, e.what());
      return nullptr;
    }
    spdlog::info("making the model cache entry of {} in the background (on {})", plan.model_path, device.to_string());
    return fills.back();
  }

  /// Fills that finished: their outcome logged, their worker gone. How many are still working.
  size_t reap_fills() {
    std::lock_guard lock(background_mutex);
    for (auto it = fills.begin(); it != fills.end();) {
      if (!(*it)->finished()) {
        ++it;
        continue;
      }
      if (auto outcome = (*it)->wait(0)) spdlog::info("{}", *outcome);
      it = fills.erase(it);
    }
    return fills.size();
  }

  // --- idle time: parking, exit ---------------------------------------------------------------------

  /// Whether anything goes on that the idle timers must not count: a job attached (or a connection that
  /// may be one: it has not said what it wants yet), a cache entry in the making. A connection that only
  /// asks (status, evict, stop) is no use of the pool: `watch ortfleet pool status` never keeps it from
  /// parking or exiting.
  bool busy() { return jobs.load() > 0 || undecided.load() > 0 || reap_fills() > 0; }
  std::atomic<int64_t> busy_until_ns{monotonic_ns()};  // last seen busy (or started), on the monotonic clock
  double idle_s() const { return static_cast<double>(monotonic_ns() - busy_until_ns.load()) / 1e9; }

  std::thread parker;                   // parks the workers, off the accept loop
  std::atomic<bool> parking_now{false};
  int64_t last_park_ns = 0;             // serve()'s thread only
  /// While nobody uses the pool (after options.park_after_s), every worker that can is parked; tried
  /// again now and then, for workers that became ready since (a spare replaced, a restarted worker).
  void park_when_idle(bool is_busy) {
    if (is_busy || !(options.park_after_s > 0) || idle_s() < options.park_after_s || parking_now) return;
    const double retry_s = std::max(options.park_after_s, 5.0);
    if (last_park_ns != 0 && static_cast<double>(monotonic_ns() - last_park_ns) / 1e9 < retry_s) return;
    last_park_ns = monotonic_ns();
    if (parker.joinable()) parker.join();
    parking_now = true;
    parker = std::thread([this] {
      // What jobs left on spare and extra workers joins the shared worker first: an idle device parks
      // at most two workers.
      if (const size_t ended = pool->consolidate(); ended > 0) spdlog::info("idle: {} extra worker(s) folded into the shared ones", ended);
      const ParkOutcome done = pool->park_workers(kParkLockTimeoutS);
      if (done.parked > 0) {
        spdlog::info("idle for {:g} s: parked {} worker(s) in {:.0f} ms (their GPU memory released; restored on the next job's request)",
                     options.park_after_s, done.parked, done.wall_ms);
      }
      for (const auto& kept : done.kept) spdlog::info("not parked: {}", kept);
      parking_now = false;
    });
  }

  /// The pool's status; `brief`: only what a start asks before it uses the pool (its devices, that it is
  /// ortfleet's), without asking any worker or reading their memory.
  json status(bool brief) {
    if (brief) {
      json devices = json::array();
      for (const auto& d : pool->devices()) devices.push_back({{"device", d.to_string()}});
      return {{"ortfleet_pool", 1}, {"devices", devices}, {"socket", options.socket_path}, {"pid", ::getpid()},
              {"event", detail::message::status.answer}};
    }
    json j = json::parse(pool->status_json());
    j["socket"] = options.socket_path;
    j["pid"] = ::getpid();
    j["clients"] = std::max(0, clients.load() - 1);  // the one asking is not counted
    j["idle_exit_s"] = options.idle_exit_s;
    j["idle_s"] = busy() ? 0.0 : idle_s();
    j["park_after_s"] = options.park_after_s;
    const auto& devices = pool->devices();
    const auto no_parking = devices.empty() ? std::optional<std::string>("no devices") : detail::WorkerParking::unavailable(devices.front());
    j["parking"] = no_parking ? *no_parking : options.park_after_s > 0 ? std::string("on") : "off (" + named(Setting::park_after, "0") + ")";
    j["slurm_job"] = job ? job->job_id() : std::string();
    json making = json::array();
    {
      std::lock_guard lock(background_mutex);
      for (const auto& f : fills) making.push_back(f->model());
    }
    j["cache_fills"] = making;
    j["event"] = detail::message::status.answer;
    return j;
  }

  void request_stop() {
    if (stopping.exchange(true)) return;
    const char byte = 1;
    [[maybe_unused]] const auto written = ::write(wake[1], &byte, 1);
  }

  // --- a client: its requests, one at a time -------------------------------------------------------

  /// One request of a client, answered on its channel. `holds`: whether this client holds sessions or
  /// handed workers over already (counted in `jobs`); set when this request makes it one.
  void answer(detail::MessageChannel& channel, detail::Message& received, const ucred& peer, bool& holds) {
    const std::string op = detail::op_of(received.body);
    if (!holds && makes_a_job(op)) {
      if (jobs.load() >= kMaxClients) {
        throw Error(fmt::format("the pool on {} serves {} jobs at once already", options.socket_path, kMaxClients), "Try again when some have finished");
      }
      ++jobs;
      holds = true;
    }
    if (detail::is_request(op, detail::message::status)) {
      channel.send(status(received.body.is_object() && received.body.value("brief", false)));
    } else if (detail::is_request(op, detail::message::evict)) {
      channel.send(detail::answer_to(detail::message::evict, {{"count", pool->evict()}}));
    } else if (detail::is_request(op, detail::message::stop)) {
      spdlog::info("stopping: asked by a client (pid {})", peer.pid);
      channel.send(detail::answer_to(detail::message::stop));
      request_stop();
    } else if (detail::is_request(op, detail::message::open)) {
      std::vector<detail::UniqueFd> handed;
      const json reply = open(received.body, handed);
      std::vector<int> fds;
      for (const auto& h : handed) fds.push_back(h.get());
      channel.send(reply, fds);
    } else if (detail::is_request(op, detail::message::hand_over)) {
      channel.send(take_over(received.body, received.fds));
    } else {
      throw Error("unknown request '" + op + "'", "The client and the pool server come from different ortfleet builds");
    }
  }

  /// Serves one client until it goes away. Whatever it sends, the answer goes to it alone: a malformed
  /// or failing request is refused and the server goes on serving it and everyone else.
  void serve_client(detail::UniqueFd fd) {
    ucred peer{};
    socklen_t length = sizeof(peer);
    detail::MessageChannel channel(std::move(fd), "a pool client");
    bool decided = false;  // counted in `undecided` until its first request says what it wants
    const auto decide = [this, &decided] {
      if (!decided) --undecided;
      decided = true;
    };
    const auto refuse = [&channel](const std::exception& e) {
      try {
        channel.send({{"event", detail::message::kFailed}, {"error", detail::error_to_json(e)}});
      } catch (const std::exception&) {
        // it went away: nothing to tell it
      }
    };
    try {
      if (::getsockopt(channel.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
        throw Error(std::string("cannot read the client's credentials: ") + std::strerror(errno));
      }
      check_pool_client(peer.uid, ::getuid(), options.socket_path);
    } catch (const std::exception& e) {
      spdlog::warn("refused a client (pid {}, uid {}): {}", peer.pid, peer.uid, e.what());
      refuse(e);
      decide();
      return;
    }
    bool holds = false;
    while (!stopping) {
      detail::Received received;
      try {
        // A job's connection may stay silent while its fleet runs; one that holds nothing may not.
        received = channel.receive(holds ? detail::kNoDeadline : detail::deadline_in(kSilentClientS, monotonic_ns()));
      } catch (const std::exception& e) {
        spdlog::debug("a client's connection failed (pid {}): {}", peer.pid, e.what());
        break;
      }
      if (received.kind == detail::Received::Kind::timed_out) {
        spdlog::info("closed the connection of a client (pid {}) that held nothing and said nothing for {:g} s", peer.pid, kSilentClientS);
        break;
      }
      if (received.kind == detail::Received::Kind::malformed) {
        spdlog::warn("refused a malformed request from pid {}: {}", peer.pid, received.problem);
        refuse(Error("malformed request: " + received.problem, "Send the pool protocol's JSON requests (fleet/worker/worker_protocol.hpp)"));
        continue;
      }
      if (received.kind != detail::Received::Kind::message) break;
      if (!makes_a_job(detail::op_of(received.message.body))) decide();  // it only asks
      try {
        answer(channel, received.message, peer, holds);
      } catch (const std::exception& e) {
        refuse(e);
      }
      decide();  // a job now (answer counted it in `jobs`), or refused
    }
    decide();
    if (holds) --jobs;
  }
};

PoolServer::PoolServer(ServeOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  if (options.socket_path.empty()) options.socket_path = default_pool_socket();
  options.socket_path = fs::absolute(options.socket_path).lexically_normal().string();
  s.options = std::move(options);
  if (!s.options.end_with_slurm_job) {
    const auto slurm = detail::slurm_allocation();
    s.options.end_with_slurm_job = slurm ? slurm->job_id : std::string();
  }
  if (!s.options.end_with_slurm_job->empty()) {
    s.job.emplace(*s.options.end_with_slurm_job);
    if (!s.job->alive()) {
      throw Error("no step of Slurm job " + s.job->job_id() + " is visible on this node (no slurmstepd of it run by root or the slurm account in /proc), so this "
                      "pool could not tell when the job ends",
                  "Start the pool inside the job's allocation, or where /proc shows Slurm's processes (not mounted with hidepid)");
    }
  }
  const fs::path folder = fs::path(s.options.socket_path).parent_path();
  detail::ensure_private_dir(folder, "Use " + named(Setting::socket) + " with a path in a folder only you can write");
  const sockaddr_un address = detail::pool_socket_address(s.options.socket_path);
  detail::look_at_socket(s.options.socket_path, /*follow=*/false);  // refuses what is not a socket

  // One server per socket, even when two start at once (two jobs leaving a pool behind): the lock is
  // held for the server's life, so the second one stops here, before it could take the socket.
  if (!s.server_lock.try_lock(s.options.socket_path + ".lock", detail::FileLock::Mode::exclusive)) {
    throw Error("a pool server already runs on " + s.options.socket_path + " (it holds " + s.options.socket_path + ".lock)",
                "Use it (ortfleet pool status), stop it (ortfleet pool stop), or give another " + named(Setting::socket));
  }
  switch (detail::look_at_socket(s.options.socket_path, /*follow=*/false)) {
    case detail::SocketFound::nothing: break;
    case detail::SocketFound::stale: fs::remove(s.options.socket_path); break;  // its server is gone
    case detail::SocketFound::live:
      // Ours or another program's: never taken from whoever listens there.
      throw Error("something already listens on " + s.options.socket_path + " (a pool server without its lock file, or another program)",
                  "Use it (ortfleet pool status), stop it, or give another " + named(Setting::socket));
  }
  s.listener = detail::UniqueFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s.listener) throw Error(std::string("cannot make a Unix socket: ") + std::strerror(errno), "Check the file-descriptor limit (ulimit -n)");
  // Mode 0600 from the start: no moment in which another user could connect.
  const mode_t old_mask = ::umask(0177);
  const int bound = ::bind(s.listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  ::umask(old_mask);
  if (bound != 0 || ::listen(s.listener.get(), 64) != 0) {
    throw Error("cannot listen on " + s.options.socket_path + ": " + std::strerror(errno), "Give another " + named(Setting::socket));
  }
  struct stat bound_stat {};
  if (::lstat(s.options.socket_path.c_str(), &bound_stat) == 0 && S_ISSOCK(bound_stat.st_mode)) {
    s.socket_dev = bound_stat.st_dev;
    s.socket_ino = bound_stat.st_ino;
  }
  if (::pipe2(s.wake, O_CLOEXEC) != 0) throw Error(std::string("pipe failed: ") + std::strerror(errno));
  try {
    s.pool = std::make_unique<WorkerPool>(s.options.pool);
  } catch (...) {
    s.remove_own_socket();
    throw;
  }
}

PoolServer::~PoolServer() {
  auto& s = *impl_;
  stop();
  std::list<Impl::ClientThread> threads;
  {
    std::lock_guard lock(s.clients_mutex);
    for (auto& c : s.client_threads) {
      if (c.socket) ::shutdown(c.socket.get(), SHUT_RDWR);
    }
    threads.swap(s.client_threads);
  }
  // A client may wait on a worker busy for hours (a start, a run, a status): the workers end first, at
  // once, and every such wait fails with them; the background fills stop meanwhile.
  std::thread ending_fills([&s] {
    std::lock_guard lock(s.background_mutex);
    s.fills.clear();  // unfinished ones stop and remove what they wrote
  });
  if (s.pool) s.pool->end_workers(kStopGraceS);
  ending_fills.join();
  for (auto& c : threads) c.thread.join();
  if (s.parker.joinable()) s.parker.join();
  {
    std::lock_guard lock(s.background_mutex);
    s.fills.clear();  // any a client began while the others stopped
  }
  // Nobody is let in any more, the workers stop, and only then does the socket go: `ortfleet pool stop`
  // returns once the socket is gone, with no worker of this pool left.
  s.listener = detail::UniqueFd();
  s.pool.reset();
  s.remove_own_socket();
  for (int fd : s.wake) {
    if (fd >= 0) ::close(fd);
  }
}

const std::string& PoolServer::socket_path() const { return impl_->options.socket_path; }

void PoolServer::make_entry_in_background(const detail::LocalStartPlan& plan) {
  if (!plan.devices.empty()) impl_->fill_in_background(plan, plan.devices.front());
}

WorkerPool& PoolServer::pool() { return *impl_->pool; }

void PoolServer::stop() { impl_->request_stop(); }

void PoolServer::serve() {
  auto& s = *impl_;
  while (!s.stopping) {
    pollfd fds[2] = {{s.listener.get(), POLLIN, 0}, {s.wake[0], POLLIN, 0}};
    const int ready = ::poll(fds, 2, 1000);
    if (s.stopping) break;
    s.pool->keep_up();  // once a second at least: a dead worker is replaced before it is needed
    if (s.job && !s.job->alive()) {
      spdlog::info("Slurm job {} has no step left on this node: exiting with it", s.job->job_id());
      break;
    }
    const bool busy = s.busy();
    if (busy) s.busy_until_ns = monotonic_ns();
    else if (s.options.idle_exit_s > 0 && s.idle_s() >= s.options.idle_exit_s) {
      spdlog::info("nobody used this pool for {:g} s: exiting (ortfleet serve --idle-exit)", s.options.idle_exit_s);
      break;
    }
    if (busy) s.last_park_ns = 0;  // the next idle spell parks anew
    s.park_when_idle(busy);
    if (ready <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    detail::UniqueFd client(::accept4(s.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client) {
      // Out of descriptors: the connection waits in the backlog; poll would report it again at once.
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    std::lock_guard lock(s.clients_mutex);
    s.reap_client_threads();
    if (s.client_threads.size() >= kMaxConnections) {
      spdlog::warn("closed a connection at once: {} are open already (those that hold nothing close after {:g} s of silence)", kMaxConnections,
                   kSilentClientS);
      continue;
    }
    Impl::ClientThread& c = s.client_threads.emplace_back();
    detail::UniqueFd own(::fcntl(client.get(), F_DUPFD_CLOEXEC, 0));  // the thread's; `socket` stays for shutdown
    c.socket = std::move(client);
    ++s.clients;
    ++s.undecided;
    c.thread = std::thread([&s, &c, fd = std::move(own)]() mutable {
      if (fd) s.serve_client(std::move(fd));
      else --s.undecided;  // no descriptor left to serve it with: it never said anything
      --s.clients;
      std::lock_guard done(s.clients_mutex);
      c.socket = detail::UniqueFd();
      c.done = true;
    });
  }
}

}  // namespace ortfleet
