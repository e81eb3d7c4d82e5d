#include "ortfleet/engine/session.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "engine/cuda_driver.hpp"
#include "engine/cuda_provider.hpp"
#include "engine/file_lock.hpp"
#include "engine/cuda_environment.hpp"
#include "engine/mapped_file.hpp"
#include "engine/ort_errors.hpp"
#include "engine/ort_environment.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/model_file.hpp"

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

// The optimised copy keeps every initializer of at least this size in a side file: ONNX Runtime then
// maps the weights instead of parsing them out of the protobuf (the transformer's 1.27 GB: 12.2 s of
// session creation on the CPU without, 4.4 s with, measured with `ortfleet start`).
constexpr const char* kExternalInitializerMinBytes = "1024";

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

struct Session::Impl {
  SessionSpec spec;
  Timeline* timeline = nullptr;
  std::string lane;
  std::unique_ptr<detail::MappedFile> mapping;
  Ort::Session session{nullptr};
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  ProviderAttachment provider;
  bool used_cache = false;
  bool retained_context = false;
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> int_ranges;
  // A captured CUDA graph replays fixed device addresses: the inputs it reads and the outputs it
  // writes stay allocated, at the same place, for the session's life.
  std::vector<Tensor> graph_inputs;
  std::vector<Ort::Value> graph_outputs;  // filled by the first run, before ONNX Runtime captures

  std::optional<Timeline::Scope> phase(const char* name) {
    if (timeline == nullptr) return std::nullopt;
    return timeline->scope(name, lane);
  }

  Ort::MemoryInfo gpu_memory() const {
    return Ort::MemoryInfo("Cuda", OrtArenaAllocator, spec.device.index, OrtMemTypeDefault);
  }

  void create();
  void read_metadata();
  std::vector<Tensor> run_graph(const std::vector<Tensor>& given, bool outputs_on_device);
  /// Throws when `t` is a GPU tensor of another device than this session's.
  void check_device_of(const Tensor& t) const {
    if (t.on_gpu() && t.device != spec.device) {
      throw Error("input '" + t.name + "' lives on " + t.device.to_string() + ", not on this session's device",
                  "Copy it to " + lane + " first", lane);
    }
  }
};

