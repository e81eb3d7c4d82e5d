#pragma once
// The worker protocol: what a worker's parent (fleet/worker/worker_channel.hpp) and the worker's server
// (fleet/worker/worker_server.hpp) say to each other. JSON messages, answered in order on each channel:
//   {"op":"init", plan, prime}          -> {"event":"initialised", timeline}   runtime, EP, cuInit, context,
//                                                                             (prime) cuDNN and cuBLAS
//   {"op":"start", plan}                -> {"event":"ready", session, status (resident or not), ...}
//   {"op":"run", session, inputs} + fd  -> {"event":"outputs", outputs} + fd   (shared memory both ways)
//   {"op":"release", session}           -> {"event":"released"}
//   {"op":"attach", hold} + fd          -> {"event":"attached"}   a new channel (a pool server's client)
//   {"op":"evict", model}               -> {"event":"evicted", count}   sessions nobody holds (model: only those
//                                          its first start named so, the old content of a rewritten file)
//   {"op":"status", with_plans}         -> {"event":"status", sessions}   (with_plans: each session's plan too)
//   {"op":"trim"}                       -> {"event":"trimmed", ...}   memory no session needs handed back, before
//                                          the pool parks the worker (what it did: worker_server.cpp)
//   {"op":"stop"}                       -> {"event":"stopping"}, and the worker exits (control channel only)
//   {"op":"ring"} + fd                  -> {"event":"ring"}   a request ring for this channel's runs
//   {"op":"adopt"} + fd                 -> {"event":"adopted"}   a pool takes over this worker from the job
//                                          that spawned it (control channel only): its output goes to fd,
//                                          it leaves the job's session, and drops the job's ring and holds
// Any request may be answered {"event":"failed", error} instead. (A pool server's own requests, in the
// same words: fleet/pool/pool_protocol.hpp.)
// Once a channel has a request ring (sent before its first run, and again, bigger, when a run does
// not fit), its runs go through the ring (fleet/worker/worker_ring.hpp), not through "run" messages.
#include <nlohmann/json.hpp>
#include <string>

namespace ortfleet::detail {

/// One kind of request: its "op" and the "event" of the reply when it went well.
struct MessageKind {
  const char* op;
  const char* answer;
};

/// The table of message kinds: every request either side sends, and its answer.
namespace message {
inline constexpr MessageKind init{"init", "initialised"};
inline constexpr MessageKind start{"start", "ready"};
inline constexpr MessageKind run{"run", "outputs"};
inline constexpr MessageKind release{"release", "released"};
inline constexpr MessageKind attach{"attach", "attached"};
inline constexpr MessageKind evict{"evict", "evicted"};
inline constexpr MessageKind status{"status", "status"};
inline constexpr MessageKind stop{"stop", "stopping"};
inline constexpr MessageKind ring{"ring", "ring"};
inline constexpr MessageKind adopt{"adopt", "adopted"};
inline constexpr MessageKind trim{"trim", "trimmed"};
/// The event of a reply to any request that failed: {"event":"failed", error}.
inline constexpr const char* kFailed = "failed";
}  // namespace message

/// A request of `kind` with `fields` (an object, or null for none).
inline nlohmann::json request_of(const MessageKind& kind, nlohmann::json fields = nullptr) {
  if (fields.is_null()) fields = nlohmann::json::object();
  fields["op"] = kind.op;
  return fields;
}

/// The answer to a request of `kind` with `fields` (an object, or null for none).
inline nlohmann::json answer_to(const MessageKind& kind, nlohmann::json fields = nullptr) {
  if (fields.is_null()) fields = nlohmann::json::object();
  fields["event"] = kind.answer;
  return fields;
}

/// A message's string field `name`, or `missing` when it has none or it is not a string: what a
/// process reads of a peer's message never throws, whatever the peer sent.
inline std::string text_field(const nlohmann::json& message, const char* name, const char* missing = "") {
  if (!message.is_object()) return missing;
  const auto it = message.find(name);
  return it != message.end() && it->is_string() ? it->get<std::string>() : std::string(missing);
}

/// The request's kind name ("op"), or `missing` when it has none.
inline std::string op_of(const nlohmann::json& request, const char* missing = "") { return text_field(request, "op", missing); }

/// The reply's event ("ready", "failed", ...), or "" when it has none.
inline std::string event_of(const nlohmann::json& reply) { return text_field(reply, "event"); }

/// True when `request` is a request of `kind`.
inline bool is_request(const std::string& op, const MessageKind& kind) { return op == kind.op; }

/// The worker executable's command line, as the parent spawns it (worker_channel.cpp) and its main reads
/// it (tools/ortfleet/worker_main.cpp): "--channel-fd=3 --device=cuda:1", and "--narrowed" when it sees
/// only its own GPU.
inline constexpr const char* kWorkerChannelFdArgument = "--channel-fd=";
inline constexpr const char* kWorkerDeviceArgument = "--device=";
inline constexpr const char* kWorkerNarrowedArgument = "--narrowed";

/// The descriptor the worker's channel arrives on.
inline constexpr int kWorkerChannelFd = 3;
/// Where a worker writes the line of a crash inside ONNX Runtime (base/crash_report.hpp), so that
/// the parent's error says why the worker died instead of pointing at its stderr.
inline constexpr int kWorkerCrashFd = 4;

// The environment a parent sets in its workers, and what tests and measurements set in them, is in the
// registry of ortfleet's variables (base/environment.hpp: EnvVar::worker_*, park_trim, crash_fd, spawn_ns).

}  // namespace ortfleet::detail
