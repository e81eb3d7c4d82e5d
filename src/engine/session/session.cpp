#include "ortfleet/engine/session.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <set>

#include "base/crash_report.hpp"
#include "engine/shapes/buckets.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/cache/crash_records.hpp"
#include "engine/cuda/cuda_driver.hpp"
#include "engine/cuda/cuda_environment.hpp"
#include "engine/cuda/cuda_provider.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/files/model_file.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "engine/runtime/ort_errors.hpp"
#include "engine/cuda/shared_weights.hpp"
#include "engine/cache/output_compare.hpp"
#include "engine/shapes/shape_policy.hpp"
#include "engine/session/bucketed_calls.hpp"
#include "engine/session/host_buffer_pool.hpp"
#include "engine/session/input_check.hpp"
#include "engine/session/warmup_inputs.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "engine/shapes/shapes.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {

GraphOptimizationLevel ort_level(GraphOptimization level) {
  switch (level) {
    case GraphOptimization::disabled: return ORT_DISABLE_ALL;
    case GraphOptimization::basic: return ORT_ENABLE_BASIC;
    case GraphOptimization::extended: return ORT_ENABLE_EXTENDED;
    case GraphOptimization::layout: return ORT_ENABLE_LAYOUT;
    case GraphOptimization::all: return ORT_ENABLE_ALL;
  }
  return ORT_ENABLE_ALL;
}

void apply_session_options(Ort::SessionOptions& so, const SessionOptions& o) {
  so.SetGraphOptimizationLevel(ort_level(o.graph_optimization));
  if (o.memory_pattern) so.EnableMemPattern(); else so.DisableMemPattern();
  if (o.cpu_arena) so.EnableCpuMemArena(); else so.DisableCpuMemArena();
  if (o.intra_op_threads > 0) so.SetIntraOpNumThreads(o.intra_op_threads);
  if (o.inter_op_threads > 0) so.SetInterOpNumThreads(o.inter_op_threads);
  if (!o.thread_spinning) {
    so.AddConfigEntry("session.intra_op.allow_spinning", "0");
    so.AddConfigEntry("session.inter_op.allow_spinning", "0");
  }
  for (const auto& [k, v] : o.config_entries) so.AddConfigEntry(k.c_str(), v.c_str());
  for (const auto& library : o.custom_op_libraries) {
    try {
      so.RegisterCustomOpsLibrary(library.c_str());
    } catch (const Ort::Exception& e) {
      throw Error("cannot load the custom-op library " + library + ": " + e.what(),
                  "Check the path, and that the library was built for this ONNX Runtime");
    }
  }
}