namespace {

/// `bytes` of device memory on `device`, freed with the last copy of the tensor.
Tensor allocate_on_gpu(const std::string& name, ElementType type, const std::vector<int64_t>& shape, size_t bytes,
                       const Device& device) {
  const int ordinal = device.index;
  void* memory = detail::CudaDriver::instance().allocate(ordinal, bytes);
  Tensor t = Tensor::borrow(name, type, shape, memory, device);
  t.bytes = bytes;
  t.owner = std::shared_ptr<void>(memory, [ordinal](void* p) { detail::CudaDriver::instance().release(ordinal, p); });
  return t;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

void Session::Impl::create() {
  const std::string& model = spec.model_path;
  validate_model_file(model);
  load_runtime();
  Ort::Env& env = detail::ort_env();
  // Only effective before the process's first CUDA call (the fleet sets them before cuInit).
  detail::apply_cuda_environment(spec.config);

  Ort::SessionOptions so;
  apply_session_options(so, spec.config.session);
  so.SetLogId(lane.c_str());
  if (!spec.profile_prefix.empty()) so.EnableProfiling(spec.profile_prefix.c_str());

  if (spec.device.is_gpu()) {
    // Phases a fleet has already done up front are not recorded again (they cost nothing here).
    if (!cuda_provider_prepared()) {
      auto p = phase(phase::ep_register);
      const auto& state = prepare_cuda_provider();
      if (p) p->arg("path", state.path);
    }
    auto& driver = detail::CudaDriver::instance();
    {
      // Creating the primary context here, outside ONNX Runtime, makes its cost visible and lets a
      // fleet create the contexts of several GPUs in parallel.
      auto p = driver.holds_context(spec.device.index) ? std::nullopt : phase(phase::cuda_context);
      driver.retain_primary_context(spec.device.index);
      retained_context = true;
    }
    try {
      provider = detail::attach_cuda(so, spec.device.index, spec.config.cuda);
    } catch (const Error& e) {
      throw e.at(lane);
    }
  } else {
    provider.path = "cpu";
  }

  // The optimised-model cache: on a hit, load the optimised copy with optimisation off; on a miss,
  // have ONNX Runtime save its optimised graph as the new entry.
  std::string source = model;
  std::string cache_entry;
  std::string cache_partial;
  detail::FileLock cache_writer;
  const bool use_cache = spec.config.session.optimized_model_cache.value_or(false);
  if (use_cache) {
    const ModelCache cache(spec.cache_dir);
    cache_entry = cache.entry_path(model, spec.device, spec.config);
    std::error_code ec;
    if (fs::exists(cache_entry, ec)) {
      source = cache_entry;
      used_cache = true;
      so.SetGraphOptimizationLevel(ORT_DISABLE_ALL);
    } else if (fs::create_directories(cache.dir(), ec), cache_writer.try_lock(cache_entry + ".lock")) {
      // One process writes an entry; others starting the same model meanwhile skip the cache.
      cache_partial = cache_entry + ".partial-" + std::to_string(::getpid());
      so.SetOptimizedModelFilePath(cache_partial.c_str());
      // The data file is named after the final entry: the rename below moves only the .onnx file.
      so.AddConfigEntry("session.optimized_model_external_initializers_file_name",
                        (fs::path(cache_entry).filename().string() + ".data").c_str());
      so.AddConfigEntry("session.optimized_model_external_initializers_min_size_in_bytes", kExternalInitializerMinBytes);
    }
  }

  const void* model_data = spec.model_data;
  size_t model_size = spec.model_size;
  if (used_cache) model_data = nullptr;  // the cached copy is read from its own file
  if (model_data == nullptr && spec.map_model) {
    auto p = phase(phase::model_read);
    mapping = std::make_unique<detail::MappedFile>(source, /*populate=*/true);
    if (p) p->arg("bytes", std::to_string(mapping->size()));
    model_data = mapping->data();
    model_size = mapping->size();
  }
  if (model_data != nullptr) {
    // External data files are found relative to the model's folder, which bytes in memory lack.
    const std::string folder = fs::absolute(source).parent_path().string();
    so.AddConfigEntry("session.model_external_initializers_file_folder_path", folder.c_str());
  }

  {
    auto p = phase(phase::session_create);
    if (p) {
      p->arg("provider", provider.path);
      if (use_cache) p->arg("model_cache", used_cache ? "hit" : "miss");
    }
    try {
      session = model_data != nullptr ? Ort::Session(env, model_data, model_size, so) : Ort::Session(env, source.c_str(), so);
    } catch (const Ort::Exception& e) {
      std::error_code ec;
      if (!cache_partial.empty()) fs::remove(cache_partial, ec);
      detail::rethrow_ort_error(e, "creating the session for " + model, lane);
    }
  }
  if (!cache_partial.empty()) {
    std::error_code ec;
    fs::rename(cache_partial, cache_entry, ec);  // atomic: readers see a whole entry or none
    if (ec) fs::remove(cache_partial, ec);
  }
  read_metadata();
}

void Session::Impl::read_metadata() {
  Ort::AllocatorWithDefaultOptions allocator;
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    inputs.push_back(spec_of(session.GetInputNameAllocated(i, allocator).get(), session.GetInputTypeInfo(i)));
  }
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    outputs.push_back(spec_of(session.GetOutputNameAllocated(i, allocator).get(), session.GetOutputTypeInfo(i)));
  }
  // Integer input ranges recorded by the model's author (e.g. `synth transformer` records its
  // vocabulary) keep generated warm-up inputs valid: token ids must index the embedding table.
  auto metadata = session.GetModelMetadata();
  const std::string prefix = "ortfleet.input_range.";
  for (const auto& key : metadata.GetCustomMetadataMapKeysAllocated(allocator)) {
    const std::string k = key.get();
    if (k.rfind(prefix, 0) != 0) continue;
    auto value = metadata.LookupCustomMetadataMapAllocated(k.c_str(), allocator);
    long long lo = 0;
    long long hi = 0;
    if (value && std::sscanf(value.get(), "%lld,%lld", &lo, &hi) == 2 && lo <= hi) {
      int_ranges.push_back({k.substr(prefix.size()), {lo, hi}});
    }
  }
}

