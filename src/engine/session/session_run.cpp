// Running a call: Session::run checks its inputs and picks the session (or pads it to a bucket), then
// the run itself, plain (host or device tensors) or as a captured CUDA graph, and the priming run.
#include <algorithm>
#include <optional>

#include <spdlog/spdlog.h>

#include "base/crash_report.hpp"
#include "engine/cuda/cuda_driver.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/device_tensor.hpp"
#include "engine/runtime/ort_errors.hpp"
#include "engine/session/input_check.hpp"
#include "engine/session/session_impl.hpp"
#include "engine/shapes/shapes.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {

std::vector<Tensor> Session::run(const std::vector<Tensor>& given, bool outputs_on_device) {
  auto& s = *impl_;
  // A device without memory of its own (the CPU) has nowhere else to leave its outputs: host memory.
  outputs_on_device = outputs_on_device && s.ep().memory() != nullptr;
  std::optional<detail::CudaDriver::CurrentContextKeeper> keep;  // the caller's current device stays theirs
  if (s.spec.device.is_cuda()) keep.emplace();
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
  // A tiered start holds its calls while the full session searches its kernels (session_tiers.cpp).
  std::optional<Impl::TierGate::Pass> pass;
  if (s.tiered && !s.tier_settled) pass.emplace(s.tier_gate.enter());
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
    const uint64_t now = detail::memory_in_use(s.spec.device);
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
  // it ~20 ms on an H100 (docs/results/2026-11-23/1xH100-shapes-2/shapes2.plan), for memory a single session rarely misses.
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

bool Session::release_spare_memory() {
  auto& s = *impl_;
  if (s.graph_mode() || !s.arena_shrinks) return false;
  std::shared_ptr<ShapeSession> first;
  {
    std::lock_guard lock(s.mutex);
    for (const auto& session : s.sessions) {
      if (session->first) first = session;
    }
  }
  if (!first) return false;
  try {
    s.run_plain(*first, s.warmup_source->make(s.first_warmup_shape(), 1).tensors, /*outputs_on_device=*/false, /*shrink_arena=*/true);
    return true;
  } catch (const Error& e) {
    spdlog::debug("{}: the memory arena was not shrunk ({})", s.lane, e.what());
    return false;
  }
}

std::vector<Tensor> Session::Impl::run_plain(ShapeSession& shape_session, const std::vector<Tensor>& given, bool outputs_on_device,
                                             bool shrink_arena, Ort::RunOptions* with) {
  Ort::Session& session = shape_session.session;
  std::vector<const char*> in_names;
  std::vector<Ort::Value> in_values;
  bool any_on_gpu = outputs_on_device;
  for (const auto& t : given) {
    any_on_gpu = any_on_gpu || t.on_gpu();
    const Ort::MemoryInfo info = t.on_gpu() ? ort_device_memory() : Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    in_names.push_back(t.name.c_str());
    in_values.push_back(Ort::Value::CreateTensor(info, t.data, t.bytes, t.shape.data(), t.shape.size(),
                                                 static_cast<ONNXTensorElementDataType>(t.type)));
  }
  if (std::any_of(given.begin(), given.end(), [](const Tensor& t) { return t.on_gpu(); })) {
    // GPU inputs may have been written on another stream (PyTorch's, CuPy's): let that work finish
    // before ONNX Runtime's stream reads them.
    detail::device_memory(spec.device).synchronize(spec.device);
  }
  Ort::RunOptions own_options;
  Ort::RunOptions& run_options = with != nullptr ? *with : own_options;
  if (shrink_arena) {
    const std::string arena = ep().device_provider().arena_name(spec.device);
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
      const Ort::MemoryInfo out_info = outputs_on_device ? ort_device_memory() : Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
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
    for (const auto& t : given) g.graph_inputs.push_back(allocate_on_device(t.name, t.type, t.shape, t.bytes, spec.device));
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

  const Ort::MemoryInfo gpu = ort_device_memory();
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
      Tensor t = allocate_on_device(outputs[i].name, type, shape, checked_bytes(shape, type, "output '" + outputs[i].name + "'"), spec.device);
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

}  // namespace ortfleet
