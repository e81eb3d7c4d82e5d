#include "fleet/pool/pool_client.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/slurm.hpp"
#include "base/system_paths.hpp"
#include "ortfleet/base/settings.hpp"
#include "process/pidfd.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/pool/pool_daemon.hpp"
#include "fleet/pool/pool_paths.hpp"
#include "fleet/pool/pool_protocol.hpp"
#include "fleet/pool/pool_runtime.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/fleet/pool_server.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace detail {
namespace {
constexpr const char* kNoPoolHint =
    "A start leaves a warm pool on the default socket for the next job (ortfleet start, ortfleet.Fleet); "
    "`ortfleet serve --devices all` runs one for every job";

UniqueFd unix_socket() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(std::string("cannot make a Unix socket: ") + std::strerror(errno), "Check the file-descriptor limit (ulimit -n)");
  return fd;
}

constexpr const char* kOtherUserHint = "Use your own pool (ortfleet serve, or the one a start of yours leaves), or run as the user who started it";

std::string server_at(const std::string& path) { return "the pool server at " + path; }

/// connect(2) on `path`: 0, or the errno.
int try_connect(const std::string& path, UniqueFd& fd) {
  fd = unix_socket();
  const sockaddr_un address = pool_socket_address(path);
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 ? 0 : errno;
}
/// How long a job waits for the pool to note that it ends one of its workers.
constexpr double kNoteTimeoutS = 2;
/// How long a job waits to tell whether the pool's worker that closed its channel has ended.
constexpr double kEndedWaitS = 1;

/// A pool worker's channel hooks for this client. A run that misses its deadline ends the worker (SIGKILL
/// through a pidfd, which no later process with its pid can receive), as a fleet's own worker is ended;
/// the pool starts another. The pool on `socket_path` is told first, so that its log says what ended the
/// worker (and with it every session on it, other jobs' too). A worker that closes the channel is said
/// to be the pool's, with where the pool's messages are (`pool_log`: its words, "the pool's log PATH"):
/// this client never sees them. Without a pidfd the worker cannot be watched, and is left as it is.
WorkerChannel::Hooks pool_worker_hooks(int pid, const Device& device, const std::string& socket_path, const std::string& pool_log) {
  WorkerChannel::Hooks hooks;
  std::shared_ptr<PidFd> watched;
  try {
    watched = std::make_shared<PidFd>(pid);
  } catch (const Error& e) {
    spdlog::debug("the pool's worker {} cannot be watched: {}", pid, e.what());
  }
  if (watched) {
    hooks.kill = [watched, pid, socket_path] {
      try {
        MessageChannel pool(connect_to_pool(socket_path), server_at(socket_path));
        ask_pool(pool, pool_message::worker_killed, {{"pid", pid}, {"what", "run"}}, kNoteTimeoutS);
      } catch (const Error& e) {
        spdlog::debug("the pool on {} was not told that its worker {} is ended: {}", socket_path, pid, e.what());
      }
      watched->signal(SIGKILL);
    };
  }
  hooks.gone = [watched, pid, device, pool_log](const std::string& doing) {
    // Ended (killed, crashed), or it closed only this job's channel and runs on: never waited for long.
    const bool ended = !watched || watched->exited(kEndedWaitS);
    return Error(fmt::format("the pool's worker (pid {}) for {} {} during {}: {} says why", pid, device.to_string(),
                             ended ? "ended" : "closed this job's connection (it still runs)", doing, pool_log),
                 "Start again (the command, or a new Fleet): the pool starts another worker for " + device.to_string() +
                     "; `ortfleet pool status` shows its workers",
                 device.to_string());
  };
  return hooks;
}
}  // namespace