Session::Session(const SessionSpec& spec, Timeline* timeline) : impl_(std::make_unique<Impl>()) {
  impl_->spec = spec;
  impl_->timeline = timeline;
  impl_->lane = spec.device.to_string();
  impl_->create();
}

Session::~Session() {
  if (impl_ && impl_->retained_context) {
    impl_->graph_outputs.clear();
    impl_->session = Ort::Session(nullptr);
    impl_->graph_inputs.clear();
    detail::CudaDriver::instance().release_primary_context(impl_->spec.device.index);
  }
}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const Device& Session::device() const { return impl_->spec.device; }
const std::vector<TensorSpec>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorSpec>& Session::outputs() const { return impl_->outputs; }
const ProviderAttachment& Session::provider() const { return impl_->provider; }
bool Session::used_model_cache() const { return impl_->used_cache; }

void Session::warm_up(int runs, uint64_t seed) {
  auto& s = *impl_;
  auto inputs = random_inputs(s.inputs, seed, s.spec.dynamic_dim, s.int_ranges);
  const bool graph = s.spec.device.is_gpu() && s.spec.config.cuda.cuda_graph;
  if (graph) {
    // The warm-up inputs become the buffers the captured graph reads; later runs copy into them.
    auto& driver = detail::CudaDriver::instance();
    for (auto& t : inputs) {
      Tensor on_gpu = allocate_on_gpu(t.name, t.type, t.shape, t.bytes, s.spec.device);
      driver.copy_to_device(s.spec.device.index, on_gpu.data, t.data, t.bytes);
      t = std::move(on_gpu);
    }
    s.graph_inputs = inputs;
    // ONNX Runtime's CUDA EP runs the graph normally once or twice (to size its memory) and captures
    // it on the next run: three runs make "ready" include the capture.
    runs = std::max(runs, 3);
  }
  for (int i = 0; i < runs; ++i) {
    auto p = s.phase(phase::warmup);
    if (p) p->arg("run", std::to_string(i + 1));
    run(inputs, /*outputs_on_device=*/graph);
  }
}

