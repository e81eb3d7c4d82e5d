// Creating a Session's first ONNX Runtime session: its options, the model (or its cache entry)
// opened, the model's inputs and outputs read, and the weights shared with the shape sessions after it.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/crash_report.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/cuda/shared_weights.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/files/model_file.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/files/model_view.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "engine/runtime/ort_errors.hpp"
#include "engine/session/session_impl.hpp"
#include "engine/session/warmup_inputs.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"

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
      const CrashScope loading(library_crash_text("the custom-op library", library));  // a crash names the library, not a node
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

}  // namespace

Ort::SessionOptions Session::Impl::make_options(bool first, const RunConfig* config) {
  const RunConfig& made_with = config != nullptr ? *config : spec.config;
  Ort::SessionOptions so;
  SessionOptions options = made_with.session;
  // Each ONNX Runtime session on the CPU has its own thread pool, whose threads spin after a run:
  // the idle sessions of a model's several shapes then take the cores from the one running (a
  // bucketed stream ran at 2x its steady time on 2 cores). Several sessions do not spin.
  const auto& shapes = spec.config.shapes;
  const bool several = !shapes.declared.empty() || !shapes.batches.empty() || !shapes.buckets.empty() || shapes.policy == ShapePolicy::per_shape;
  if (ep().memory() == nullptr && several && shapes.max_sessions > 1) options.thread_spinning = false;
  apply_session_options(so, options);
  so.SetLogId(lane.c_str());
  // One profile per device: the first session's, which the start-up runs.
  if (first && !spec.profile_prefix.empty()) so.EnableProfiling(spec.profile_prefix.c_str());
  try {
    ProviderAttachment attached = ep().attach(so, spec.device, made_with);
    if (first) provider = std::move(attached);
  } catch (const Error& e) {
    throw e.at(lane);
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
  // What each provider reads once per process, before its first use (CUDA_MODULE_LOADING before cuInit:
  // the fleet sets them earlier still).
  for (const auto* p : detail::execution_providers()) p->apply_environment(spec.config);

  // Phases a fleet has already done up front are not recorded again (they cost nothing here).
  if (!ep().prepared()) {
    auto p = phase(phase::ep_register);
    const std::string path = ep().prepare();
    if (p) p->arg("path", path);
  }
  {
    auto p = ep().device_open(spec.device) ? std::nullopt : phase(phase::cuda_context);
    device_hold = ep().open_device(spec.device);
  }
  memory_at_start = detail::memory_in_use(spec.device);

  Ort::SessionOptions so = make_options(/*first=*/true);
  // Nodes assigned to an EP by name (a crash's work-around, doctor --locate-crash) ran on the CUDA EP
  // again whenever the session also wrote or loaded an optimised copy (1 x H100, ONNX Runtime 1.29,
  // docs/results/2026-11-25/1xH100-shapes/pin_modes.sh): such a model runs from its own graph, without the cache.
  const bool use_cache = spec.config.session.optimized_model_cache.value_or(false) && !spec.config.session.assigns_nodes();
  // The model's graph with its weights left in the file: what a start without an entry hands ONNX
  // Runtime, and the layout the cache's lookup needs (no weight read to learn there is no entry).
  std::optional<detail::ModelView> view;
  if (use_cache) view = view_model();
  auto cache = use_cache ? std::make_unique<detail::CacheUse>(spec.cache_dir, model, spec.device, spec.config, so, view ? view_layout : std::string())
                         : std::make_unique<detail::CacheUse>(model);
  // A cached graph is final: the first session can already use the weights its siblings will share.
  if (cache->hit()) share_weights(so, cache->source());
  if (!cache->hit() && view && !view->model.empty()) weights_view = std::move(view->model);
  tiered = tiers_apply(*cache, view ? std::optional<uint64_t>(view->bytes) : std::nullopt);
  if (tiered) {
    const RunConfig quick = quick_config();
    so = make_options(/*first=*/true, &quick);
    tier.stage = SessionTier::Stage::quick;
    tier.note = "the full session is made once this one is ready";
  }
  // An entry this session writes (inline fill) is saved from ONNX Runtime's graph: its weights stay ONNX Runtime's.
  if (!weights_view.empty() && !cache->writing()) upload_model_weights(so, view->bytes);

  const void* model_data = nullptr;
  size_t model_size = 0;
  // The bytes a session is created from: the view, the caller's, or (map_model) a mapping of `source`.
  // A cached copy is always read from its own file.
  auto model_bytes_of = [&](const std::string& source, bool from_cache) {
    model_data = from_cache ? nullptr : spec.model_data;
    model_size = spec.model_size;
    if (!from_cache && !weights_view.empty()) {
      model_data = weights_view.data();
      model_size = weights_view.size();
      return;
    }
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
  first->memory_before = detail::memory_in_use(spec.device);
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
      if (!cache->hit() && !cache->writing() && weights_view.empty()) detail::rethrow_ort_error(e, "creating the session for " + model, lane);
      // What ortfleet added failed: loading an entry ortfleet wrote, writing one (a full disk, a
      // read-only folder), or the weights left in the model's file (an unusual model, another
      // runtime). Either way the model itself starts, as it is, and the model is not blamed.
      if (cache->hit()) cache->reject(std::string("loading it failed: ") + e.what());
      else if (cache->writing()) cache->abandon(e.what());
      else spdlog::debug("{}: {}: leaving its weights in its file failed ({}); loading the model as it is", lane, model, e.what());
      weights_view.clear();
      shared_weights.reset();
      model_bytes_of(model, /*from_cache=*/false);
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

std::optional<detail::ModelView> Session::Impl::view_model() {
  try {
    auto p = phase(phase::model_read);
    std::unique_ptr<detail::MappedFile> mapped;
    const void* data = spec.model_data;
    uint64_t size = spec.model_size;
    if (data == nullptr) {
      mapped = std::make_unique<detail::MappedFile>(spec.model_path);  // not read in: the walk touches the graph's pages only
      data = mapped->data();
      size = mapped->size();
    }
    detail::ModelView view = detail::view_of(spec.model_path, data, size);
    view_layout = detail::model_layout(spec.model_path, view.layout);
    if (p) {
      p->arg("bytes", std::to_string(view.model.empty() ? size : view.model.size()));
      p->arg("weights_in_place", std::to_string(view.bytes));
    }
    return view;
  } catch (const std::exception& e) {
    // ONNX Runtime will say what is wrong with the file, and the cache keys it by its bytes.
    spdlog::debug("{}: {} is loaded as it is: {}", lane, spec.model_path, e.what());
    return std::nullopt;
  }
}

void Session::Impl::upload_model_weights(Ort::SessionOptions& so, uint64_t bytes) {
  if (!ep().offers(detail::Capability::weight_sharing) || !spec.config.shapes.share_weights || !detail::SharedWeights::fit_twice(spec.device, bytes)) return;
  try {
    share_weights_of(so, spec.model_path);
  } catch (const std::exception& e) {
    shared_weights.reset();
    spdlog::debug("{}: ONNX Runtime uploads the weights of {} itself: {}", lane, spec.model_path, e.what());
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

void Session::Impl::share_weights(Ort::SessionOptions& options, const std::string& optimised_model) {
  if (!ep().offers(detail::Capability::weight_sharing) || !spec.config.shapes.share_weights || max_sessions() == 1) return;
  share_weights_of(options, optimised_model);
}

void Session::Impl::share_weights_of(Ort::SessionOptions& options, const std::string& model) {
  if (!shared_weights) {
    auto upload = phase(phase::weights_upload);
    shared_weights = std::make_unique<detail::SharedWeights>(model, spec.device);
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

}  // namespace ortfleet