TensorSpec spec_of(const std::string& name, const Ort::TypeInfo& info) {
  TensorSpec spec;
  spec.name = name;
  if (info.GetONNXType() != ONNX_TYPE_TENSOR) {
    spec.type = ElementType::undefined;
    return spec;
  }
  auto tensor = info.GetTensorTypeAndShapeInfo();
  spec.type = static_cast<ElementType>(tensor.GetElementType());
  spec.shape = tensor.GetShape();
  std::vector<const char*> symbols(spec.shape.size(), nullptr);
  tensor.GetSymbolicDimensions(symbols.data(), symbols.size());
  for (const char* s : symbols) spec.dim_names.emplace_back(s ? s : "");
  return spec;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

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
  detail::CudaDriver::PrimaryContext context;  // held while the sessions live (a GPU device)
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
  // One copy of the weights on the GPU for the shape sessions after the first; declared before
  // `sessions`, so that they outlive every session using them.
  std::unique_ptr<detail::SharedWeights> shared_weights;
  mutable std::mutex mutex;  // guards `sessions` and `clock`
  std::mutex create_mutex;   // one new ONNX Runtime session at a time
  std::vector<std::shared_ptr<ShapeSession>> sessions;
  uint64_t clock = 0;

  std::optional<Timeline::Scope> phase(const char* name) {
    if (timeline == nullptr) return std::nullopt;
    return timeline->scope(name, lane);
  }

  Ort::MemoryInfo gpu_memory() const {
    return Ort::MemoryInfo("Cuda", OrtArenaAllocator, cuda_ordinal(spec.device), OrtMemTypeDefault);
  }
  bool graph_mode() const { return spec.device.is_gpu() && spec.config.cuda.cuda_graph; }
  int max_sessions() const { return std::max({1, spec.config.shapes.max_sessions, static_cast<int>(declared.size())}); }
  /// Runs `given` on `s`, timed: milliseconds.
  double timed_run(ShapeSession& s, const std::vector<Tensor>& given) {
    const auto start = std::chrono::steady_clock::now();
    run_on(s, given);
    return ms_since(start);
  }
  /// Learns how outputs follow the buckets and makes the buffers padded calls go through.
  void learn_buckets();
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
  Ort::SessionOptions make_options(bool first);
  Ort::Session open(const std::string& source, const void* data, size_t size, Ort::SessionOptions& options);
  void read_metadata(const Ort::Session& session);
  /// Has `options` use the weights of `optimised_model` uploaded once to this GPU (uploading them at
  /// the first call), when this session shares weights; a no-op otherwise.
  void share_weights(Ort::SessionOptions& options, const std::string& optimised_model);
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
  std::vector<Tensor> run_plain(ShapeSession& s, const std::vector<Tensor>& given, bool outputs_on_device, bool shrink_arena = false);
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

Ort::SessionOptions Session::Impl::make_options(bool first) {
  Ort::SessionOptions so;
  SessionOptions options = spec.config.session;
  // Each ONNX Runtime session on the CPU has its own thread pool, whose threads spin after a run:
  // the idle sessions of a model's several shapes then take the cores from the one running (a
  // bucketed stream ran at 2x its steady time on 2 cores). Several sessions do not spin.
  const auto& shapes = spec.config.shapes;
  const bool several = !shapes.declared.empty() || !shapes.batches.empty() || !shapes.buckets.empty() || shapes.policy == ShapePolicy::per_shape;
  if (!spec.device.is_gpu() && several && shapes.max_sessions > 1) options.thread_spinning = false;
  apply_session_options(so, options);
  so.SetLogId(lane.c_str());
  // One profile per device: the first session's, which the start-up runs.
  if (first && !spec.profile_prefix.empty()) so.EnableProfiling(spec.profile_prefix.c_str());
  if (spec.device.is_gpu()) {
    try {
      ProviderAttachment attached = detail::attach_cuda(so, cuda_ordinal(spec.device), spec.config.cuda);
      if (first) provider = std::move(attached);
    } catch (const Error& e) {
      throw e.at(lane);
    }
  }
  return so;
}

Ort::Session Session::Impl::open(const std::string& source, const void* data, size_t size, Ort::SessionOptions& so) {
  try {
    if (data != nullptr) {
      // External data files are found relative to the model's folder, which bytes in memory lack.
      const std::string folder = fs::absolute(source).parent_path().string();
      so.AddConfigEntry("session.model_external_initializers_file_folder_path", folder.c_str());
      return Ort::Session(detail::ort_env(), data, size, so);
    }
    return Ort::Session(detail::ort_env(), source.c_str(), so);
  } catch (const Ort::Exception&) {
    // ONNX Runtime's own words for a model it cannot take ("Protobuf parsing failed" for subgraphs nested
    // too deep) do not say why: the model's structure does, where it is the cause.
    if (source != spec.model_path) throw;  // a cache entry: the cache handles its failures
    if (auto problem = detail::model_structure_problem(source)) throw problem->at(lane);
    throw;
  }
}

void Session::Impl::create() {
  const std::string& model = spec.model_path;
  validate_model_file(model);
  load_runtime();
  detail::ort_env();
  // Only effective before the process's first CUDA call (the fleet sets them before cuInit).
  detail::apply_cuda_environment(spec.config);

  if (spec.device.is_gpu()) {
    // Phases a fleet has already done up front are not recorded again (they cost nothing here).
    if (!cuda_provider_prepared()) {
      auto p = phase(phase::ep_register);
      const auto& state = prepare_cuda_provider();
      if (p) p->arg("path", state.path);
    }
    auto& driver = detail::CudaDriver::instance();
    // Creating the primary context here, outside ONNX Runtime, makes its cost visible and lets a
    // fleet create the contexts of several GPUs in parallel.
    auto p = driver.holds_context(cuda_ordinal(spec.device)) ? std::nullopt : phase(phase::cuda_context);
    context = detail::CudaDriver::PrimaryContext(cuda_ordinal(spec.device));
  } else {
    provider.path = "cpu";
  }
  memory_at_start = memory_in_use(spec.device);

  Ort::SessionOptions so = make_options(/*first=*/true);
  // Nodes assigned to an EP by name (a crash's work-around, doctor --locate-crash) ran on the CUDA EP
  // again whenever the session also wrote or loaded an optimised copy (1 x H100, ONNX Runtime 1.29,
  // bench/device/pin_modes.sh): such a model runs from its own graph, without the cache.
  const bool use_cache = spec.config.session.optimized_model_cache.value_or(false) && !spec.config.session.assigns_nodes();
  auto cache = use_cache ? std::make_unique<detail::CacheUse>(spec.cache_dir, model, spec.device, spec.config, so)
                         : std::make_unique<detail::CacheUse>(model);
  // A cached graph is final: the first session can already use the weights its siblings will share.
  if (cache->hit()) share_weights(so, cache->source());

  const void* model_data = nullptr;
  size_t model_size = 0;
  // The bytes a session is created from: the caller's, or (map_model) a mapping of `source`. A cached
  // copy is always read from its own file.
  auto model_bytes_of = [&](const std::string& source, bool from_cache) {
    model_data = from_cache ? nullptr : spec.model_data;
    model_size = spec.model_size;
    if (model_data != nullptr || !spec.map_model) return;
    auto p = phase(phase::model_read);
    mapping = std::make_unique<detail::MappedFile>(source, /*populate=*/true);
    if (p) p->arg("bytes", std::to_string(mapping->size()));
    model_data = mapping->data();
    model_size = mapping->size();
  };
  model_bytes_of(cache->source(), cache->hit());

  auto first = std::make_shared<ShapeSession>();
  first->first = true;
  first->memory_before = memory_in_use(spec.device);
  const auto creating = std::chrono::steady_clock::now();
  {
    auto p = phase(phase::session_create);
    if (p) {
      p->arg("provider", provider.path);
      if (use_cache) p->arg("model_cache", cache->outcome());
      if (!cache->note().empty()) p->arg("model_cache_note", cache->note());
    }
    try {
      first->session = open(cache->source(), model_data, model_size, so);
    } catch (const Ort::Exception& e) {
      if (!cache->writing() && !cache->hit()) detail::rethrow_ort_error(e, "creating the session for " + model, lane);
      // The cache is what failed: writing the entry (a full disk, a read-only folder), or loading an
      // entry ortfleet wrote. Either way the model itself starts, and the model is not blamed.
      if (cache->hit()) {
        cache->reject(std::string("loading it failed: ") + e.what());
        shared_weights.reset();
        model_bytes_of(model, /*from_cache=*/false);
      } else {
        cache->abandon(e.what());
      }
      Ort::SessionOptions plain = make_options(/*first=*/true);
      try {
        first->session = open(model, model_data, model_size, plain);
      } catch (const Ort::Exception& again) {
        detail::rethrow_ort_error(again, "creating the session for " + model, lane);
      }
    }
  }
  used_cache = cache->hit();
  create_ms = ms_since(creating);
  cache_outcome = cache->outcome();
  cache_note = cache->note();
  cache_entry = cache->entry();
  read_metadata(first->session);
  warmup_source = std::make_unique<detail::WarmupInputSource>(spec.config.warmup, inputs, model_ranges, spec.dynamic_dim);
  declare_shapes();
  finish_cache_entry(*cache, *first);
  if (!spec.profile_prefix.empty()) profiled = first;
  sessions.push_back(std::move(first));
}

void Session::Impl::declare_shapes() {
  declared = resolve_shapes(inputs, spec.config.shapes, spec.dynamic_dim);
  buckets = detail::BucketPlan(inputs, spec.config.shapes, spec.config.shapes.pad_batch ? declared_batches(inputs, declared) : std::vector<int64_t>{});
  for (auto& shape : buckets.shapes(inputs, spec.dynamic_dim, kMaxShapeSessions)) {
    if (std::find(declared.begin(), declared.end(), shape) == declared.end()) declared.push_back(std::move(shape));
  }
  for (const auto& d : declared) declared_signatures.insert(to_string(d));
  if (declared.size() > static_cast<size_t>(kMaxShapeSessions)) {
    throw Error(fmt::format("{} shapes were declared with the buckets, more than the {} sessions a device may keep", declared.size(), kMaxShapeSessions),
                "Declare fewer shapes or bucket sizes", lane);
  }
}

void Session::Impl::finish_cache_entry(detail::CacheUse& cache, ShapeSession& first) {
  if (cache.writing()) {
    std::optional<std::string> failed;
    {
      auto p = phase(phase::cache_verify);
      failed = verify_cache_entry(cache, first);
      if (p) p->arg("outcome", !failed ? "unchecked" : failed->empty() ? "verified" : "rejected");
    }
    if (!failed) cache.abandon();
    else if (!failed->empty()) cache.reject(*failed);
    cache_outcome = cache.outcome();
  }
  later_source_optimised = cache.hit() || cache.commit();
  later_source = later_source_optimised ? cache.entry() : spec.model_path;
  if (later_source_optimised) {
    costs_entry = cache.entry();
    costs_writable = !cache.read_only();
    costs = detail::read_shape_costs(costs_entry, cost_conditions());
  }
}

void Session::Impl::read_metadata(const Ort::Session& session) {
  Ort::AllocatorWithDefaultOptions allocator;
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    inputs.push_back(spec_of(session.GetInputNameAllocated(i, allocator).get(), session.GetInputTypeInfo(i)));
  }
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    outputs.push_back(spec_of(session.GetOutputNameAllocated(i, allocator).get(), session.GetOutputTypeInfo(i)));
  }
  detail::check_model_interface(spec.model_path, inputs, outputs);
  // Input ranges recorded by the model's author (e.g. `synth transformer` records its vocabulary)
  // keep generated warm-up inputs valid: token ids must index the embedding table.
  auto metadata = session.GetModelMetadata();
  const std::string prefix = "ortfleet.input_range.";
  for (const auto& key : metadata.GetCustomMetadataMapKeysAllocated(allocator)) {
    const std::string k = key.get();
    if (k.rfind(prefix, 0) != 0) continue;
    auto value = metadata.LookupCustomMetadataMapAllocated(k.c_str(), allocator);
    long long lo = 0;
    long long hi = 0;
    if (value && std::sscanf(value.get(), "%lld,%lld", &lo, &hi) == 2 && lo <= hi) {
      model_ranges[k.substr(prefix.size())] = {static_cast<double>(lo), static_cast<double>(hi)};
    }
  }
}


