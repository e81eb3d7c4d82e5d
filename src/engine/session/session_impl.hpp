#pragma once
// Session::Impl, the state one Session keeps, and its ShapeSessions: what session.cpp and the
// session_*.cpp files beside it share (the room's README.md says which file does what).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <thread>
#include <utility>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/cache/cache_use.hpp"
#include "engine/cuda/shared_weights.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/files/model_view.hpp"
#include "engine/providers/provider_registry.hpp"
#include "engine/runtime/ort_api.hpp"
#include "engine/session/bucketed_calls.hpp"
#include "engine/session/host_buffer_pool.hpp"
#include "engine/session/warmup_inputs.hpp"
#include "engine/shapes/buckets.hpp"
#include "engine/shapes/shape_policy.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"

namespace ortfleet {

/// Milliseconds since `start` (steady clock).
inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// One ONNX Runtime session of a Session, serving one input-shape signature.
struct ShapeSession {
  std::string signature;  // to_string(InputShapes); "" until its first call binds it
  bool declared = false;
  bool first = false;     // made with the Session, before any shape was known
  Ort::Session session{nullptr};
  uint64_t last_used = 0;
  std::string last_signature;  // of its latest call (the shared session serves several)
  std::atomic<int64_t> calls{0};
  std::once_flag primed;
  double create_ms = 0;
  uint64_t memory_before = 0;  // memory in use before it was made; its cost is measured after its first call
  uint64_t memory_bytes = 0;
  // A captured CUDA graph replays fixed device addresses: the inputs it reads and the outputs it
  // writes stay allocated, at the same place, for the ONNX Runtime session's life, and replays take
  // turns on them.
  std::mutex graph_mutex;
  std::vector<Tensor> graph_inputs;
  std::vector<Ort::Value> graph_outputs;  // filled by the first run, before ONNX Runtime captures
};

struct Session::Impl {
  SessionSpec spec;
  Timeline* timeline = nullptr;
  std::string lane;
  std::unique_ptr<detail::MappedFile> mapping;
  std::string weights_view;  // the model's graph with its weights left in its file (engine/files/model_view.hpp), while sessions load it
  std::string view_layout;   // the model's layout (model_layout()), read with the view
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  ProviderAttachment provider;
  // What a crash inside ONNX Runtime prints (base/crash_report.hpp), made once per session.
  std::string crash_creating;
  std::string crash_first_run;
  std::string crash_run;
  std::string crash_record;  // where a crash is remembered (engine/crash_records.hpp)
  bool used_cache = false;
  std::string cache_outcome = "off";
  std::string cache_note;
  std::string cache_entry;
  double create_ms = 0;       // the first ONNX Runtime session's creation, cache lookup included
  double first_run_ms = 0;    // the first warm-up run: with create_ms, what a new session costs
  std::shared_ptr<void> device_hold;  // the device made ready (a GPU's context), held while the sessions live
  uint64_t memory_at_start = 0;  // in use when creation began, the context already made
  std::map<std::string, ValueRange> model_ranges;  // recorded in the model's metadata (ortfleet.input_range.NAME)
  std::unique_ptr<detail::WarmupInputSource> warmup_source;  // what warm-up (and the cache's check) feeds the model
  std::vector<InputShapes> declared;     // resolved config.shapes, bucket shapes included
  std::set<std::string> declared_signatures;
  detail::BucketPlan buckets;            // config.shapes.buckets (and pad_batch) resolved
  std::once_flag buckets_learned;
  std::string costs_entry;               // the cache entry the shape costs are kept beside ("" without the cache)
  bool costs_writable = true;            // false beside an entry of the read-only shared layer
  std::optional<detail::ShapeCosts> costs;  // measured at the model's first start (GPU, measured policy)
  detail::ShapeTraffic traffic;          // calls of shapes nothing was declared for
  // Calls padded to a bucket: their buffers and costs (made once the spec is known).
  std::unique_ptr<detail::BucketedCalls> bucketed;
  // Host memory for a CUDA graph's outputs, recycled: a fresh buffer's page faults cost more than the copy.
  detail::HostBufferPool host_outputs;
  // What shape sessions after the first load: the optimised cache entry once there is one (graph
  // optimisation off, weights mapped), else the model file.
  std::string later_source;
  bool later_source_optimised = false;

  std::shared_ptr<ShapeSession> profiled;  // the session whose profile end_profiling() ends, when profiling

