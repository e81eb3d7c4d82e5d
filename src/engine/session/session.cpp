// The Session's face: made (with what a crash inside ONNX Runtime prints), released, asked about,
// warmed up, and its profile ended. What each step does lives in the session_*.cpp files beside it.
#include "ortfleet/engine/session.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "base/crash_report.hpp"
#include "engine/cache/crash_records.hpp"
#include "engine/cuda/cudnn_choices.hpp"
#include "engine/session/session_impl.hpp"
#include "engine/session/warmup_inputs.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {

Session::Session(const SessionSpec& spec, Timeline* timeline) : impl_(std::make_unique<Impl>()) {
  impl_->spec = spec;
  impl_->timeline = timeline;
  impl_->lane = spec.device.to_string();
  impl_->stack = detail::provider_stack(spec.device, spec.config);
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
  if (impl_) impl_->stop_full_session();
  if (impl_ && impl_->device_hold) {
    // Sessions, their graph buffers and the weights they share go before the context they live in.
    impl_->sessions.clear();
    impl_->bucketed->release_device_buffers();
    impl_->profiled.reset();
    impl_->shared_weights.reset();
    impl_->device_hold.reset();
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
  const uint64_t now = detail::memory_in_use(impl_->spec.device);
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

namespace {
/// cuDNN's work in one warm-up run, where libortfleet_cudnn.so is loaded (a GPU worker): what profile
/// splits the first inference into.
void add_cudnn_work(Timeline::Scope& p, const detail::CudnnWork& w) {
  if (w.queries == 0 && w.plan_build_ms < 0.05) return;
  p.arg("cudnn_heuristics_ms", fmt::format("{:.1f}", w.heuristics_ms));
  p.arg("cudnn_engine_configs_ms", fmt::format("{:.1f}", w.engine_configs_ms));
  p.arg("cudnn_plan_build_ms", fmt::format("{:.1f}", w.plan_build_ms));
  p.arg("cudnn_queries", std::to_string(w.queries));
  p.arg("cudnn_replayed", std::to_string(w.replayed));
  p.arg("cudnn_recorded", std::to_string(w.recorded));
}
}  // namespace

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
        const auto cudnn_before = detail::cudnn_work();
        run(inputs.tensors, /*outputs_on_device=*/s.graph_mode());
        if (s.first_run_ms == 0) s.first_run_ms = ms_since(start);
        if (p && cudnn_before) add_cudnn_work(*p, *detail::cudnn_work() - *cudnn_before);
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
  s.begin_full_session();
}

std::string Session::end_profiling() {
  if (impl_->spec.profile_prefix.empty()) return {};
  Ort::AllocatorWithDefaultOptions allocator;
  return impl_->profiled->session.EndProfilingAllocated(allocator).get();
}

}  // namespace ortfleet
