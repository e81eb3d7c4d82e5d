#pragma once
// PoolServer's inside (ortfleet/fleet/pool_server.hpp): pool_server.cpp makes it, serves the socket and
// does the idle work (folding in, parking, exit); pool_server_requests.cpp answers each client's requests
// through the server's dispatch table (pool_protocol.hpp).
#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/slurm.hpp"
#include "base/unique_fd.hpp"
#include "engine/cache/file_lock.hpp"
#include "fleet/pool/served_models.hpp"
#include "fleet/worker/cache_fill.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "process/ipc.hpp"

namespace ortfleet {

struct PoolServer::Impl {
  ServeOptions options;
  std::unique_ptr<WorkerPool> pool;
  std::string runtime_content;  // what tells the workers' ONNX Runtime from another library (pool_runtime.hpp)
  std::string messages_at;      // where this server's messages go, in words: "the pool's log PATH" (a daemon's), else its output
  detail::UniqueFd listener;
  int wake[2] = {-1, -1};  // stop() writes here to end serve()'s poll
  std::atomic<bool> stopping{false};
  detail::FileLock server_lock;  // held while this server lives: one server per socket
  dev_t socket_dev = 0;          // the socket this server bound: removed at the end only while it is still there
  ino_t socket_ino = 0;
  std::optional<detail::SlurmJobWatch> job;  // the Slurm job it ends with

  /// Removes the socket this server made, and nothing that has taken its place since.
  void remove_own_socket() const;
  void request_stop();

  // --- clients: one thread each (pool_server_requests.cpp) ---
  std::mutex clients_mutex;
  struct ClientThread {
    std::thread thread;
    detail::UniqueFd socket;  // shut down at stop so that the thread ends; closed, under clients_mutex, when it ends
    bool done = false;        // clients_mutex
  };
  std::list<ClientThread> client_threads;  // clients_mutex
  std::atomic<int> clients{0};    // connections accepted and not yet closed (counted at accept: `status` sees every one before it)
  std::atomic<int> jobs{0};       // of them, those holding sessions or handed-over workers
  std::atomic<int> undecided{0};  // of them, those that have not said what they want yet (a job's open may be on its way)
  /// Joins the threads of clients that have gone (a server may see thousands of jobs). clients_mutex held.
  void reap_client_threads();
  /// Serves one client until it goes away. Whatever it sends, the answer goes to it alone: a malformed
  /// or failing request is refused and the server goes on serving it and everyone else.
  void serve_client(detail::UniqueFd fd);

  /// One client's request and its connection: what a row of the dispatch table answers. An answer may
  /// add descriptors to its reply, and ask the server to stop once the reply has been sent.
  struct Request {
    detail::MessageChannel& channel;
    detail::Message& message;
    const ucred& peer;
    std::vector<detail::UniqueFd> reply_fds = {};
    bool then_stop = false;
  };
  /// A row of the dispatch table: a request, its answer, and whether it makes its connection a job's (it
  /// opens a model or hands workers over, counted in `jobs`) rather than one that only asks.
  struct Route {
    const detail::MessageKind* kind;
    nlohmann::json (Impl::*answer)(Request&);
    bool makes_a_job;
  };
  /// The row of request `op`; null for one the server does not know.
  static const Route* route_of(const std::string& op);
  nlohmann::json answer_status(Request& r);
  nlohmann::json answer_evict(Request& r);
  nlohmann::json answer_stop(Request& r);
  nlohmann::json answer_open(Request& r);
  nlohmann::json answer_hand_over(Request& r);
  nlohmann::json answer_worker_killed(Request& r);
  nlohmann::json answer_restore_ahead(Request& r);
  /// The pool's status; `brief`: only what a start asks before it uses the pool (its devices and runtime,
  /// that it is ortfleet's), without asking any worker or reading their memory.
  nlohmann::json status(bool brief);

  // --- work no client waits for: cache entries made in the background ---
  std::mutex background_mutex;
  std::list<std::shared_ptr<detail::BackgroundFill>> fills;  // background_mutex
  /// Makes the cache entry of `plan`'s model on `device` in a background worker, unless one for this
  /// model is being made already.
  std::shared_ptr<detail::BackgroundFill> fill_in_background(const detail::LocalStartPlan& plan, const Device& device);
  /// Fills that finished: their outcome logged, their worker gone. How many are still working.
  size_t reap_fills();

  // --- a node daemon's models, resident before any job asks (issue 60; pool_preload.hpp) ---
  std::unique_ptr<detail::ServedModels> served;  // what it serves, remembered across its restarts; null: remembers nothing
  std::thread preloader;                 // makes the chosen models resident as the daemon starts
  std::atomic<bool> preloading{false};   // counts as use: nothing parks meanwhile
  std::mutex preload_mutex;
  std::set<std::string> preloaded;       // preload_mutex; "device|model" of each session made at start
  nlohmann::json preload_report = nlohmann::json::object();  // preload_mutex; what `pool status` says of it
  /// Chooses what to make resident (named, served before, the cache's) within the budget and makes each
  /// on its device, one after another per device; on the preloader thread.
  void preload_at_start();
  /// The sessions the workers hold now, noted as served (a job's worker handed over says its plan only
  /// to the pool), and the memory saved.
  void remember_resident();

  // --- idle time: folding in, parking, exit ---
  /// Whether anything goes on that the idle timers must not count: a job attached (or a connection that
  /// may be one: it has not said what it wants yet), a cache entry in the making. A connection that only
  /// asks (status, evict, stop) is no use of the pool: `watch ortfleet pool status` never keeps it from
  /// parking or exiting.
  bool busy() { return jobs.load() > 0 || undecided.load() > 0 || preloading.load() || reap_fills() > 0; }
  std::atomic<int64_t> busy_until_ns{0};  // last seen busy (or started), on the monotonic clock
  std::atomic<bool> restored_ahead{false};  // a job's client said it comes: the idle timers start anew, as for a job
  double idle_s() const;
  std::thread idle_worker;           // folds in and parks, off the accept loop
  std::atomic<bool> idle_work_now{false};
  int64_t last_fold_ns = 0;          // serve()'s thread only
  int64_t last_park_ns = 0;
  /// While nobody uses the pool: what jobs left folds into the shared workers (after fold_after_s, or
  /// before parking), then (after park_after_s) every worker that can parks; tried again now and then,
  /// for workers that became ready since (a spare replaced, a restarted worker).
  void idle_work(bool is_busy);

};

}  // namespace ortfleet
