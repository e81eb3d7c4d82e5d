#pragma once
// `ortfleet serve`: a node-local daemon that keeps a warm worker pool (worker_pool.hpp) across jobs.
// Clients attach through a Unix socket that only its user may use (the socket is mode 0600 in a 0700
// folder, and the server refuses a client of another user by its credentials). A client's open
// request names a model, devices and settings; per device the server starts the session on its warm
// worker, or finds it resident, and hands the client a channel of its own to that worker: runs go
// straight to the worker, never through the server.
#include <memory>
#include <string>

#include "ortfleet/fleet/worker_pool.hpp"

namespace ortfleet {

/// $XDG_RUNTIME_DIR/ortfleet/pool.sock, or /tmp/ortfleet-<uid>/pool.sock without XDG_RUNTIME_DIR.
std::string default_pool_socket();

struct ServeOptions {
  PoolOptions pool;
  std::string socket_path;  ///< empty: default_pool_socket()
};

class PoolServer {
 public:
  /// Starts the pool and listens on the socket. Throws ortfleet::Error when another server listens
  /// there already, or the folder is not private.
  explicit PoolServer(ServeOptions options);
  ~PoolServer();  ///< stops serving, removes the socket, stops the workers
  PoolServer(const PoolServer&) = delete;
  PoolServer& operator=(const PoolServer&) = delete;

  const std::string& socket_path() const;
  WorkerPool& pool();
  /// Serves clients until stop(); restarts workers that die meanwhile.
  void serve();
  /// Makes serve() return (from any thread). Clients attached to workers keep their channels until
  /// the pool stops.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The pool server's status: {"ortfleet_pool": 1, "socket", "pid", "clients", "devices": [{device,
/// state, pid, sessions, memory_bytes, ...}]}. Throws ortfleet::Error when no server answers.
std::string pool_status(const std::string& socket_path, double timeout_s = 30);
/// Has the server drop every session nobody holds; how many it dropped.
size_t pool_evict(const std::string& socket_path, double timeout_s = 60);

/// Whether a client of user `client_uid` may use the pool of user `server_uid`; throws
/// ortfleet::Error saying who may when not.
void check_pool_client(unsigned client_uid, unsigned server_uid, const std::string& socket_path);

}  // namespace ortfleet
