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
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <thread>

#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "engine/cache/file_lock.hpp"
#include "fleet/worker/cache_fill.hpp"
#include "base/system_paths.hpp"
#include "fleet/pool/pool_server.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr const char* kSocketHint = "Start a pool server: ortfleet serve --devices all (see `ortfleet serve --help`)";
constexpr double kAttachTimeoutS = 60;

sockaddr_un socket_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    throw Error("the pool socket path is too long (" + std::to_string(path.size()) + " bytes, at most " +
                    std::to_string(sizeof(address.sun_path) - 1) + "): " + path,
                "Use a shorter path with --socket");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

detail::UniqueFd unix_socket() {
  detail::UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(std::string("cannot make a Unix socket: ") + std::strerror(errno), "Check the file-descriptor limit (ulimit -n)");
  return fd;
}

/// What a file that is not a socket is, in words ("a regular file of 12 bytes", "a folder").
std::string file_kind(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return "a regular file of " + std::to_string(st.st_size) + " bytes";
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a named pipe";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  return "not a socket";
}

/// Refuses a path that holds something other than a socket: ortfleet never replaces or removes it.
/// `follow`: a client may reach a socket through a symbolic link; the server replaces only a socket.
void refuse_non_socket(const std::string& path, bool follow) {
  struct stat st {};
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0 || S_ISSOCK(st.st_mode)) return;
  throw Error(path + " exists and is not a socket (it is " + file_kind(st) + "); ortfleet leaves it as it is",
              "Give --socket a path that is free or holds a pool socket");
}

/// A connection to the server at `path`, or an error that says why there is none and what to do.
detail::UniqueFd connect_to(const std::string& path) {
  refuse_non_socket(path, /*follow=*/true);
  auto fd = unix_socket();
  const sockaddr_un address = socket_address(path);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) return fd;
  const int error = errno;
  if (error == ENOENT || error == ECONNREFUSED) {
    throw Error("no pool server listens on " + path + (error == ENOENT ? " (no such socket)" : " (a stale socket: its server is gone)"),
                kSocketHint);
  }
  if (error == EACCES || error == EPERM) {
    throw Error("permission denied on the pool socket " + path + ": it belongs to another user",
                "Use your own pool (ortfleet serve), or run as the user who started it");
  }
  throw Error("cannot connect to the pool server at " + path + ": " + std::strerror(error), kSocketHint);
}

/// One request to the server and its answer (an error reply thrown as the error it carries).
detail::Message ask(detail::MessageChannel& channel, const detail::MessageKind& kind, json fields, double timeout_s,
                    const std::string& path) {
  channel.send(detail::request_of(kind, std::move(fields)));
  detail::Received reply = channel.receive(detail::deadline_in(timeout_s, monotonic_ns()));
  if (reply.kind == detail::Received::Kind::timed_out) {
    throw Error("the pool server at " + path + " did not answer within " + detail::seconds_text(timeout_s),
                "Check that it runs (`ortfleet pool status`) and is not stopped");
  }
  if (reply.kind == detail::Received::Kind::closed) {
    throw Error("the pool server at " + path + " closed the connection", "Its log says why; restart it with ortfleet serve");
  }
  if (reply.message.body.value("event", "") != kind.answer) {
    throw detail::error_from_json(reply.message.body.value("error", json()), "pool " + path);
  }
  return std::move(reply.message);
}
}  // namespace

std::string default_pool_socket() {
  const auto slurm = detail::slurm_allocation();
  const std::string name = slurm ? "pool-job" + slurm->job_id + ".sock" : "pool.sock";
  std::error_code ec;
  if (auto runtime = detail::env_var("XDG_RUNTIME_DIR"); runtime && fs::is_directory(*runtime, ec)) {
    return (fs::path(*runtime) / "ortfleet" / name).string();
  }
  return (fs::path("/tmp") / ("ortfleet-" + std::to_string(::getuid())) / name).string();
}