std::vector<Tensor> Session::Impl::run_graph(const std::vector<Tensor>& given, bool outputs_on_device) {
  auto& driver = detail::CudaDriver::instance();
  const int ordinal = spec.device.index;
  if (given.size() != graph_inputs.size()) {
    throw Error("got " + std::to_string(given.size()) + " inputs, the model has " + std::to_string(graph_inputs.size()),
                "Give every input of the model", lane);
  }
  for (const auto& t : given) {
    const auto fixed = std::find_if(graph_inputs.begin(), graph_inputs.end(), [&](const Tensor& g) { return g.name == t.name; });
    if (fixed == graph_inputs.end()) throw Error("'" + t.name + "' is not an input of this model", "Check the input names", lane);
    if (t.shape != fixed->shape || t.type != fixed->type) {
      throw Error("input '" + t.name + "' has shape " + shape_text(t.shape) + ", and this session's CUDA graph was captured with " +
                      shape_text(fixed->shape),
                  "Feed the captured shape, or start without cuda_graph to serve varying shapes", lane);
    }
    if (t.data == fixed->data) continue;
    check_device_of(t);
    if (t.on_gpu()) {
      driver.synchronize(ordinal);  // the input may have been written on another stream (PyTorch's, CuPy's)
      driver.copy_on_device(ordinal, fixed->data, t.data, t.bytes);
    } else {
      driver.copy_to_device(ordinal, fixed->data, t.data, t.bytes);
    }
  }

  const Ort::MemoryInfo gpu = gpu_memory();
  Ort::IoBinding binding(session);
  for (const auto& t : graph_inputs) {
    binding.BindInput(t.name.c_str(), Ort::Value::CreateTensor(gpu, t.data, t.bytes, t.shape.data(), t.shape.size(),
                                                              static_cast<ONNXTensorElementDataType>(t.type)));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (graph_outputs.empty()) {
      binding.BindOutput(outputs[i].name.c_str(), gpu);
    } else {
      binding.BindOutput(outputs[i].name.c_str(), graph_outputs[i]);
    }
  }
  try {
    session.Run(Ort::RunOptions{nullptr}, binding);
    binding.SynchronizeOutputs();
  } catch (const Ort::Exception& e) {
    detail::rethrow_ort_error(e, "running " + spec.model_path + " as a CUDA graph", lane);
  }
  if (graph_outputs.empty()) graph_outputs = binding.GetOutputValues();

  // The next run overwrites the graph's output buffers: callers get copies.
  std::vector<Tensor> out;
  for (size_t i = 0; i < graph_outputs.size(); ++i) {
    const auto info = graph_outputs[i].GetTensorTypeAndShapeInfo();
    const auto type = static_cast<ElementType>(info.GetElementType());
    const std::vector<int64_t> shape = info.GetShape();
    const void* source = graph_outputs[i].GetTensorRawData();
    if (outputs_on_device) {
      const size_t bytes = info.GetElementCount() * element_size(type);
      Tensor t = allocate_on_gpu(outputs[i].name, type, shape, bytes, spec.device);
      driver.copy_on_device(ordinal, t.data, source, t.bytes);
      out.push_back(std::move(t));
    } else {
      Tensor t = Tensor::host_copy(outputs[i].name, type, shape, nullptr);
      driver.copy_to_host(ordinal, t.data, source, t.bytes);
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs, bool outputs_on_device) {
  auto& s = *impl_;
  if (!s.graph_inputs.empty()) return s.run_graph(inputs, outputs_on_device);
  std::vector<const char*> in_names;
  std::vector<Ort::Value> in_values;
  bool any_on_gpu = outputs_on_device;
  for (const auto& t : inputs) {
    s.check_device_of(t);
    any_on_gpu = any_on_gpu || t.on_gpu();
    const Ort::MemoryInfo info = t.on_gpu() ? s.gpu_memory() : Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    in_names.push_back(t.name.c_str());
    in_values.push_back(Ort::Value::CreateTensor(info, t.data, t.bytes, t.shape.data(), t.shape.size(),
                                                 static_cast<ONNXTensorElementDataType>(t.type)));
  }
  if (any_on_gpu && std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.on_gpu(); })) {
    // GPU inputs may have been written on another stream (PyTorch's, CuPy's): let that work finish
    // before ONNX Runtime's stream reads them.
    detail::CudaDriver::instance().synchronize(s.spec.device.index);
  }
  std::vector<Ort::Value> out_values;
  try {
    if (!any_on_gpu) {
      std::vector<const char*> out_names;
      for (const auto& o : s.outputs) out_names.push_back(o.name.c_str());
      out_values = s.session.Run(Ort::RunOptions{nullptr}, in_names.data(), in_values.data(), in_values.size(),
                                 out_names.data(), out_names.size());
    } else {
      // Device tensors go through IO binding: ONNX Runtime reads and writes GPU memory in place.
      Ort::IoBinding binding(s.session);
      for (size_t i = 0; i < in_values.size(); ++i) binding.BindInput(in_names[i], in_values[i]);
      const Ort::MemoryInfo out_info = outputs_on_device ? s.gpu_memory() : Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
      for (const auto& o : s.outputs) binding.BindOutput(o.name.c_str(), out_info);
      s.session.Run(Ort::RunOptions{nullptr}, binding);
      binding.SynchronizeOutputs();
      out_values = binding.GetOutputValues();
    }
  } catch (const Ort::Exception& e) {
    detail::rethrow_ort_error(e, "running " + s.spec.model_path, s.lane);
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < out_values.size(); ++i) {
    auto value = std::make_shared<Ort::Value>(std::move(out_values[i]));
    auto info = value->GetTensorTypeAndShapeInfo();
    Tensor t;
    t.name = s.outputs[i].name;
    t.type = static_cast<ElementType>(info.GetElementType());
    t.shape = info.GetShape();
    t.bytes = static_cast<size_t>(t.element_count()) * element_size(t.type);
    t.data = value->GetTensorMutableRawData();
    t.device = outputs_on_device ? s.spec.device : Device::cpu();
    t.owner = value;
    out.push_back(std::move(t));
  }
  return out;
}

std::string Session::end_profiling() {
  if (impl_->spec.profile_prefix.empty()) return {};
  Ort::AllocatorWithDefaultOptions allocator;
  return impl_->session.EndProfilingAllocated(allocator).get();
}

}  // namespace ortfleet