sockaddr_un pool_socket_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty()) throw Error("the pool socket path is empty", "Give " + named(Setting::socket) + " a path, or leave it out for the default socket");
  if (path.size() >= sizeof(address.sun_path)) {
    throw Error("the pool socket path is too long (" + std::to_string(path.size()) + " bytes, at most " +
                    std::to_string(sizeof(address.sun_path) - 1) + "): " + path,
                "Use a shorter path with " + named(Setting::socket));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

namespace {
/// Whether a socket file is at `path`; throws for anything else there, or a path that cannot be looked at.
bool socket_file_there(const std::string& path, bool follow) {
  struct stat st {};
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    if (errno == ENOENT) return false;
    if (errno == EACCES) throw Error("permission denied on the pool socket " + path + ": it belongs to another user", kOtherUserHint);
    throw Error("cannot look at the pool socket " + path + ": " + std::strerror(errno), "Give " + named(Setting::socket) + " a path in a folder you can read");
  }
  if (!S_ISSOCK(st.st_mode)) {
    throw Error(path + " exists and is not a socket (it is " + describe_file(st) + "); ortfleet leaves it as it is",
                "Give " + named(Setting::socket) + " a path that is free or holds a pool socket");
  }
  return true;
}

/// Why connecting to the pool socket at `path` failed with `error` (connect's errno), and what to do.
Error connect_failure(const std::string& path, int error) {
  if (error == ENOENT || error == ECONNREFUSED) {
    return Error("no warm pool runs on " + path + (error == ENOENT ? " (no such socket)" : " (a stale socket: its server is gone)"), kNoPoolHint);
  }
  if (error == EACCES || error == EPERM) return Error("permission denied on the pool socket " + path + ": it belongs to another user", kOtherUserHint);
  if (error == EPROTOTYPE) {
    return Error("something that is not an ortfleet pool listens on " + path + " (a stream socket); ortfleet leaves it as it is",
                 "Give " + named(Setting::socket) + " a path of your own");
  }
  return Error("cannot connect to the pool server at " + path + ": " + std::strerror(error), kNoPoolHint);
}
}  // namespace

SocketFound look_at_socket(const std::string& path, bool follow) {
  if (!socket_file_there(path, follow)) return SocketFound::nothing;
  UniqueFd fd;
  const int error = try_connect(path, fd);
  if (error == ECONNREFUSED) return SocketFound::stale;
  if (error == ENOENT) return SocketFound::nothing;  // gone meanwhile
  // Connected, or refused for who we are or what we speak: somebody listens, and it stays.
  return SocketFound::live;
}

// One connection per request: no probe connection first (the server would take it for a client, and a
// status asked every 100 ms would then keep the pool from ever being idle).
UniqueFd connect_to_pool(const std::string& path) {
  if (!socket_file_there(path, /*follow=*/true)) throw Error("no warm pool runs on " + path + " (no such socket)", kNoPoolHint);
  UniqueFd fd;
  const int error = try_connect(path, fd);
  if (error != 0) throw connect_failure(path, error);
  return fd;
}

Message ask_pool(MessageChannel& channel, const MessageKind& kind, json fields, double timeout_s, const std::vector<int>& fds) {
  const std::string& who = channel.peer();
  try {
    channel.send(request_of(kind, std::move(fields)), fds);
  } catch (const Error& e) {
    // A server that refuses this client (another user's pool) says why first and then closes: that
    // refusal is still waiting to be read.
    Received said = channel.receive(deadline_in(1.0, monotonic_ns()));
    if (said.kind == Received::Kind::message && event_of(said.message.body) == message::kFailed) {
      throw error_from_json(said.message.body.value("error", json()), who);
    }
    throw Error(who + " closed the connection before the request reached it (" + e.what_failed() + ")",
                "Its log (the socket's path + .log) says why; `ortfleet pool status` shows whether it runs");
  }
  Received reply = channel.receive(deadline_in(timeout_s, monotonic_ns()));
  // A server that refused this client and closed before reading its request made the kernel report the
  // close first ("connection reset"): the refusal may still wait behind it.
  if (reply.kind == Received::Kind::closed) {
    Received behind = channel.receive(deadline_in(0.2, monotonic_ns()));
    if (behind.kind == Received::Kind::message) reply = std::move(behind);
  }
  switch (reply.kind) {
    case Received::Kind::timed_out:
      throw Error(who + " did not answer within " + seconds_text(timeout_s), "Check that it runs (`ortfleet pool status`) and is not stopped");
    case Received::Kind::closed:
      throw Error(who + " closed the connection", "Its log (the socket's path + .log) says why; a start leaves a new pool, or run ortfleet serve");
    case Received::Kind::malformed:
      throw Error(who + " answered with something that is not an ortfleet pool's message (" + reply.problem + ")",
                  "Another program listens there? Give " + named(Setting::socket) + " a path of your own");
    case Received::Kind::message: break;
  }
  const std::string event = event_of(reply.message.body);
  if (event == kind.answer) return std::move(reply.message);
  if (event == message::kFailed) throw error_from_json(reply.message.body.value("error", json()), who);
  throw Error(who + " answered '" + event + "' to '" + kind.op + "': it is not an ortfleet pool of this version",
              "Stop it (ortfleet pool stop) and let a start leave a new one, or give " + named(Setting::socket) + " another path");
}