void check_pool_client(unsigned client_uid, unsigned server_uid, const std::string& socket_path) {
  if (client_uid == server_uid) return;
  throw Error(fmt::format("the pool server on {} serves only its own user (uid {}); this client runs as uid {}", socket_path,
                          server_uid, client_uid),
              "Start your own pool: ortfleet serve --socket PATH");
}

struct PoolServer::Impl {
  ServeOptions options;
  std::unique_ptr<WorkerPool> pool;
  detail::UniqueFd listener;
  int wake[2] = {-1, -1};  // stop() writes here to end serve()'s poll
  std::atomic<bool> stopping{false};
  std::mutex clients_mutex;
  std::list<std::thread> client_threads;
  std::list<int> client_fds;  // shut down at stop so that their threads end
  std::atomic<int> clients{0};
  detail::FileLock server_lock;  // held while this server lives: one server per socket
  dev_t socket_dev = 0;  // the socket this server bound: removed at the end only while it is still there
  ino_t socket_ino = 0;

  /// Removes the socket this server made, and nothing that has taken its place since.
  void remove_own_socket() const {
    struct stat st {};
    if (socket_ino == 0 || ::lstat(options.socket_path.c_str(), &st) != 0) return;
    if (S_ISSOCK(st.st_mode) && st.st_dev == socket_dev && st.st_ino == socket_ino) ::unlink(options.socket_path.c_str());
  }
  std::optional<detail::SlurmJobWatch> job;  // the Slurm job it ends with

  /// Per device of `plan`: the session started (or found resident) on its warm worker, with a channel
  /// of its own to that worker (null when the device failed), and the device's reply.
  struct Started {
    std::vector<std::unique_ptr<detail::WorkerChannel>> channels;
    std::vector<json> replies;
  };
  Started start_everywhere(detail::LocalStartPlan plan, double timeout_s) {
    plan.ort_library = pool->options().ort_library;  // the workers' runtime: already loaded
    Started started;
    started.replies.resize(plan.devices.size());
    started.channels.resize(plan.devices.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < plan.devices.size(); ++i) {
      threads.emplace_back([&, i] {
        const Device device = plan.devices[i];
        auto& channel = started.channels[i];
        try {
          auto worker = pool->worker_for(device, plan.model_path, timeout_s);
          channel = std::make_unique<detail::WorkerChannel>(worker->attach({}, kAttachTimeoutS), device, worker->pid(), worker->observer_hooks());
          detail::LocalStartPlan one = plan;
          one.devices = {device};
          started.replies[i] = {{"device", device.to_string()},
                                {"ready", channel->call(detail::message::start, {{"plan", detail::plan_to_json(one)}}, timeout_s).body}};
          pool->mark_proven(plan.model_path);
        } catch (const std::exception& e) {
          channel.reset();
          started.replies[i] = {{"device", device.to_string()}, {"error", detail::error_to_json(Error::from(e).at(device.to_string()))}};
        }
      });
    }
    for (auto& t : threads) t.join();
    return started;
  }

  /// A client's open: the sessions started, a channel each handed over; a device whose start missed
  /// the model cache gets its entry made in the background, by this server.
  json open(const json& request, std::vector<detail::UniqueFd>& handed) {
    const double timeout_s = request.value("timeout_s", 2.0 * 60 * 60);
    const detail::LocalStartPlan plan = detail::plan_from_json(request.at("plan"));
    Started started = start_everywhere(plan, timeout_s);
    json devices = json::array();
    for (size_t i = 0; i < started.replies.size(); ++i) {
      if (started.channels[i]) {
        // The client gets its own copy of the channel (SCM_RIGHTS); ours closes after the reply.
        handed.push_back(detail::UniqueFd(::dup(started.channels[i]->fd())));
        const json& status = started.replies[i].at("ready").value("status", json::object());
        if (status.value("model_cache", "") == "miss") fill_in_background(plan, plan.devices[i]);
      }
      devices.push_back(std::move(started.replies[i]));
    }
    return detail::answer_to(detail::message::open, {{"devices", devices}});
  }

  // --- work no client waits for: cache entries made in the background, the model a job asked this
  // server to have ready (prepare) -------------------------------------------------------------------
  std::mutex background_mutex;
  std::list<std::shared_ptr<detail::BackgroundFill>> fills;
  std::atomic<int> preparing{0};
  std::list<std::thread> preparations;

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
      fills.push_back(std::make_shared<detail::BackgroundFill>(one, pool_executable(), pool->options().narrow_workers));
    } catch (const std::exception& e) {
      spdlog::warn("could not make the model cache entry of {} in the background: {}", plan.model_path, e.what());
      return nullptr;
    }
    spdlog::info("making the model cache entry of {} in the background (on {})", plan.model_path, device.to_string());
    return fills.back();
  }

  std::string pool_executable() const { return detail::find_worker_executable(pool->options().worker_executable); }

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

  void prepare(const detail::LocalStartPlan& plan) {
    ++preparing;
    std::lock_guard lock(background_mutex);
    preparations.emplace_back([this, plan] {
      try {
        // The entry first, by a low-priority worker, so that the session kept here loads it.
        if (!plan.devices.empty()) {
          std::shared_ptr<detail::BackgroundFill> fill;
          for (const auto& device : plan.devices) {
            if (!stopping && (fill = fill_in_background(plan, device)) != nullptr) break;
          }
          while (fill != nullptr && !stopping && !fill->wait(0.5)) {
          }
        }
        if (!stopping) {
          Started started = start_everywhere(plan, 2.0 * 60 * 60);
          for (size_t i = 0; i < started.replies.size(); ++i) {
            if (started.replies[i].contains("error")) {
              spdlog::warn("could not prepare {} on {}: {}", plan.model_path, plan.devices[i].to_string(),
                           detail::error_from_json(started.replies[i].at("error"), "").what());
            }
          }
          spdlog::info("prepared {}: resident on the pool for the next job", plan.model_path);
        }  // the channels close here: the sessions stay resident, held by nobody
      } catch (const std::exception& e) {
        spdlog::warn("could not prepare {}: {}", plan.model_path, e.what());
      }
      --preparing;
    });
  }

  void request_stop() {
    if (stopping.exchange(true)) return;
    const char byte = 1;
    [[maybe_unused]] const auto written = ::write(wake[1], &byte, 1);
  }

  /// Whether anything goes on that the idle timer must not count: a client, a fill, a preparation.
  bool busy() { return clients.load() > 0 || preparing.load() > 0 || reap_fills() > 0; }
  std::atomic<int64_t> busy_until_ns{monotonic_ns()};  // last seen busy (or started), on the monotonic clock
  double idle_s() const { return static_cast<double>(monotonic_ns() - busy_until_ns.load()) / 1e9; }

  json status() {
    json j = json::parse(pool->status_json());
    j["socket"] = options.socket_path;
    j["pid"] = ::getpid();
    j["clients"] = std::max(0, clients.load() - 1);  // the one asking is not counted
    j["idle_exit_s"] = options.idle_exit_s;
    j["idle_s"] = busy() ? 0.0 : idle_s();
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

  void serve_client(detail::UniqueFd fd) {
    ucred peer{};
    socklen_t length = sizeof(peer);
    detail::MessageChannel channel(std::move(fd));
    try {
      if (::getsockopt(channel.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
        throw Error(std::string("cannot read the client's credentials: ") + std::strerror(errno));
      }
      check_pool_client(peer.uid, ::getuid(), options.socket_path);
    } catch (const std::exception& e) {
      spdlog::warn("refused a client (pid {}, uid {}): {}", peer.pid, peer.uid, e.what());
      channel.send({{"event", detail::message::kFailed}, {"error", detail::error_to_json(e)}});
      return;
    }
    ++clients;
    while (!stopping) {
      detail::Received received = channel.receive();
      if (received.kind != detail::Received::Kind::message) break;
      const json& request = received.message.body;
      const std::string op = detail::op_of(request);
      try {
        if (detail::is_request(op, detail::message::status)) {
          channel.send(status());
        } else if (detail::is_request(op, detail::message::evict)) {
          channel.send(detail::answer_to(detail::message::evict, {{"count", pool->evict()}}));
        } else if (detail::is_request(op, detail::message::stop)) {
          spdlog::info("stopping: asked by a client (pid {})", peer.pid);
          channel.send(detail::answer_to(detail::message::stop));
          request_stop();
        } else if (detail::is_request(op, detail::message::open)) {
          std::vector<detail::UniqueFd> handed;
          const json reply = open(request, handed);
          std::vector<int> fds;
          for (const auto& h : handed) fds.push_back(h.get());
          channel.send(reply, fds);
        } else {
          throw Error("unknown request '" + op + "'", "The client and the pool server come from different ortfleet builds");
        }
      } catch (const std::exception& e) {
        try {
          channel.send({{"event", detail::message::kFailed}, {"error", detail::error_to_json(e)}});
        } catch (const std::exception&) {
          break;
        }
      }
    }
    --clients;
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
      throw Error("no step of Slurm job " + s.job->job_id() + " is visible on this node (no slurmstepd process of it in /proc), so this "
                      "pool could not tell when the job ends",
                  "Start the pool inside the job's allocation, or where /proc shows Slurm's processes (not mounted with hidepid)");
    }
  }
  const fs::path folder = fs::path(s.options.socket_path).parent_path();
  detail::ensure_private_dir(folder, "Use --socket with a path in a folder only you can write");
  const sockaddr_un address = socket_address(s.options.socket_path);
  refuse_non_socket(s.options.socket_path, /*follow=*/false);

  // One server per socket, even when two start at once (two jobs leaving a pool behind): the lock is
  // held for the server's life, so the second one stops here, before it could take the socket.
  if (!s.server_lock.try_lock(s.options.socket_path + ".lock", detail::FileLock::Mode::exclusive)) {
    throw Error("a pool server already runs on " + s.options.socket_path + " (it holds " + s.options.socket_path + ".lock)",
                "Use it (ortfleet pool status), stop it (ortfleet pool stop), or give another --socket");
  }
  if (fs::exists(fs::symlink_status(s.options.socket_path))) {
    bool answered = false;
    try {
      connect_to(s.options.socket_path);
      answered = true;
    } catch (const Error&) {
      // nobody listens: a stale socket of a server that is gone
    }
    if (answered) {
      throw Error("a pool server already listens on " + s.options.socket_path,
                  "Use it (ortfleet pool status), stop it (SIGTERM), or give another --socket");
    }
    fs::remove(s.options.socket_path);
  }
  s.listener = unix_socket();
  // Mode 0600 from the start: no moment in which another user could connect.
  const mode_t old_mask = ::umask(0177);
  const int bound = ::bind(s.listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  ::umask(old_mask);
  if (bound != 0 || ::listen(s.listener.get(), 64) != 0) {
    throw Error("cannot listen on " + s.options.socket_path + ": " + std::strerror(errno), "Give another --socket");
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
  {
    std::lock_guard lock(s.clients_mutex);
    for (int fd : s.client_fds) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : s.client_threads) {
    if (t.joinable()) t.join();
  }
  for (auto& t : s.preparations) {
    if (t.joinable()) t.join();  // they see `stopping` within half a second, or finish their start
  }
  {
    std::lock_guard lock(s.background_mutex);
    s.fills.clear();  // unfinished ones stop and remove what they wrote
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

void PoolServer::prepare(const detail::LocalStartPlan& plan) { impl_->prepare(plan); }
WorkerPool& PoolServer::pool() { return *impl_->pool; }

void PoolServer::stop() { impl_->request_stop(); }

void PoolServer::serve() {
  auto& s = *impl_;
  while (!s.stopping) {
    pollfd fds[2] = {{s.listener.get(), POLLIN, 0}, {s.wake[0], POLLIN, 0}};
    const int ready = ::poll(fds, 2, 1000);
    if (s.stopping) break;
    s.pool->restart_dead_workers();  // once a second at least: a dead worker is replaced before it is needed
    if (s.job && !s.job->alive()) {
      spdlog::info("Slurm job {} has no step left on this node: exiting with it", s.job->job_id());
      break;
    }
    if (s.busy()) s.busy_until_ns = monotonic_ns();
    else if (s.options.idle_exit_s > 0 && s.idle_s() >= s.options.idle_exit_s) {
      spdlog::info("nobody used this pool for {:g} s: exiting (ortfleet serve --idle-exit)", s.options.idle_exit_s);
      break;
    }
    if (ready <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    detail::UniqueFd client(::accept4(s.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client) continue;
    std::lock_guard lock(s.clients_mutex);
    s.client_fds.push_back(client.get());
    auto fd_entry = std::prev(s.client_fds.end());
    s.client_threads.emplace_back([&s, fd = std::move(client), fd_entry]() mutable {
      s.serve_client(std::move(fd));
      std::lock_guard done(s.clients_mutex);
      s.client_fds.erase(fd_entry);
    });
  }
}

std::string pool_status(const std::string& socket_path, double timeout_s) {
  detail::MessageChannel channel(connect_to(socket_path));
  json status = ask(channel, detail::message::status, nullptr, timeout_s, socket_path).body;
  status.erase("event");
  return status.dump();
}

void pool_stop(const std::string& socket_path, double timeout_s) {
  {
    detail::MessageChannel channel(connect_to(socket_path));
    ask(channel, detail::message::stop, nullptr, timeout_s, socket_path);
  }
  const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
  std::error_code ec;
  while (fs::exists(fs::symlink_status(socket_path, ec))) {
    if (monotonic_ns() > deadline) {
      throw Error("the pool server on " + socket_path + " was asked to stop and is still there after " + detail::seconds_text(timeout_s),
                  "Its workers may be busy; `ortfleet pool status` shows them, SIGTERM to its pid stops it");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

size_t pool_evict(const std::string& socket_path, double timeout_s) {
  detail::MessageChannel channel(connect_to(socket_path));
  return ask(channel, detail::message::evict, nullptr, timeout_s, socket_path).body.value("count", size_t{0});
}

namespace detail {

OpenedOnPool open_on_pool_server(const std::string& socket_path, const LocalStartPlan& plan, double timeout_s) {
  OpenedOnPool opened;
  opened.connection = std::make_unique<MessageChannel>(connect_to(socket_path));
  LocalStartPlan absolute = plan;
  absolute.model_path = fs::absolute(plan.model_path).string();  // the server runs elsewhere
  if (!absolute.cache_dir.empty()) absolute.cache_dir = fs::absolute(plan.cache_dir).string();
  if (!absolute.profile_dir.empty()) absolute.profile_dir = fs::absolute(plan.profile_dir).string();
  Message reply =
      ask(*opened.connection, message::open, {{"plan", plan_to_json(absolute)}, {"timeout_s", timeout_s}}, timeout_s + 60, socket_path);
  size_t next_fd = 0;
  for (const auto& d : reply.body.at("devices")) {
    OpenedDevice device;
    const Device which = Device::parse(d.at("device").get<std::string>());
    if (d.contains("error")) {
      device.error = error_from_json(d.at("error"), which.to_string());
    } else {
      if (next_fd >= reply.fds.size()) throw Error("the pool server sent fewer channels than devices", {}, which.to_string());
      device.ready = ready_from_json(d.at("ready"));
      device.channel = std::make_unique<WorkerChannel>(std::move(reply.fds[next_fd++]), which, device.ready->status.pid);
    }
    opened.devices.push_back(std::move(device));
  }
  if (opened.devices.size() != plan.devices.size()) throw Error("the pool server answered for other devices than asked");
  return opened;
}

std::optional<std::vector<std::string>> live_pool_devices(const std::string& socket_path, double timeout_s) {
  std::error_code ec;
  if (!fs::is_socket(socket_path, ec)) return std::nullopt;  // the common case, without a connection attempt
  try {
    const json status = json::parse(pool_status(socket_path, timeout_s));
    std::vector<std::string> devices;
    for (const auto& d : status.at("devices")) devices.push_back(d.at("device").get<std::string>());
    return devices;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace detail
}  // namespace ortfleet