std::optional<std::string> Session::Impl::verify_cache_entry(const detail::CacheUse& cache, ShapeSession& reference) {
  const InputShapes shapes = first_warmup_shape();
  std::vector<Tensor> given;
  std::vector<Tensor> want;
  const CrashScope first_run(crash_first_run, crash_record);
  try {
    given = warmup_source->make(shapes, /*seed=*/1).tensors;
    want = run_on(reference, given);
  } catch (const std::exception& e) {
    // The model itself rejects the warm-up inputs: the entry cannot be checked now, so it is not
    // published; warm-up reports the model's error with what was made up.
    spdlog::debug("{}: the model cache entry was not verified, so not kept: the model failed on the warm-up inputs ({})", lane, e.what());
    return std::nullopt;
  }
  ShapeSession candidate;
  try {
    Ort::SessionOptions so = make_options(/*first=*/false);
    cache.use_entry_options(so);
    candidate.session = open(cache.written(), nullptr, 0, so);
    const std::vector<Tensor> got = run_on(candidate, given);
    if (got.size() != want.size()) return fmt::format("it has {} outputs and the model {}", got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::string why = detail::output_difference(want[i], got[i]); !why.empty()) return why;
    }
  } catch (const std::exception& e) {
    return std::string("loading and running it failed: ") + e.what();
  }
  return std::string();
}

