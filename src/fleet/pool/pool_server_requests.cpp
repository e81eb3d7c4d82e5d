// A pool server's clients: each served on a thread of its own, each request answered through the dispatch
// table below (the requests: pool_protocol.hpp).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "base/json_errors.hpp"
#include "fleet/pool/pool_protocol.hpp"
#include "fleet/pool/pool_requests.hpp"
#include "fleet/pool/pool_server_impl.hpp"
#include "fleet/pool/pool_paths.hpp"
#include "fleet/pool/pool_start.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {
/// Jobs served at once (clients that opened a model or handed workers over): one past this is refused,
/// not queued. Asking the pool (status, stop, evict) is never refused for it.
constexpr int kMaxClients = 256;
/// A connection that holds nothing (no model opened, no worker handed over) and says nothing for this
/// long is closed: silent connections cannot fill the server, and the owner's `pool stop` and `pool
/// status` get through within this long whatever else is connected.
constexpr double kSilentClientS = 10;
/// How long a refused client's request is waited for before its connection closes: read, it cannot
/// make the kernel report the close to that client before the refusal.
constexpr double kRefusedDrainS = 1;
/// What a client whose request the server cannot read should do.
constexpr const char* kProtocolHint = "Send the pool protocol's JSON requests (fleet/pool/pool_protocol.hpp)";

/// Whether process `pid` runs as this process's user (a job may hand over only its own workers).
bool runs_as_me(int pid) {
  struct stat st {};
  return pid > 0 && ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid == ::getuid();
}

}  // namespace

const PoolServer::Impl::Route* PoolServer::Impl::route_of(const std::string& op) {
  static constexpr Route kRoutes[] = {
      {&detail::pool_message::status, &Impl::answer_status, false},
      {&detail::pool_message::evict, &Impl::answer_evict, false},
      {&detail::pool_message::stop, &Impl::answer_stop, false},
      {&detail::pool_message::open, &Impl::answer_open, true},
      {&detail::pool_message::hand_over, &Impl::answer_hand_over, true},
      {&detail::pool_message::worker_killed, &Impl::answer_worker_killed, false},
      {&detail::pool_message::restore_ahead, &Impl::answer_restore_ahead, false},
  };
  for (const auto& r : kRoutes) {
    if (detail::is_request(op, *r.kind)) return &r;
  }
  return nullptr;
}

// --- the answers -------------------------------------------------------------------------------------------

json PoolServer::Impl::answer_status(Request& r) { return status(r.message.body.is_object() && r.message.body.value("brief", false)); }

json PoolServer::Impl::answer_evict(Request&) { return detail::answer_to(detail::pool_message::evict, {{"count", pool->evict()}}); }

json PoolServer::Impl::answer_stop(Request& r) {
  // if_idle: a node daemon taking over a pool a job left stops it only while no job uses it.
  if (r.message.body.is_object() && r.message.body.value("if_idle", false) && (jobs.load() > 0 || undecided.load() > 0)) {
    throw Error(fmt::format("the pool on {} serves {} job(s) now", options.socket_path, std::max(jobs.load(), 1)), "Ask again once they have ended");
  }
  spdlog::info("stopping: asked by a client (pid {})", r.peer.pid);
  r.then_stop = true;
  return detail::answer_to(detail::pool_message::stop);
}

json PoolServer::Impl::answer_open(Request& r) {
  // Per device the session started (or found resident) on its warm worker, with a channel of its own
  // to that worker for the client; a device whose start missed the model cache gets its entry made in
  // the background, by this server.
  const detail::OpenRequest asked = detail::read_open_request(r.message.body);
  const detail::LocalStartPlan& plan = asked.plan;
  std::vector<std::unique_ptr<detail::WorkerChannel>> channels(plan.devices.size());
  std::vector<json> replies(plan.devices.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < plan.devices.size(); ++i) {
    threads.emplace_back([&, i] {
      const Device device = plan.devices[i];
      detail::LocalStartPlan one = plan;
      one.devices = {device};
      try {
        auto done = detail::start_on_pool(*pool, std::move(one), asked.timeout_s);  // its worker restored first if it was parked
        channels[i] = std::move(done.channel);
        replies[i] = {{"device", device.to_string()}, {"ready", std::move(done.ready)}};
      } catch (const std::exception& e) {
        replies[i] = {{"device", device.to_string()}, {"error", detail::error_to_json(e)}};
      }
    });
  }
  for (auto& t : threads) t.join();
  json devices = json::array();
  for (size_t i = 0; i < replies.size(); ++i) {
    if (channels[i]) {
      // The client gets its own copy of the channel (SCM_RIGHTS); ours closes after the reply.
      r.reply_fds.push_back(detail::UniqueFd(::dup(channels[i]->fd())));
      const json& status = replies[i].at("ready").value("status", json::object());
      // A session made here that missed the cache: its entry is made for later starts. A resident one
      // says what its own start found long ago.
      const bool resident = status.is_object() && status.value("resident", false);
      if (!resident && detail::text_field(status, "model_cache") == "miss") fill_in_background(plan, plan.devices[i]);
      // Remembered (with the plan it was served with) for the daemon's next start.
      detail::LocalStartPlan one = plan;
      one.devices = {plan.devices[i]};
      if (served) served->note(one);
    }
    devices.push_back(std::move(replies[i]));
  }
  return detail::answer_to(detail::pool_message::open, {{"devices", devices}, {"log", messages_at}});
}