  // A tiered start (session_tiers.cpp): the first session made quickly, the full one beside it.
  bool tiered = false;
  SessionTier tier;                       // guarded by `mutex`
  std::condition_variable tier_changed;   // with `mutex`: the full session switched in or refused
  std::once_flag full_started;
  std::thread full_maker;
  std::atomic<bool> stopping{false};
  std::mutex full_run_mutex;              // guards full_run_options
  /// Holds the job's calls while the full session's first run searches cuDNN's kernels (session_tiers.cpp).
  class TierGate {
   public:
    /// A call under way: the gate cannot close until it ends.
    class Pass {
     public:
      explicit Pass(TierGate* gate) : gate_(gate) {}
      Pass(Pass&& other) noexcept : gate_(std::exchange(other.gate_, nullptr)) {}
      Pass(const Pass&) = delete;
      Pass& operator=(const Pass&) = delete;
      Pass& operator=(Pass&&) = delete;
      ~Pass();

     private:
      TierGate* gate_;
    };
    /// Waits while the gate is closed; a gate that was never closed (no tiered start) costs a lock.
    Pass enter();
    /// New calls wait; returns once the calls under way have ended.
    void close();
    void open();

   private:
    std::mutex m_;
    std::condition_variable changed_;
    int active_ = 0;
    bool closed_ = false;
  };
  TierGate tier_gate;
  std::atomic<bool> tier_settled{false};  // switched or refused: calls no longer pass the gate
  Ort::RunOptions full_run_options{nullptr};  // the full session's first run (made with it): terminated when the Session goes
  /// Whether this start is tiered: a first start (no entry) on a GPU of a model the setting names,
  /// nothing declared beyond one shape, the device holding `weight_bytes` twice.
  /// `view_bytes`: the weights' size where the model's view knows it; else read from the model, only if asked.
  bool tiers_apply(const detail::CacheUse& cache, std::optional<uint64_t> view_bytes) const;
  /// The config the quick session is made with: cuDNN's cheapest convolution search.
  RunConfig quick_config() const;
  /// After the quick session's warm-up: makes the full session on a thread of its own.
  void begin_full_session();
  void make_full_session();
  /// Stops a full session in the making (its first run terminated) and waits for its thread.
  void stop_full_session();
  // One copy of the weights on the GPU for the shape sessions after the first; declared before
  // `sessions`, so that they outlive every session using them.
  std::unique_ptr<detail::SharedWeights> shared_weights;
  mutable std::mutex mutex;  // guards `sessions` and `clock`
  std::mutex create_mutex;   // one new ONNX Runtime session at a time
  std::vector<std::shared_ptr<ShapeSession>> sessions;
  uint64_t clock = 0;

  /// The model's view (its graph, its weights left in its file) and its layout, from the caller's bytes
  /// or a mapping; nullopt (the model loaded as it is) where the file cannot be read so.
  std::optional<detail::ModelView> view_model();
  /// On a device with memory of its own, uploads the `bytes` of weights the view left in the model's file
  /// (in large copies) for ONNX Runtime to use in place of its own upload: only where the device holds
  /// them twice (the weights ONNX Runtime's optimisations make anew, it uploads beside them).
  void upload_model_weights(Ort::SessionOptions& so, uint64_t bytes);

  std::optional<Timeline::Scope> phase(const char* name) {
    if (timeline == nullptr) return std::nullopt;
    return timeline->scope(name, lane);
  }

  /// The execution providers this session's device attaches, as its config stacks them (made with the Session).
  std::optional<detail::ProviderStack> stack;
  const detail::ProviderStack& ep() const { return *stack; }
  /// ONNX Runtime's description of the device's own memory, for tensors bound in place.
  Ort::MemoryInfo ort_device_memory() const { return detail::device_memory(spec.device).ort_memory(spec.device); }
  bool graph_mode() const { return ep().offers(detail::Capability::graph_capture) && spec.config.cuda.cuda_graph; }
  int max_sessions() const { return std::max({1, spec.config.shapes.max_sessions, static_cast<int>(declared.size())}); }
  /// Runs `given` on `s`, timed: milliseconds.
  double timed_run(ShapeSession& s, const std::vector<Tensor>& given) {
    const auto start = std::chrono::steady_clock::now();
    run_on(s, given);
    return ms_since(start);
  }
  /// Learns how outputs follow the buckets, checks that padding keeps the outputs, and makes the
  /// buffers padded calls go through.
  void learn_buckets();
  /// Runs `given` (of `shape`) unpadded, outputs on the host: on the shape's own session when it has one.
  using RunShape = std::function<std::vector<Tensor>(const InputShapes& shape, const std::vector<Tensor>& given)>;
  /// For each padded dim, a call padded to a bucket and cropped back against the same call unpadded
  /// (BucketPlan::padding_probes from `base_shape`), on the warm-up inputs and again with the
  /// real-valued ones all above, then all below their pad value (one_sided_inputs): throws ortfleet::Error refusing the buckets,
  /// naming the outputs that differ beyond a tolerance and by how much.
  void check_padding_keeps_outputs(const InputShapes& base_shape, const RunShape& run_shape);
  /// What the shape costs depend on beyond the cache entry's key: the CUDA EP's options.
  std::string cost_conditions() const {
    RunConfig cuda_only;
    cuda_only.cuda = spec.config.cuda;
    return cuda_only.to_json();
  }
  /// The first call of a shape coming back to the shared session after another (GPU, measured policy,
  /// costs not yet known) prices a switch: it is run again, and the difference is what the switch cost.
  /// A new session's cost is this start's own: its creation and first run. Kept beside the cache entry.
  std::atomic<bool> pricing{false};
  std::vector<Tensor> run_priced(ShapeSession& shared, const std::vector<Tensor>& given, bool outputs_on_device);
  /// Uses `measured` from now on and keeps it beside the cache entry for later starts.
  void keep_costs(const detail::ShapeCosts& measured) {
    {
      std::lock_guard lock(mutex);  // session_for reads it under the lock
      costs = measured;
    }
    if (costs_writable) detail::write_shape_costs(costs_entry, cost_conditions(), measured);
  }
  bool is_declared(const std::string& signature) const { return declared_signatures.count(signature) > 0; }