void Session::Impl::share_weights(Ort::SessionOptions& options, const std::string& optimised_model) {
  if (!spec.device.is_gpu() || !spec.config.shapes.share_weights || max_sessions() == 1) return;
  if (!shared_weights) {
    auto upload = phase(phase::weights_upload);
    shared_weights = std::make_unique<detail::SharedWeights>(optimised_model, spec.device);
    if (upload) {
      upload->arg("bytes", std::to_string(shared_weights->bytes()));
      upload->arg("initializers", std::to_string(shared_weights->count()));
      // Where the time went: profile reads read_ms and copy_ms, bench/device's summaries all of them.
      const auto& staged = shared_weights->staged();
      for (const auto& [name, ms] : {std::pair{"read_ms", shared_weights->read_ms()}, {"copy_ms", shared_weights->upload_ms()},
                                     {"prepare_ms", shared_weights->prepare_ms()}, {"staging_ms", staged.staging_ms},
                                     {"fill_ms", staged.fill_ms}, {"wait_ms", staged.wait_ms}}) {
        upload->arg(name, fmt::format("{:.1f}", ms));
      }
    }
  }
  shared_weights->add_to(options);
}

std::shared_ptr<ShapeSession> Session::Impl::make_shape_session(const std::string& signature) {
  auto s = std::make_shared<ShapeSession>();
  s->signature = signature;
  s->memory_before = memory_in_use(spec.device);
  const auto start = std::chrono::steady_clock::now();
  auto p = phase(phase::shape_session);
  if (p) p->arg("shapes", signature);
  const CrashScope creating(crash_creating, crash_record);
  Ort::SessionOptions so = make_options(/*first=*/false);
  if (later_source_optimised) so.SetGraphOptimizationLevel(ORT_DISABLE_ALL);
  if (later_source_optimised) share_weights(so, later_source);
  try {
    s->session = open(later_source, nullptr, 0, so);
  } catch (const Ort::Exception& e) {
    detail::rethrow_ort_error(e, "creating the session for shapes " + signature + " of " + spec.model_path, lane);
  }
  s->create_ms = ms_since(start);
  return s;
}

