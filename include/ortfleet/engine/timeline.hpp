#pragma once
// The start-up timeline: every phase, per device, with its start and end on the machine's monotonic
// clock (CLOCK_MONOTONIC is shared by all processes, so worker processes' phases line up with the
// parent's). Exported as JSON and as a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev).
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ortfleet/base/clock.hpp"

namespace ortfleet {

/// Names of the start-up phases, shared by the library, the reports and the tests.
namespace phase {
inline constexpr const char* process_start = "process.start";      ///< exec until main() (dynamic loading)
inline constexpr const char* runtime_load = "runtime.load";        ///< dlopen libonnxruntime + API init
inline constexpr const char* ep_library_load = "ep.library.load";  ///< dlopen of the CUDA EP library
inline constexpr const char* ep_register = "ep.register";          ///< RegisterExecutionProviderLibrary + GetEpDevices
inline constexpr const char* cuda_init = "cuda.init";              ///< cuInit
inline constexpr const char* cuda_context = "cuda.context";        ///< primary context of one GPU
inline constexpr const char* model_read = "model.read";            ///< model bytes into memory
inline constexpr const char* session_create = "session.create";    ///< Ort::Session constructor
inline constexpr const char* warmup = "warmup";                    ///< first inference(s) on generated inputs
inline constexpr const char* cache_verify = "cache.verify";      ///< a new model cache entry loaded and run against the model
inline constexpr const char* shape_session = "shape.session";      ///< another ONNX Runtime session, for a new input shape
inline constexpr const char* buckets_learn = "buckets.learn";      ///< which output dims follow the padded input dims
inline constexpr const char* weights_upload = "weights.upload";    ///< the weights shape sessions share, onto the GPU once
inline constexpr const char* session_full = "session.full";        ///< a tiered start's full session, made and run once beside the quick one
inline constexpr const char* session_switch = "session.switch";    ///< the full session switched in (zero-length marker)
inline constexpr const char* libraries_prime = "libraries.prime";  ///< a warm worker's throwaway sessions: cuDNN, cuBLAS loaded
inline constexpr const char* worker_spawn = "worker.spawn";        ///< a worker process until it answers
inline constexpr const char* setup = "setup";                      ///< main() until the first phase: arguments, config, devices
inline constexpr const char* pool_request = "pool.request";        ///< a start asked of a warm pool: connecting, the pool's worker, the reply
inline constexpr const char* ready = "ready";                      ///< device ready (zero-length marker)
}  // namespace phase

struct TimelineEvent {
  std::string name;   ///< the phase: "runtime.load", "cuda.context", "session.create", "warmup", ...
  std::string lane;   ///< whose phase: "process", "cuda:0", "cpu", ...
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int pid = 0;
  std::map<std::string, std::string> args;  ///< details: bytes, path, error, ...
  double duration_ms() const { return static_cast<double>(end_ns - start_ns) / 1e6; }
};

class Timeline {
 public:
  /// `origin_ns` is time zero in exports; by default the moment the timeline is made.
  explicit Timeline(int64_t origin_ns = monotonic_ns());
  Timeline(const Timeline& other);
  Timeline& operator=(const Timeline& other);

  int64_t origin_ns() const { return origin_ns_; }
  void set_origin_ns(int64_t origin_ns) { origin_ns_ = origin_ns; }

  void add(TimelineEvent event);
  void add_all(const std::vector<TimelineEvent>& events);
  std::vector<TimelineEvent> events() const;  ///< sorted by start

  /// Records a phase from construction to destruction (or finish()).
  class Scope {
   public:
    Scope(Timeline* timeline, std::string name, std::string lane);
    Scope(Scope&& other) noexcept;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope();
    void arg(const std::string& key, const std::string& value) { event_.args[key] = value; }
    void finish();

   private:
    Timeline* timeline_;
    TimelineEvent event_;
  };
  Scope scope(std::string name, std::string lane) { return Scope(this, std::move(name), std::move(lane)); }

  /// The span from the earliest start to the latest end of events whose lane matches (all if empty).
  double span_ms(const std::string& lane = {}) const;
  /// Sum of durations per phase name, for events of `lane` (all lanes if empty).
  std::map<std::string, double> phase_totals_ms(const std::string& lane = {}) const;

  std::string to_json() const;
  static Timeline from_json(const std::string& text);  ///< throws ortfleet::Error on malformed input
  std::string to_chrome_trace() const;

 private:
  mutable std::mutex mutex_;
  int64_t origin_ns_;
  std::vector<TimelineEvent> events_;
};

}  // namespace ortfleet