json PoolServer::Impl::answer_hand_over(Request& r) {
  // A job's own worker, its session loaded, handed over as the job ends: kept for the next job.
  auto& fds = r.message.fds;
  if (fds.size() != 2) {
    throw Error("a hand-over request carries a worker's channel and crash pipe (2 descriptors), not " + std::to_string(fds.size()),
                "Send the pool protocol's requests");
  }
  const detail::HandOverRequest asked = detail::read_hand_over_request(r.message.body);
  if (!runs_as_me(asked.pid)) throw Error("process " + std::to_string(asked.pid) + " is not one of this user's", "Hand over your own workers");
  detail::AdoptedWorker worker;
  worker.pid = asked.pid;
  worker.device = asked.device;
  worker.visible_devices = asked.visible_devices;
  worker.channel = std::move(fds[0]);
  worker.crash_reports = std::move(fds[1]);
  pool->adopt(std::move(worker), asked.model, STDERR_FILENO);
  return detail::answer_to(detail::pool_message::hand_over, {{"taken", 1}});
}

json PoolServer::Impl::answer_worker_killed(Request& r) {
  const detail::WorkerKilledNote note = detail::read_worker_killed_note(r.message.body);
  pool->note_ended_by_client(note.pid, fmt::format("was killed by a job (pid {}) whose {} on it missed its deadline: every session on it ended "
                                                   "with it, other jobs' too (docs/serving.md)",
                                                   r.peer.pid, note.what));
  return detail::answer_to(detail::pool_message::worker_killed);
}

json PoolServer::Impl::answer_restore_ahead(Request& r) {
  // A job's client that will use the pool says so as early as it can (its Fleet's construction): the
  // devices' parked workers are restored while it still imports, reads and plans. Counted as use: a job
  // that then does not come leaves the pool parked again after the usual idle time.
  const detail::RestoreAheadRequest asked = detail::read_restore_ahead_request(r.message.body);
  busy_until_ns = monotonic_ns();
  restored_ahead = true;
  pool->restore_ahead(asked.devices, asked.model.empty() ? asked.model : detail::absolute_in(asked.model, ""));
  return detail::answer_to(detail::pool_message::restore_ahead, {{"devices", asked.devices.size()}});
}

// --- a client ----------------------------------------------------------------------------------------------

void PoolServer::Impl::serve_client(detail::UniqueFd fd) {
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
    // Its request is read before the connection closes: one left unread would make the kernel report
    // the close to the client ("connection reset") ahead of the refusal it is waiting to read.
    (void)channel.receive(detail::deadline_in(kRefusedDrainS, monotonic_ns()));
    return;
  }
  bool holds = false;  // holds sessions or handed workers over already (counted in `jobs`)
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
      refuse(Error("malformed request: " + received.problem, kProtocolHint));
      continue;
    }
    if (received.kind != detail::Received::Kind::message) break;
    const std::string op = detail::op_of(received.message.body);
    const Route* route = route_of(op);
    if (route == nullptr || !route->makes_a_job) decide();  // it only asks
    Request request{channel, received.message, peer};
    try {
      if (route == nullptr) throw Error("unknown request '" + op + "'", "The client and the pool server come from different ortfleet builds");
      if (!holds && route->makes_a_job) {
        if (jobs.load() >= kMaxClients) {
          throw Error(fmt::format("the pool on {} serves {} jobs at once already", options.socket_path, kMaxClients), "Try again when some have finished");
        }
        ++jobs;
        holds = true;
      }
      const json answer = (this->*route->answer)(request);
      std::vector<int> fds;
      for (const auto& h : request.reply_fds) fds.push_back(h.get());
      channel.send(answer, fds);
    } catch (const nlohmann::json::exception& e) {
      // A field of the wrong type ({"brief":"yes"}): said without the JSON library's own prefix.
      refuse(Error("malformed request '" + op + "': " + detail::json_error_text(e), kProtocolHint));
    } catch (const std::exception& e) {
      refuse(e);
    }
    decide();  // a job now (counted in `jobs`), or refused
    if (request.then_stop) request_stop();
  }
  decide();
  if (holds) --jobs;
}

}  // namespace ortfleet