std::shared_ptr<ShapeSession> Session::Impl::session_for(const InputShapes& shapes, bool* prices_switch) {
  const std::string signature = to_string(shapes);
  auto find = [&]() -> std::shared_ptr<ShapeSession> {
    if (max_sessions() == 1) return sessions.front();
    for (auto& s : sessions) {
      if (s->signature == signature) return s;
    }
    for (auto& s : sessions) {
      if (s->signature.empty()) {  // the first session, before its first call
        s->signature = signature;
        return s;
      }
    }
    return nullptr;
  };
  auto use = [&](const std::shared_ptr<ShapeSession>& s) {
    s->last_used = ++clock;
    s->last_signature = signature;
    return s;
  };
  const ShapePolicy policy = spec.config.shapes.policy;
  {
    std::lock_guard lock(mutex);
    if (auto s = find()) return use(s);
    // A shape no session has: the shared session serves it, unless the policy gives it its own.
    const bool returning = traffic.seen(signature);
    traffic.note(signature, shapes);
    if (auto advice = traffic.advice_once(static_cast<size_t>(max_sessions()))) spdlog::warn("{}: {}: {}", lane, spec.model_path, *advice);
    // A declared shape always has a session of its own; so has every shape of a captured CUDA graph.
    if (policy != ShapePolicy::per_shape && !is_declared(signature) && !graph_mode()) {
      const auto& shared = sessions.front();
      const bool own = policy == ShapePolicy::measured && spec.device.is_gpu() && static_cast<int>(sessions.size()) < max_sessions() &&
                       traffic.pays_for_session(signature, shared->last_signature != signature, costs);
      if (!own) {
        if (prices_switch != nullptr) {
          *prices_switch = policy == ShapePolicy::measured && spec.device.is_gpu() && !costs && returning && max_sessions() > 1 &&
                           !shared->last_signature.empty() && shared->last_signature != signature && !pricing.exchange(true);
        }
        return use(shared);
      }
    }
  }
  std::lock_guard creating(create_mutex);
  {
    std::lock_guard lock(mutex);
    if (auto s = find()) return use(s);  // made by another thread meanwhile
    // Make room first, so that the evicted session's memory is free for the new one (a call still
    // running on it keeps it alive until it returns). Declared sessions and the shared one stay.
    while (static_cast<int>(sessions.size()) >= max_sessions()) {
      auto lru = sessions.end();
      for (auto it = sessions.begin() + 1; it != sessions.end(); ++it) {
        if (!(*it)->declared && (lru == sessions.end() || (*it)->last_used < (*lru)->last_used)) lru = it;
      }
      if (lru == sessions.end()) return use(sessions.front());
      sessions.erase(lru);
    }
  }
  auto made = make_shape_session(signature);
  made->declared = is_declared(signature);  // never evicted, whenever it was made
  std::lock_guard lock(mutex);
  sessions.push_back(made);
  return use(made);
}

Session::Session(const SessionSpec& spec, Timeline* timeline) : impl_(std::make_unique<Impl>()) {
  impl_->spec = spec;
  impl_->timeline = timeline;
  impl_->lane = spec.device.to_string();
  impl_->bucketed = std::make_unique<detail::BucketedCalls>(spec.device, spec.config.shapes.pad_values);
  install_crash_handler();
  // What the locating command needs to make the model run as this session does.
  std::string flags;
  for (const auto& library : spec.config.session.custom_op_libraries) flags += " --custom-ops " + library;
  if (!spec.config.warmup.inputs_file.empty()) flags += " --warmup-inputs " + spec.config.warmup.inputs_file;
  for (const auto& [input, range] : spec.config.warmup.input_ranges) flags += fmt::format(" --input-range {}={}:{}", input, range.lo, range.hi);
  if (!spec.config.shapes.declared.empty()) flags += " --shapes " + to_string(spec.config.shapes.declared.front());
  impl_->crash_creating = crash_text("creating the session", spec.model_path, impl_->lane, flags);
  impl_->crash_first_run = crash_text("the first inference", spec.model_path, impl_->lane, flags);
  impl_->crash_run = crash_text("a run", spec.model_path, impl_->lane, flags);
  impl_->crash_record = detail::crash_record_path(spec.model_path, /*make_folder=*/true);
  const CrashScope creating(impl_->crash_creating, impl_->crash_record);
  impl_->create();
}

Session::~Session() {
  if (impl_ && impl_->context.held()) {
    // Sessions, their graph buffers and the weights they share go before the context they live in.
    impl_->sessions.clear();
    impl_->bucketed->release_device_buffers();
    impl_->profiled.reset();
    impl_->shared_weights.reset();
    impl_->context = {};
  }
}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const Device& Session::device() const { return impl_->spec.device; }
const std::vector<TensorSpec>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorSpec>& Session::outputs() const { return impl_->outputs; }
const ProviderAttachment& Session::provider() const { return impl_->provider; }
bool Session::used_model_cache() const { return impl_->used_cache; }
const std::string& Session::model_cache_outcome() const { return impl_->cache_outcome; }
const std::string& Session::model_cache_note() const { return impl_->cache_note; }
const std::string& Session::model_cache_entry() const { return impl_->cache_entry; }
double Session::create_ms() const { return impl_->create_ms; }
const std::vector<InputShapes>& Session::declared_shapes() const { return impl_->declared; }

BucketCallCosts Session::bucket_calls() const { return impl_->bucketed->costs(); }

uint64_t Session::memory_bytes() const {
  const uint64_t now = memory_in_use(impl_->spec.device);
  return now - std::min(impl_->memory_at_start, now);
}

std::vector<ShapeSessionInfo> Session::shape_sessions() const {
  std::lock_guard lock(impl_->mutex);
  auto sorted = impl_->sessions;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
  std::vector<ShapeSessionInfo> out;
  for (const auto& s : sorted) out.push_back({s->signature, s->declared, s->calls.load(), s->create_ms, s->memory_bytes});
  return out;
}

std::vector<Tensor> Session::warmup_inputs(uint64_t seed) const {
  const auto& s = *impl_;
  return s.warmup_source->make(s.first_warmup_shape(), seed).tensors;
}