OpenedOnPool open_on_pool_server(const std::string& socket_path, const LocalStartPlan& plan, double timeout_s) {
  OpenedOnPool opened;
  opened.connection = std::make_unique<MessageChannel>(connect_to_pool(socket_path), server_at(socket_path));
  // The server works elsewhere ("/"): every file the plan names, from this process's folder. A runtime
  // this start names (its setting, or the environment's) goes with it, checked as loading it would: the
  // pool serves it only where its workers run that very library.
  LocalStartPlan absolute = with_absolute_paths(plan, "");
  if (const auto runtime = named_runtime(plan.ort_library)) absolute.ort_library = absolute_in(*runtime, "");
  Message reply = ask_pool(*opened.connection, pool_message::open, {{"plan", plan_to_json(absolute)}, {"timeout_s", timeout_s}}, timeout_s + 60);
  // Where the pool's messages go (its log, or its `ortfleet serve`'s output): a worker's end is explained there.
  const std::string pool_log = text_field(reply.body, "log").empty() ? "the pool's log " + pool_log_path(socket_path) : text_field(reply.body, "log");
  size_t next_fd = 0;
  for (const auto& d : reply.body.at("devices")) {
    OpenedDevice device;
    const Device which = Device::parse(d.at("device").get<std::string>());
    if (d.contains("error")) {
      device.error = error_from_json(d.at("error"), which.to_string());
    } else {
      if (next_fd >= reply.fds.size()) throw Error("the pool server sent fewer channels than devices", {}, which.to_string());
      device.ready = ready_from_json(d.at("ready"));
      device.channel = std::make_unique<WorkerChannel>(std::move(reply.fds[next_fd++]), which, device.ready->status.pid,
                                                       pool_worker_hooks(device.ready->status.pid, which, socket_path, pool_log));
    }
    opened.devices.push_back(std::move(device));
  }
  if (opened.devices.size() != plan.devices.size()) throw Error("the pool server answered for other devices than asked");
  return opened;
}

PoolProbe probe_pool(const std::string& socket_path, double timeout_s) {
  PoolProbe probe;
  try {
    if (!socket_file_there(socket_path, /*follow=*/true)) return probe;  // none: a start may leave one there
    UniqueFd fd;
    const int error = try_connect(socket_path, fd);
    if (error == ECONNREFUSED || error == ENOENT) return probe;  // stale, or gone meanwhile: the same
    if (error != 0) throw connect_failure(socket_path, error);
    // A brief status: the devices it serves, without the workers' memory and sessions (what `pool
    // status` shows, which asks every worker): a start must not wait on that.
    MessageChannel channel(std::move(fd), server_at(socket_path));
    const json status = ask_pool(channel, pool_message::status, {{"brief", true}}, timeout_s).body;
    for (const auto& d : status.at("devices")) {
      const std::string device = d.at("device").get<std::string>();
      if (std::find(probe.devices.begin(), probe.devices.end(), device) == probe.devices.end()) probe.devices.push_back(device);
    }
    if (const auto runtime = status.find("runtime"); runtime != status.end() && runtime->is_object()) {
      probe.runtime_path = text_field(*runtime, "path");
      probe.runtime_content = text_field(*runtime, "content");
    }
    probe.left_by_job = status.value("left_by_job", false);
    probe.pid = status.value("pid", 0);
    probe.kind = PoolProbe::Kind::ours;
  } catch (const std::exception& e) {
    probe.kind = PoolProbe::Kind::unusable;
    probe.why = Error::from(e).what_failed();
  }
  return probe;
}

void restore_ahead_on_pool(const std::string& socket_path, const std::vector<Device>& devices, const std::string& model, double timeout_s) {
  try {
    json names = json::array();
    for (const auto& d : devices) names.push_back(d.to_string());
    MessageChannel channel(connect_to_pool(socket_path), server_at(socket_path));
    ask_pool(channel, pool_message::restore_ahead, {{"devices", names}, {"model", absolute_in(model, "")}}, timeout_s);
  } catch (const std::exception& e) {
    spdlog::debug("the warm pool on {} was not asked to restore ahead: {}", socket_path, e.what());
  }
}

