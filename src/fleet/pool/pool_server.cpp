// PoolServer (ortfleet/fleet/pool_server.hpp): made on its socket, serving it, and its idle work.
#include "ortfleet/fleet/pool_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "base/private_dir.hpp"
#include "fleet/pool/pool_client.hpp"
#include "fleet/pool/pool_daemon.hpp"
#include "fleet/pool/pool_preload.hpp"
#include "fleet/pool/pool_runtime.hpp"
#include "fleet/pool/pool_start.hpp"
#include "fleet/pool/pool_server_impl.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
/// Connections at once, each a thread of the server: one past this is closed at once.
constexpr size_t kMaxConnections = 512;
/// How long the workers of a pool told to stop get between SIGTERM and SIGKILL: `pool stop` and SIGTERM
/// end the pool within a few seconds whatever its workers are doing.
constexpr double kStopGraceS = 2;
/// How long a parking worker's submitted GPU work may take before it is left unparked.
constexpr double kParkLockTimeoutS = 10;
/// How often idle work is tried again in one idle spell, for workers that became ready since.
constexpr double kIdleRetryS = 5;
}  // namespace

void check_pool_client(unsigned client_uid, unsigned server_uid, const std::string& socket_path) {
  if (client_uid == server_uid) return;
  throw Error(fmt::format("the pool server on {} serves only its own user (uid {}); this client runs as uid {}", socket_path,
                          server_uid, client_uid),
              "Start your own pool: ortfleet serve --socket PATH (or let a start of yours leave one)");
}

namespace {
/// Where a server on `socket_path` says what it does, for its clients to point at: a daemon's stderr is
/// its log beside the socket (pool_daemon.cpp); anything else is the output of whoever runs it.
std::string where_messages_go(const std::string& socket_path) {
  const std::string log = detail::pool_log_path(socket_path);
  struct stat err {}, file {};
  if (::fstat(STDERR_FILENO, &err) == 0 && ::stat(log.c_str(), &file) == 0 && err.st_dev == file.st_dev && err.st_ino == file.st_ino) {
    return "the pool's log " + log;
  }
  return fmt::format("the output of the pool server (pid {}, ortfleet serve)", ::getpid());
}
}  // namespace

void PoolServer::Impl::remove_own_socket() const {
  struct stat st {};
  if (socket_ino == 0 || ::lstat(options.socket_path.c_str(), &st) != 0) return;
  if (S_ISSOCK(st.st_mode) && st.st_dev == socket_dev && st.st_ino == socket_ino) ::unlink(options.socket_path.c_str());
}

void PoolServer::Impl::request_stop() {
  if (stopping.exchange(true)) return;
  const char byte = 1;
  [[maybe_unused]] const auto written = ::write(wake[1], &byte, 1);
}

void PoolServer::Impl::reap_client_threads() {
  for (auto it = client_threads.begin(); it != client_threads.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    it = client_threads.erase(it);
  }
}

// --- work no client waits for ------------------------------------------------------------------------------