void Session::warm_up(int runs, uint64_t seed) {
  auto& s = *impl_;
  // The shapes to be ready for: the declared ones, else the warm-up inputs' (the file's, or made up).
  std::vector<InputShapes> shapes = s.declared;
  if (shapes.empty()) shapes.push_back(s.first_warmup_shape());
  // ONNX Runtime's CUDA EP runs a graph normally once or twice (to size its memory) and captures it
  // on the next run: three runs make "ready" include the capture.
  if (s.graph_mode()) runs = std::max(runs, 3);
  for (const auto& shape : shapes) {
    const auto inputs = s.warmup_source->make(shape, seed);
    for (int i = 0; i < runs; ++i) {
      auto p = s.phase(phase::warmup);
      if (p) {
        p->arg("run", std::to_string(i + 1));
        if (shapes.size() > 1) p->arg("shapes", to_string(shape));
      }
      try {
        const auto start = std::chrono::steady_clock::now();
        run(inputs.tensors, /*outputs_on_device=*/s.graph_mode());
        if (s.first_run_ms == 0) s.first_run_ms = ms_since(start);
      } catch (const Error& e) {
        if (inputs.made_up.empty()) throw;
        // Real models check their inputs: say which values were invented, and how to give real ones.
        throw Error("the warm-up run failed on inputs ortfleet made up (" + inputs.made_up_text() + "): " + e.what_failed(),
                    detail::warmup_inputs_hint(), e.where());
      }
    }
  }
  {
    std::lock_guard lock(s.mutex);
    for (auto& session : s.sessions) session->declared = s.is_declared(session->signature);
  }
  std::call_once(s.buckets_learned, [&] { s.learn_buckets(); });
}

void Session::Impl::learn_buckets() {
  if (buckets.empty()) return;
  auto p = phase(phase::buckets_learn);
  const auto shapes = buckets.shapes(inputs, spec.dynamic_dim, kMaxShapeSessions);
  if (shapes.empty()) {  // padded batches alone: the outputs' first dims are the rows, nothing to run
    buckets.learn({}, outputs, {});
    return;
  }
  const auto base = session_for(shapes.front());
  // Shapes other than a bucket's run (unpadded) on the first bucket's session, which runs its own
  // shape again afterwards, so that its next call is a steady one.
  bool disturbed = false;
  std::vector<std::vector<int64_t>> at_base;  // the outputs' shapes at the first bucket shape
  buckets.learn(shapes, outputs, [&](const InputShapes& shape) {
    const bool own = is_declared(to_string(shape));
    // A captured CUDA graph runs its own shape only: another shape gets a session of its own, not kept.
    const auto session = own ? session_for(shape) : graph_mode() ? make_shape_session(to_string(shape)) : base;
    disturbed = disturbed || (!own && !graph_mode());
    std::vector<std::vector<int64_t>> out;
    for (const auto& t : run_on(*session, warmup_source->make(shape, /*seed=*/1).tensors)) out.push_back(t.shape);
    if (shape == shapes.front()) at_base = out;
    return out;
  });
  if (disturbed) run_on(*base, warmup_source->make(shapes.front(), 1).tensors);
  // Each output's bytes at its largest over the bucket shapes (learning ran the smallest ones only: a
  // buffer sized by those made DeepLab's calls at its largest bucket fetch fresh host memory, 40-74 ms
  // to copy down 70 MB, on an H100 in parts-a).
  std::vector<size_t> largest(std::min(at_base.size(), outputs.size()), 0);
  for (const auto& shape : shapes) {
    const auto grown = buckets.output_shapes_at(shape, shapes.front(), at_base);
    for (size_t o = 0; o < largest.size(); ++o) {
      largest[o] = std::max(largest[o], checked_bytes(grown[o], outputs[o].type, "output '" + outputs[o].name + "'"));
    }
  }
  bucketed->reserve(inputs, shapes, outputs, largest);
}