size_t hand_over_to_pool(const std::string& socket_path, const std::vector<HandedWorker>& workers, double timeout_s) {
  size_t taken = 0;
  try {
    MessageChannel channel(connect_to_pool(socket_path), server_at(socket_path));
    for (const auto& w : workers) {
      const auto [channel_fd, crash_fd] = w.process->handover_fds();
      const json fields = {{"device", w.process->device().to_string()},
                           {"pid", w.process->pid()},
                           {"visible_devices", w.process->visible_devices()},
                           {"model", absolute_in(w.model, "")}};
      try {
        ask_pool(channel, pool_message::hand_over, fields, timeout_s, {channel_fd, crash_fd});
        w.process->handed_over();
        ++taken;
      } catch (const Error& e) {
        spdlog::debug("the warm pool did not take the worker of {}: {}", w.process->device().to_string(), e.what());
      }
    }
  } catch (const Error& e) {
    spdlog::debug("no warm pool to hand the workers to: {}", e.what());
  }
  return taken;
}

void await_socket_gone(const std::string& socket_path, double timeout_s) {
  const int64_t deadline = deadline_in(timeout_s, monotonic_ns());
  std::error_code ec;
  while (fs::exists(fs::symlink_status(socket_path, ec))) {
    if (monotonic_ns() > deadline) {
      throw Error("the pool server on " + socket_path + " was asked to stop and is still there after " + seconds_text(timeout_s),
                  "Its workers may be busy; `ortfleet pool status` shows them, SIGTERM to its pid stops it");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<std::string> pool_runtime_mismatch(const PoolProbe& probe, const std::string& ort_library) {
  try {
    const auto named = named_runtime(ort_library);
    if (!named) return std::nullopt;
    if (probe.runtime_content.empty()) return "it does not say which ONNX Runtime its workers run, and this start names " + *named;
    std::error_code ec;
    if (fs::weakly_canonical(*named, ec) == fs::weakly_canonical(probe.runtime_path, ec)) return std::nullopt;  // no reading
    if (runtime_content(*named) == probe.runtime_content) return std::nullopt;
    return "its workers run ONNX Runtime " + probe.runtime_path + ", and this start names another library: " + *named;
  } catch (const Error& e) {
    return e.what_failed();  // a runtime that cannot be used: the start without the pool says so
  }
}

}  // namespace detail

std::string default_pool_socket() {
  std::error_code ec;
  const auto runtime = detail::env_var("XDG_RUNTIME_DIR");
  return default_pool_socket_in(runtime && fs::is_directory(*runtime, ec) ? *runtime : std::string());
}

std::string default_pool_socket_in(const std::string& runtime_dir) {
  const auto slurm = detail::slurm_allocation();
  const std::string name = slurm ? "pool-job" + slurm->job_id + ".sock" : "pool.sock";
  if (!runtime_dir.empty()) return (fs::path(runtime_dir) / "ortfleet" / name).string();
  return (fs::path("/tmp") / ("ortfleet-" + std::to_string(::getuid())) / name).string();
}

std::string pool_status(const std::string& socket_path, double timeout_s) {
  detail::MessageChannel channel(detail::connect_to_pool(socket_path), detail::server_at(socket_path));
  json status = detail::ask_pool(channel, detail::pool_message::status, nullptr, timeout_s).body;
  status.erase("event");
  return status.dump();
}

void pool_stop(const std::string& socket_path, double timeout_s) {
  {
    detail::MessageChannel channel(detail::connect_to_pool(socket_path), detail::server_at(socket_path));
    detail::ask_pool(channel, detail::pool_message::stop, nullptr, timeout_s);
  }
  detail::await_socket_gone(socket_path, timeout_s);
}

size_t pool_evict(const std::string& socket_path, double timeout_s) {
  detail::MessageChannel channel(detail::connect_to_pool(socket_path), detail::server_at(socket_path));
  return detail::ask_pool(channel, detail::pool_message::evict, nullptr, timeout_s).body.value("count", size_t{0});
}

}  // namespace ortfleet