std::shared_ptr<detail::BackgroundFill> PoolServer::Impl::fill_in_background(const detail::LocalStartPlan& plan, const Device& device) {
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

size_t PoolServer::Impl::reap_fills() {
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

// --- idle time -------------------------------------------------------------------------------------------------

double PoolServer::Impl::idle_s() const { return static_cast<double>(monotonic_ns() - busy_until_ns.load()) / 1e9; }

void PoolServer::Impl::idle_work(bool is_busy) {
  if (restored_ahead.exchange(false) || is_busy) {
    last_fold_ns = last_park_ns = 0;  // the next idle spell folds and parks anew
    return;
  }
  if (idle_work_now) return;
  const auto due = [this](double after_s, int64_t last_ns) {
    if (!(after_s > 0) || idle_s() < after_s) return false;
    return last_ns == 0 || static_cast<double>(monotonic_ns() - last_ns) / 1e9 >= std::max(after_s, kIdleRetryS);
  };
  const bool park = due(options.park_after_s, last_park_ns);
  // Folding in does not wait for parking: with parking off, a device still comes back to two workers.
  const bool fold = park || due(options.fold_after_s, last_fold_ns);
  if (!fold) return;
  last_fold_ns = monotonic_ns();
  if (park) last_park_ns = last_fold_ns;
  if (idle_worker.joinable()) idle_worker.join();
  idle_work_now = true;
  idle_worker = std::thread([this, park] {
    // What jobs left on spare and extra workers joins the shared worker first: an idle device keeps
    // (and parks) at most two workers.
    if (const size_t ended = pool->consolidate(); ended > 0) spdlog::info("idle: {} extra worker(s) folded into the shared ones", ended);
    // A job's session handed over was made from the model: made again from its cache entry (made
    // meanwhile) it holds less, parked or not.
    if (const size_t remade = pool->remake_from_cache_entries(); remade > 0) spdlog::info("idle: {} session(s) made again from their model cache entries", remade);
    remember_resident();
    // Folding took seconds, perhaps: a job that arrived meanwhile keeps every worker unparked, and one
    // that arrives while they park has its worker restored first (WorkerPool::park_workers).
    if (park && !busy()) {
      // A restore ahead of a job (answer_restore_ahead) counts as use: nothing parks until the pool has
      // been idle for its park time again.
      const ParkOutcome done = pool->park_workers(kParkLockTimeoutS, [this] { return !busy() && idle_s() >= options.park_after_s; });
      if (done.parked > 0) {
        spdlog::info("idle for {:g} s: parked {} worker(s) in {:.0f} ms (their GPU memory released; restored on the next job's request)",
                     options.park_after_s, done.parked, done.wall_ms);
      }
      for (const auto& kept : done.kept) spdlog::info("not parked: {}", kept);
    }
    idle_work_now = false;
  });
}

void PoolServer::Impl::remember_resident() {
  if (!served) return;
  for (const auto& r : pool->resident_plans()) {
    try {
      detail::LocalStartPlan plan = detail::plan_from_json(json::parse(r.plan_json));
      plan.devices = {r.device};
      served->note(plan, /*only_if_new=*/true, r.idle_s);
    } catch (const std::exception& e) {
      spdlog::debug("a resident session's plan is not remembered: {}", e.what());
    }
  }
  if (const std::string failed = served->save(); !failed.empty()) spdlog::warn("the models this daemon served are not remembered: {}", failed);
}

void PoolServer::Impl::preload_at_start() {
  std::vector<std::string> left_out;
  std::vector<detail::ServedModel> remembered;
  if (served) remembered = served->load();
  const std::vector<detail::PreloadItem> items =
      detail::preload_items(options.preload, pool->devices(), options.pool.config, remembered, left_out);
  detail::PreloadChoice choice = detail::choose_preload(items, detail::preload_budget(options.preload));
  left_out.insert(left_out.end(), choice.left_out.begin(), choice.left_out.end());
  for (const auto& line : left_out) spdlog::info("not made resident at start: {}", line);
  {
    std::lock_guard lock(preload_mutex);
    preload_report = {{"state", choice.chosen.empty() ? "done" : "making"}, {"chosen", choice.chosen.size()}, {"made", 0}, {"left_out", left_out},
                      {"failed", json::array()}};
  }
  // One device after another would add their times: each device's models are made on a thread of
  // its own, one after another there (a worker makes one session at a time anyway).
  std::map<std::string, std::vector<const detail::PreloadItem*>> by_device;
  for (const auto& i : choice.chosen) by_device[i.device.to_string()].push_back(&i);
  std::vector<std::thread> devices;
  for (auto& [device, list] : by_device) {
    devices.emplace_back([this, list = list] {
      for (const detail::PreloadItem* i : list) {
        if (stopping) return;
        const int64_t start = monotonic_ns();
        try {
          // Made as a job's start makes it, then let go (the channel closes): resident, proven, and
          // parked with the pool once it is idle.
          const detail::PoolDeviceStart made = detail::start_on_pool(*pool, i->plan, options.pool.start_timeout_s);
          // Made from the model (no entry yet): its entry is made in the background, and the session
          // made again from it once the pool is idle (it holds less).
          const json& status = made.ready.value("status", json::object());
          if (status.is_object() && !status.value("resident", false) && detail::text_field(status, "model_cache") == "miss") fill_in_background(i->plan, i->device);
          spdlog::info("{}: made {} resident ({}) in {:.0f} ms", i->device.to_string(), i->model, detail::to_string(i->source),
                       static_cast<double>(monotonic_ns() - start) / 1e6);
          std::lock_guard lock(preload_mutex);
          preloaded.insert(i->device.to_string() + "|" + i->model);
          preload_report["made"] = preload_report.value("made", 0) + 1;
        } catch (const std::exception& e) {
          if (stopping) return;  // its worker ended with the pool
          spdlog::warn("{}: {} was not made resident ({}): {}", i->device.to_string(), i->model, detail::to_string(i->source), Error::from(e).what());
          std::lock_guard lock(preload_mutex);
          preload_report["failed"].push_back(fmt::format("{} on {}: {}", i->model, i->device.to_string(), Error::from(e).what_failed()));
        }
      }
    });
  }
  for (auto& t : devices) t.join();
  std::lock_guard lock(preload_mutex);
  preload_report["state"] = "done";
}

json PoolServer::Impl::status(bool brief) {
  const json runtime = {{"path", pool->options().ort_library}, {"content", runtime_content}};
  if (brief) {
    json devices = json::array();
    for (const auto& d : pool->devices()) devices.push_back({{"device", d.to_string()}});
    return detail::answer_to(detail::message::status, {{"ortfleet_pool", 1}, {"devices", devices}, {"socket", options.socket_path},
                                                       {"pid", ::getpid()}, {"runtime", runtime}, {"left_by_job", options.left_by_job}});
  }
  json j = json::parse(pool->status_json());
  j["socket"] = options.socket_path;
  j["pid"] = ::getpid();
  j["runtime"] = runtime;
  j["left_by_job"] = options.left_by_job;
  j["clients"] = std::max(0, clients.load() - 1);  // the one asking is not counted
  j["jobs"] = jobs.load();
  j["idle_exit_s"] = options.idle_exit_s;
  j["idle_s"] = busy() ? 0.0 : idle_s();
  j["park_after_s"] = options.park_after_s;
  j["fold_after_s"] = options.fold_after_s;
  j["parking"] = detail::to_json(detail::parking_status(pool->devices(), options.park_after_s));
  j["slurm_job"] = job ? job->job_id() : std::string();
  json making = json::array();
  {
    std::lock_guard lock(background_mutex);
    for (const auto& f : fills) making.push_back(f->model());
  }
  j["cache_fills"] = making;
  {
    // Which sessions this daemon made resident as it started (before any job asked).
    std::lock_guard lock(preload_mutex);
    j["preload"] = preload_report;
    for (auto& d : j.at("devices")) {
      for (auto& session : d["sessions"]) {
        session["preloaded"] = preloaded.count(d.value("device", "") + "|" + session.value("model", "")) != 0;
      }
    }
  }
  j["event"] = detail::message::status.answer;
  return j;
}

// --- the server ------------------------------------------------------------------------------------------------

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
  s.messages_at = where_messages_go(s.options.socket_path);
  try {
    s.pool = std::make_unique<WorkerPool>(s.options.pool);
  } catch (...) {
    s.remove_own_socket();
    throw;
  }
  try {
    s.runtime_content = detail::runtime_content(s.pool->options().ort_library);
  } catch (const Error& e) {
    // Its workers say why they cannot load it; a start that names a runtime is then not served here.
    spdlog::warn("the workers' ONNX Runtime {} cannot be read: {}", s.pool->options().ort_library, e.what());
  }
  s.busy_until_ns = monotonic_ns();
  if (s.options.left_by_job) {
    s.options.preload = PreloadOptions{};  // a job's pool makes and remembers nothing
    s.options.preload.remember = false;
  }
  if (s.options.preload.remember) {
    s.served = std::make_unique<detail::ServedModels>(
        s.options.preload.state_dir.empty() ? detail::ServedModels::default_folder(s.options.socket_path) : s.options.preload.state_dir);
    if (s.served->folder().empty()) spdlog::info("the models this daemon serves are not remembered: no folder for its state (set ORTFLEET_CACHE)");
  }
  s.preloading = true;  // counted as use until it is done: nothing parks or exits meanwhile
  s.preloader = std::thread([&s] {
    try {
      s.preload_at_start();
    } catch (const std::exception& e) {
      spdlog::warn("nothing was made resident at start: {}", e.what());
    }
    s.busy_until_ns = monotonic_ns();
    s.preloading = false;
  });
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
  if (s.idle_worker.joinable()) s.idle_worker.join();
  if (s.preloader.joinable()) s.preloader.join();  // its starts failed with the workers
  if (const std::string failed = s.served ? s.served->save() : ""; !failed.empty()) spdlog::warn("the models this daemon served are not remembered: {}", failed);
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
    s.idle_work(busy);
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
      spdlog::warn("closed a connection at once: {} are open already (those that hold nothing close after a few seconds of silence)", kMaxConnections);
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
