#pragma once
// One ONNX Runtime session on one device: created with the options of a RunConfig, warmed up on
// generated inputs (so cuDNN algorithm search happens at start-up, not at the first request), and
// run on host or device tensors.
#include <memory>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "ortfleet/engine/timeline.hpp"

namespace ortfleet {

struct SessionSpec {
  std::string model_path;
  Device device = Device::cpu();
  RunConfig config;
  bool map_model = false;          ///< mmap the model and create the session from memory
  const void* model_data = nullptr;  ///< model bytes already in memory (kept alive by the caller)
  size_t model_size = 0;
  std::string profile_prefix;      ///< non-empty: ONNX Runtime's profiler writes <prefix>_<date>.json
  std::string cache_dir;           ///< where the optimised-model cache lives (config.session.optimized_model_cache)
  int64_t dynamic_dim = 1;         ///< value of dynamic dimensions in generated warm-up inputs (when no shape is declared)
};

/// One ONNX Runtime session of a Session and the shapes it serves.
struct ShapeSessionInfo {
  std::string shapes;         ///< its signature, "input=2x3x224x224" ("" before its first call)
  bool declared = false;      ///< made at start-up for a declared shape
  int64_t calls = 0;
  double create_ms = 0;       ///< creating it (0 for the first, which the start-up timeline shows)
  uint64_t memory_bytes = 0;  ///< device memory (GPU) or resident memory (CPU) it added, creation and first call
};

/// One call that ran padded to a bucket, by part: padding the inputs (on a GPU: the copy in, which
/// `upload_ms` counts, and the padding there), the run of the bucket shape, cropping the outputs (on
/// a GPU: on the device, then the copy down, which `copy_down_ms` counts).
struct BucketCallTime {
  std::string bucket;          ///< the bucket shape it ran as
  bool bucket_first = false;   ///< that bucket shape's first padded call
  double pad_ms = 0;
  double upload_ms = 0;
  double run_ms = 0;
  double crop_ms = 0;
  double copy_down_ms = 0;
  double total_ms() const { return pad_ms + run_ms + crop_ms; }
};

/// Where the calls that ran padded to a bucket spent their time, in total, and the slowest call.
struct BucketCallCosts {
  int64_t calls = 0;
  double pad_ms = 0;  ///< sums over the calls
  double upload_ms = 0;
  double run_ms = 0;
  double crop_ms = 0;
  double copy_down_ms = 0;
  BucketCallTime slowest;  ///< the slowest call, whole: where a stream's p99 comes from
};

/// A tiered start's progress (SessionOptions::tiered_start): the quick session serving while the one as
/// configured is made beside it, then switched in, or refused where their outputs differ.
struct SessionTier {
  enum class Stage { none, quick, full, refused };
  Stage stage = Stage::none;
  double full_ms = 0;  ///< making and warming the full session, from the quick one's ready to the switch (or refusal)
  std::string note;    ///< why the switch was refused, or what it waited for
};
std::string to_string(SessionTier::Stage stage);  ///< "none", "quick", "full", "refused"

/// Whether a first start of `model` on `device` with `config` is tiered where the cache has no entry
/// and the device holds the weights twice (SessionOptions::tiered_start): what the setting asks, the
/// model's convolutions for `auto`, nothing declared beyond one shape, no CUDA graph.
bool tiered_start_asked(const std::string& model, const Device& device, const RunConfig& config);

class Session {
 public:
  /// Creates the session; phases go into `timeline` (if any) on the device's lane.
  explicit Session(const SessionSpec& spec, Timeline* timeline = nullptr);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  const Device& device() const;
  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  const ProviderAttachment& provider() const;
  /// Whether the session came from the optimised-model cache.
  bool used_model_cache() const;
  /// What the model cache did for this start: "hit", "miss", "busy", "no-gain", "rejected",
  /// "unwritable" or "off" (detail in model_cache_note()).
  const std::string& model_cache_outcome() const;
  /// Why, in words ("no entry yet: it is made after ready, in the background"); often "".
  const std::string& model_cache_note() const;
  /// The cache entry's path for this model and configuration ("" without the cache), whether or not it exists.
  const std::string& model_cache_entry() const;
  /// Milliseconds the first ONNX Runtime session took to create (the constructor's share of the start).
  double create_ms() const;

  /// Runs `runs` inferences on the warm-up inputs; the first one pays cuDNN algorithm search.
  void warm_up(int runs = 1, uint64_t seed = 1);
  /// The inputs warm-up feeds the first shape it warms up (config.warmup: the user's file, generated
  /// values for the rest), on the host.
  std::vector<Tensor> warmup_inputs(uint64_t seed = 1) const;
  /// Runs one inference. Inputs may live on the host or on this session's GPU (bound with IO binding,
  /// no copy); outputs come back on the host, or on the GPU when outputs_on_device is true.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, bool outputs_on_device = false);
  /// Hands back what the memory arena of its first ONNX Runtime session keeps beyond what a run needs
  /// (the last run's activations, cuDNN's search workspace): one run of the warm-up inputs that shrinks
  /// the arena. For a session that waits unused (a parked pool worker's checkpoint then holds less);
  /// its next run grows the arena back (tens of ms). A CUDA-graph session keeps its memory (the graph
  /// replays fixed addresses). Returns false when nothing was released (graph mode, or ONNX Runtime
  /// refused to shrink).
  bool release_spare_memory();
  /// Ends ONNX Runtime's profiling and returns the profile's path ("" when profiling was off).
  std::string end_profiling();
  /// Device memory (GPU) or resident memory (CPU) this session holds now: its ONNX Runtime sessions,
  /// their arenas and the weights they share (the CUDA context excluded).
  uint64_t memory_bytes() const;
  /// The ONNX Runtime sessions it holds now, least recently used first.
  std::vector<ShapeSessionInfo> shape_sessions() const;
  /// The shapes made and warmed up at start-up (config.shapes, resolved against the model).
  const std::vector<InputShapes>& declared_shapes() const;
  /// Where this session's bucketed calls spent their time so far.
  BucketCallCosts bucket_calls() const;
  /// A tiered start's progress; Stage::none for a session that started as configured.
  SessionTier tier() const;
  /// Waits at most `timeout_s` for a tiered start's full session (switched in or refused); tier() then.
  SessionTier wait_for_full_session(double timeout_s) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortfleet
