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
#include "base/system_paths.hpp"
#include "fleet/pool_server.hpp"
#include "fleet/wire.hpp"
#include "fleet/worker_channel.hpp"
#include "fleet/worker_protocol.hpp"
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
  if (auto runtime = detail::env_var("XDG_RUNTIME_DIR"); runtime && !runtime->empty()) {
    return (fs::path(*runtime) / "ortfleet" / "pool.sock").string();
  }
  return (fs::path("/tmp") / ("ortfleet-" + std::to_string(::getuid())) / "pool.sock").string();
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
  dev_t socket_dev = 0;  // the socket this server bound: removed at the end only while it is still there
  ino_t socket_ino = 0;

  /// Removes the socket this server made, and nothing that has taken its place since.
  void remove_own_socket() const {
    struct stat st {};
    if (socket_ino == 0 || ::lstat(options.socket_path.c_str(), &st) != 0) return;
    if (S_ISSOCK(st.st_mode) && st.st_dev == socket_dev && st.st_ino == socket_ino) ::unlink(options.socket_path.c_str());
  }

  /// Per device: the session started (or found) on its warm worker, and a channel of the client's own.
  json open(const json& request, std::vector<detail::UniqueFd>& handed) {
    const double timeout_s = request.value("timeout_s", 2.0 * 60 * 60);
    detail::LocalStartPlan plan = detail::plan_from_json(request.at("plan"));
    plan.ort_library = pool->options().ort_library;  // the workers' runtime: already loaded
    std::vector<json> replies(plan.devices.size());
    std::vector<std::unique_ptr<detail::WorkerChannel>> channels(plan.devices.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < plan.devices.size(); ++i) {
      threads.emplace_back([&, i] {
        const Device device = plan.devices[i];
        try {
          auto worker = pool->worker_for(device, plan.model_path, timeout_s);
          channels[i] = std::make_unique<detail::WorkerChannel>(worker->attach({}, kAttachTimeoutS), device, worker->pid(),
                                                                 worker->observer_hooks());
          detail::LocalStartPlan one = plan;
          one.devices = {device};
          replies[i] = {{"device", device.to_string()},
                        {"ready", channels[i]->call(detail::message::start, {{"plan", detail::plan_to_json(one)}}, timeout_s).body}};
          pool->mark_proven(plan.model_path);
        } catch (const std::exception& e) {
          channels[i].reset();
          replies[i] = {{"device", device.to_string()}, {"error", detail::error_to_json(Error::from(e).at(device.to_string()))}};
        }
      });
    }
    for (auto& t : threads) t.join();
    json devices = json::array();
    for (size_t i = 0; i < replies.size(); ++i) {
      if (channels[i]) {
        // The client gets its own copy of the channel (SCM_RIGHTS); ours closes after the reply.
        handed.push_back(detail::UniqueFd(::dup(channels[i]->fd())));
      }
      devices.push_back(std::move(replies[i]));
    }
    return detail::answer_to(detail::message::open, {{"devices", devices}});
  }

  json status() const {
    json j = json::parse(pool->status_json());
    j["socket"] = options.socket_path;
    j["pid"] = ::getpid();
    j["clients"] = clients.load();
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
  const fs::path folder = fs::path(s.options.socket_path).parent_path();
  detail::ensure_private_dir(folder, "Use --socket with a path in a folder only you can write");
  const sockaddr_un address = socket_address(s.options.socket_path);
  refuse_non_socket(s.options.socket_path, /*follow=*/false);
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
  s.remove_own_socket();
  s.pool.reset();
  for (int fd : s.wake) {
    if (fd >= 0) ::close(fd);
  }
}

const std::string& PoolServer::socket_path() const { return impl_->options.socket_path; }
WorkerPool& PoolServer::pool() { return *impl_->pool; }

void PoolServer::stop() {
  auto& s = *impl_;
  if (s.stopping.exchange(true)) return;
  const char byte = 1;
  [[maybe_unused]] const auto written = ::write(s.wake[1], &byte, 1);
}

void PoolServer::serve() {
  auto& s = *impl_;
  while (!s.stopping) {
    pollfd fds[2] = {{s.listener.get(), POLLIN, 0}, {s.wake[0], POLLIN, 0}};
    const int ready = ::poll(fds, 2, 1000);
    if (s.stopping) break;
    s.pool->restart_dead_workers();  // once a second at least: a dead worker is replaced before it is needed
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