  void create();
  /// The shapes made at start-up: config.shapes resolved against the model, bucket shapes included.
  void declare_shapes();
  /// An entry this session wrote (inline fill) checked against its outputs, then published or set
  /// aside; what later shape sessions load from.
  void finish_cache_entry(detail::CacheUse& cache, ShapeSession& first);
  /// The options of a session of this Session; `config` (default: the spec's) for one made otherwise.
  Ort::SessionOptions make_options(bool first, const RunConfig* config = nullptr);
  Ort::Session open(const std::string& source, const void* data, size_t size, Ort::SessionOptions& options);
  void read_metadata(const Ort::Session& session);
  /// Has `options` use the weights of `optimised_model` uploaded once to this GPU (uploading them at
  /// the first call), when this session shares weights; a no-op otherwise.
  void share_weights(Ort::SessionOptions& options, const std::string& optimised_model);
  /// Has `options` use the floating-point weights of `model` (its raw or external bytes) uploaded once to this GPU.
  void share_weights_of(Ort::SessionOptions& options, const std::string& model);
  /// The shape warm-up makes ready first (and the cache entry is checked on): the first declared one,
  /// else the warm-up inputs' own.
  InputShapes first_warmup_shape() const { return declared.empty() ? warmup_source->default_shapes() : declared.front(); }
  /// Loads the entry `cache` is writing and compares its outputs with `reference`'s on warm-up inputs:
  /// "" when they agree, else why not. The entry is ortfleet's work, so any failure is its own.
  /// nullopt when the entry could not be checked (the model itself failed on the warm-up inputs).
  std::optional<std::string> verify_cache_entry(const detail::CacheUse& cache, ShapeSession& reference);
  /// Runs `s` the way Session::run would (as a CUDA graph in graph mode), outputs on the host.
  std::vector<Tensor> run_on(ShapeSession& s, const std::vector<Tensor>& given) {
    return graph_mode() ? run_graph(s, given, /*outputs_on_device=*/false) : run_plain(s, given, /*outputs_on_device=*/false);
  }
  /// The session a call of `shapes` runs on; `prices_switch` (when given) says whether this call should
  /// price a shape switch (run_priced).
  std::shared_ptr<ShapeSession> session_for(const InputShapes& shapes, bool* prices_switch = nullptr);
  std::shared_ptr<ShapeSession> make_shape_session(const std::string& signature);
  /// `with`: the run's options (a run that may be terminated); by default its own.
  std::vector<Tensor> run_plain(ShapeSession& s, const std::vector<Tensor>& given, bool outputs_on_device, bool shrink_arena = false,
                                Ort::RunOptions* with = nullptr);
  void prime(ShapeSession& s, const std::vector<Tensor>& given);
  std::atomic<bool> arena_shrinks{true};  // false once ONNX Runtime refused to shrink this device's arena
  std::vector<Tensor> run_graph(ShapeSession& s, const std::vector<Tensor>& given, bool outputs_on_device);

  /// Throws when `t` is a GPU tensor of another device than this session's.
  void check_device_of(const Tensor& t) const {
    if (t.on_gpu() && t.device != spec.device) {
      throw Error("input '" + t.name + "' lives on " + t.device.to_string() + ", not on this session's device",
                  "Copy it to " + lane + " first", lane);
    }
  }
};

}  // namespace ortfleet