std::vector<Tensor> Session::Impl::run_priced(ShapeSession& shared, const std::vector<Tensor>& given, bool outputs_on_device) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> out = run_plain(shared, given, outputs_on_device);
  const double returning = ms_since(start);
  try {
    const double steady = timed_run(shared, given);  // the same shape again: what it costs without the switch
    detail::ShapeCosts measured;
    measured.steady_ms = steady;
    measured.switch_ms = std::max(0.0, returning - steady);
    measured.new_session_ms = std::max(0.01, create_ms + first_run_ms);
    keep_costs(measured);
    spdlog::debug("{}: a shape switch costs {:.2f} ms on a {:.2f} ms call; a new session {:.0f} ms", lane, measured.switch_ms, steady,
                  measured.new_session_ms);
  } catch (const std::exception& e) {
    spdlog::debug("{}: the shape switch was not priced ({}); new shapes share one session", lane, e.what());
    keep_costs({0, 0, std::numeric_limits<double>::max()});
  }
  return out;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& given, bool outputs_on_device) {
  auto& s = *impl_;
  std::optional<detail::CudaDriver::CurrentContextKeeper> keep;  // the caller's current device stays theirs
  if (s.spec.device.is_gpu()) keep.emplace();
  for (const auto& t : given) s.check_device_of(t);
  const InputShapes shapes = shapes_of(given);
  try {
    detail::check_run_inputs(s.inputs, given);
  } catch (const Error& e) {
    throw Error("running " + s.spec.model_path + ": " + e.what_failed(), e.hint(), s.lane);
  }
  if (const auto bucket = s.buckets.fit(shapes); bucket && *bucket != shapes) {
    std::call_once(s.buckets_learned, [&] { s.learn_buckets(); });
    return s.bucketed->call(s.buckets, given, shapes, *bucket, outputs_on_device,
                            [this](const std::vector<Tensor>& padded, bool on_device) { return run(padded, on_device); });
  }
  bool prices_switch = false;
  const auto session = s.session_for(shapes, &prices_switch);
  const CrashScope running(session->calls.load() == 0 ? s.crash_first_run : s.crash_run, s.crash_record);
  std::call_once(session->primed, [&] { s.prime(*session, given); });
  std::vector<Tensor> out;
  try {
    out = s.graph_mode()  ? s.run_graph(*session, given, outputs_on_device)
          : prices_switch ? s.run_priced(*session, given, outputs_on_device)
                          : s.run_plain(*session, given, outputs_on_device);
  } catch (const Error& e) {
    // A call past the largest bucket ran unpadded, which the model may not take: say that, and the bucket to add.
    const auto over = s.buckets.overflow(shapes);
    if (!over) throw;
    throw Error(e.what_failed() + " (it ran unpadded: " + over->what + ")", over->fix, e.where());
  }
  if (session->calls.fetch_add(1) == 0) {
    const uint64_t now = memory_in_use(s.spec.device);
    session->memory_bytes = now - std::min(session->memory_before, now);
  }
  return out;
}

void Session::Impl::prime(ShapeSession& s, const std::vector<Tensor>& given) {
  // A session's first run pays cuDNN's algorithm search, whose workspace the memory arena keeps:
  // hundreds of MB per session (ResNet-50 on an H100: 430 MB a shape session, 4x its weights). A
  // second run that shrinks the arena hands the unused chunks back, and the caller's run then grows
  // it to the working set it needs, so that its next run is already a steady one. A captured CUDA
  // graph replays fixed addresses, which shrinking would free: graph sessions keep their arena.
  // The plain start of one shape (nothing declared) is left as it was: the shrink and regrow cost
  // it ~20 ms on an H100 (bench/device/shapes2.plan), for memory a single session rarely misses.
  if (graph_mode() || (s.first && declared.empty())) return;
  run_plain(s, given, /*outputs_on_device=*/false);
  if (!arena_shrinks) return;
  try {
    run_plain(s, given, /*outputs_on_device=*/false, /*shrink_arena=*/true);
  } catch (const Error& e) {
    arena_shrinks = false;
    spdlog::debug("{}: ONNX Runtime did not shrink the memory arena ({}); sessions keep their search workspace", lane, e.what());
  }
}

