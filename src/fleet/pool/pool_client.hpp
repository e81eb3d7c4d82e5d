#pragma once
// The client's side of a pool server (ortfleet/fleet/pool_server.hpp): reaching its socket, asking it,
// a Fleet opened on it, and a job's own workers handed over to the pool the job leaves behind.
#include <sys/un.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fleet/local/local_start.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

/// The socket address of `path`; throws ortfleet::Error when it is too long for one.
sockaddr_un pool_socket_address(const std::string& path);

/// What is at a pool socket's path, without asking anything of a server there.
enum class SocketFound {
  nothing,  ///< no file
  stale,    ///< a socket nobody listens on (its server is gone): a new server may replace it
  live,     ///< a socket somebody listens on (a pool server, or something else)
};
/// Throws ortfleet::Error when the path holds something that is not a socket (ortfleet never replaces
/// or removes it) or cannot be reached. `follow`: a client may reach a socket through a symbolic link;
/// a server replaces only a socket.
SocketFound look_at_socket(const std::string& path, bool follow);

/// A connection to the server at `path`, or an error that says why there is none and what to do.
UniqueFd connect_to_pool(const std::string& path);

/// One request to the server and its answer; a refusal (another user's pool), an error reply, or an
/// answer that is not an ortfleet pool's thrown as an error that says so.
Message ask_pool(MessageChannel& channel, const MessageKind& kind, nlohmann::json fields, double timeout_s,
                 const std::vector<int>& fds = {});

struct OpenedDevice {
  std::optional<Error> error;              ///< the device failed to start (the others go on)
  std::unique_ptr<WorkerChannel> channel;  ///< this client's own channel to the device's worker
  std::optional<WorkerReady> ready;
};

struct OpenedOnPool {
  std::unique_ptr<MessageChannel> connection;  ///< to the server, open while the fleet runs
  std::vector<OpenedDevice> devices;           ///< one per plan device, in order
};

/// Connects to the server at `socket_path` and opens the plan's model on each of its devices. Throws
/// ortfleet::Error when no server answers there or it refuses this client.
OpenedOnPool open_on_pool_server(const std::string& socket_path, const LocalStartPlan& plan, double timeout_s);

/// What a start finds on the default socket before it chooses how to start.
struct PoolProbe {
  enum class Kind { none, ours, unusable } kind = Kind::none;
  std::vector<std::string> devices;  ///< ours: the devices it serves
  std::string runtime_path;          ///< ours: the ONNX Runtime library its workers run
  std::string runtime_content;       ///< and what tells it from another (pool_runtime.hpp)
  bool left_by_job = false;          ///< ours: a pool a job's start left (not `ortfleet serve`)
  int pid = 0;                       ///< ours: the server's
  std::string why;                   ///< unusable: what is there instead ("another user's pool", ...)
};
/// Looks at `socket_path` and, where a server listens, asks its status within `timeout_s`.
PoolProbe probe_pool(const std::string& socket_path, double timeout_s);

/// Why the pool `probe` found may not serve a start whose `ort_library` setting is `ort_library` (with
/// ORTFLEET_ORT_LIB and ORTFLEET_ORT_ROOT, the runtime it names): its workers run another library, or
/// the named one cannot be used (a start without the pool says why); nothing when it may.
std::optional<std::string> pool_runtime_mismatch(const PoolProbe& probe, const std::string& ort_library);

/// Tells the pool server at `socket_path` that a job will use `devices` with `model` (issue 60): it
/// restores their parked workers now, while the job still starts. Waits only for the server's answer
/// (it does the restoring afterwards), at most `timeout_s`; throws nothing (a pool that is not there or
/// does not answer is the job's start's to report).
void restore_ahead_on_pool(const std::string& socket_path, const std::vector<Device>& devices, const std::string& model, double timeout_s);

/// A job's own worker and the model its session holds, to hand over to a pool.
struct HandedWorker {
  WorkerProcess* process = nullptr;
  std::string model;  ///< as the job named it
};
/// Waits at most `timeout_s` until nothing is at `socket_path` any more (a server that was asked to stop
/// removes its socket last); throws ortfleet::Error past it.
void await_socket_gone(const std::string& socket_path, double timeout_s);

/// Hands `workers` (their sessions released first) to the pool server at `socket_path`, which keeps
/// them and their resident sessions for later jobs: each one the server took is marked handed over
/// (this process no longer stops it). Returns how many it took; throws nothing (a worker it did not
/// take stops with the job, as it would have).
size_t hand_over_to_pool(const std::string& socket_path, const std::vector<HandedWorker>& workers, double timeout_s);

}  // namespace ortfleet::detail