std::vector<Tensor> Session::Impl::run_plain(ShapeSession& shape_session, const std::vector<Tensor>& given, bool outputs_on_device,
                                             bool shrink_arena) {
  Ort::Session& session = shape_session.session;
  std::vector<const char*> in_names;
  std::vector<Ort::Value> in_values;
  bool any_on_gpu = outputs_on_device;
  for (const auto& t : given) {
    any_on_gpu = any_on_gpu || t.on_gpu();
    const Ort::MemoryInfo info = t.on_gpu() ? gpu_memory() : Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    in_names.push_back(t.name.c_str());
    in_values.push_back(Ort::Value::CreateTensor(info, t.data, t.bytes, t.shape.data(), t.shape.size(),
                                                 static_cast<ONNXTensorElementDataType>(t.type)));
  }
  if (std::any_of(given.begin(), given.end(), [](const Tensor& t) { return t.on_gpu(); })) {
    // GPU inputs may have been written on another stream (PyTorch's, CuPy's): let that work finish
    // before ONNX Runtime's stream reads them.
    detail::CudaDriver::instance().synchronize(cuda_ordinal(spec.device));
  }
  Ort::RunOptions run_options;
  if (shrink_arena) {
    const std::string arena = spec.device.is_gpu() ? "gpu:" + std::to_string(cuda_ordinal(spec.device)) : "cpu:0";
    run_options.AddConfigEntry("memory.enable_memory_arena_shrinkage", arena.c_str());
  }
  std::vector<Ort::Value> out_values;
  try {
    if (!any_on_gpu) {
      std::vector<const char*> out_names;
      for (const auto& o : outputs) out_names.push_back(o.name.c_str());
      out_values = session.Run(run_options, in_names.data(), in_values.data(), in_values.size(), out_names.data(), out_names.size());
    } else {
      // Device tensors go through IO binding: ONNX Runtime reads and writes GPU memory in place.
      Ort::IoBinding binding(session);
      for (size_t i = 0; i < in_values.size(); ++i) binding.BindInput(in_names[i], in_values[i]);
      const Ort::MemoryInfo out_info = outputs_on_device ? gpu_memory() : Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
      for (const auto& o : outputs) binding.BindOutput(o.name.c_str(), out_info);
      session.Run(run_options, binding);
      binding.SynchronizeOutputs();
      out_values = binding.GetOutputValues();
    }
  } catch (const Ort::Exception& e) {
    detail::rethrow_run_error(e, spec.model_path, inputs, given, lane);
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < out_values.size(); ++i) {
    auto value = std::make_shared<Ort::Value>(std::move(out_values[i]));
    auto info = value->GetTensorTypeAndShapeInfo();
    Tensor t;
    t.name = outputs[i].name;
    t.type = static_cast<ElementType>(info.GetElementType());
    t.shape = info.GetShape();
    t.bytes = checked_bytes(t.shape, t.type, "output '" + t.name + "'");
    t.data = value->GetTensorMutableRawData();
    t.device = outputs_on_device ? spec.device : Device::cpu();
    t.owner = value;
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Tensor> Session::Impl::run_graph(ShapeSession& g, const std::vector<Tensor>& given, bool outputs_on_device) {
  auto& driver = detail::CudaDriver::instance();
  const int ordinal = cuda_ordinal(spec.device);
  std::lock_guard replay(g.graph_mutex);
  if (g.graph_inputs.empty()) {
    // The buffers this session's graph will be captured on: the inputs of its first call, copied.
    for (const auto& t : given) g.graph_inputs.push_back(Tensor::allocate_on_gpu(t.name, t.type, t.shape, t.bytes, spec.device));
  }
  for (const auto& t : given) {
    const auto fixed = std::find_if(g.graph_inputs.begin(), g.graph_inputs.end(), [&](const Tensor& f) { return f.name == t.name; });
    if (fixed == g.graph_inputs.end()) throw Error("'" + t.name + "' is not an input of this model", "Check the input names", lane);
    if (t.shape != fixed->shape || t.type != fixed->type) {
      throw Error("input '" + t.name + "' has shape " + shape_text(t.shape) + ", and this session's CUDA graph was captured with " +
                      shape_text(fixed->shape),
                  "Feed the captured shape, or let the session keep one graph per shape (shapes.max_sessions above 1)", lane);
    }
    if (t.data == fixed->data) continue;
    if (t.on_gpu()) {
      driver.synchronize(ordinal);  // the input may have been written on another stream (PyTorch's, CuPy's)
      driver.copy_on_device(ordinal, fixed->data, t.data, t.bytes);
    } else {
      driver.copy_to_device(ordinal, fixed->data, t.data, t.bytes);
    }
  }

  const Ort::MemoryInfo gpu = gpu_memory();
  Ort::IoBinding binding(g.session);
  for (const auto& t : g.graph_inputs) {
    binding.BindInput(t.name.c_str(), Ort::Value::CreateTensor(gpu, t.data, t.bytes, t.shape.data(), t.shape.size(),
                                                              static_cast<ONNXTensorElementDataType>(t.type)));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (g.graph_outputs.empty()) {
      binding.BindOutput(outputs[i].name.c_str(), gpu);
    } else {
      binding.BindOutput(outputs[i].name.c_str(), g.graph_outputs[i]);
    }
  }
  try {
    g.session.Run(Ort::RunOptions{nullptr}, binding);
    binding.SynchronizeOutputs();
  } catch (const Ort::Exception& e) {
    detail::rethrow_ort_error(e, "running " + spec.model_path + " as a CUDA graph", lane);
  }
  if (g.graph_outputs.empty()) g.graph_outputs = binding.GetOutputValues();

  // The next run overwrites the graph's output buffers: callers get copies.
  std::vector<Tensor> out;
  for (size_t i = 0; i < g.graph_outputs.size(); ++i) {
    const auto info = g.graph_outputs[i].GetTensorTypeAndShapeInfo();
    const auto type = static_cast<ElementType>(info.GetElementType());
    const std::vector<int64_t> shape = info.GetShape();
    const void* source = g.graph_outputs[i].GetTensorRawData();
    if (outputs_on_device) {
      Tensor t = Tensor::allocate_on_gpu(outputs[i].name, type, shape, checked_bytes(shape, type, "output '" + outputs[i].name + "'"), spec.device);
      driver.copy_on_device(ordinal, t.data, source, t.bytes);
      out.push_back(std::move(t));
    } else {
      Tensor t = host_outputs.allocate(outputs[i].name, type, shape);
      driver.copy_to_host(ordinal, t.data, source, t.bytes);
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::string Session::end_profiling() {
  if (impl_->spec.profile_prefix.empty()) return {};
  Ort::AllocatorWithDefaultOptions allocator;
  return impl_->profiled->session.EndProfilingAllocated(allocator).get();
}

}  // namespace ortfleet
