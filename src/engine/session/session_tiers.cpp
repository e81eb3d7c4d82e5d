// A tiered start: the first ONNX Runtime session made quickly (cuDNN's cheapest convolution search), the
// session as configured made beside it once the quick one is ready, and switched in between two runs
// once its outputs on the warm-up inputs agree with the quick one's.
#include <chrono>
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/crash_report.hpp"
#include "base/environment.hpp"
#include "engine/cache/output_compare.hpp"
#include "engine/providers/provider_registry.hpp"
#include "engine/session/session_impl.hpp"
#include "ortfleet/engine/model_file.hpp"

namespace ortfleet {

std::string to_string(SessionTier::Stage stage) {
  switch (stage) {
    case SessionTier::Stage::quick: return "quick";
    case SessionTier::Stage::full: return "full";
    case SessionTier::Stage::refused: return "refused";
    case SessionTier::Stage::none: break;
  }
  return "none";
}

namespace {
/// Host memory the kernel could hand out now (MemAvailable), 0 where it cannot be read.
uint64_t host_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}
}  // namespace

namespace {
/// The config the quick session of a tiered start is made with: on a GPU cuDNN's cheapest convolution
/// search (no heuristics queried, no runtime-compiled plans), on the CPU basic graph optimisation.
RunConfig quick_config_of(const Device& device, const RunConfig& config) {
  RunConfig quick = config;
  if (device.is_cuda()) {
    quick.cuda.conv_algo_search = ConvAlgoSearch::default_algo;
  } else if (quick.session.graph_optimization > GraphOptimization::basic) {
    quick.session.graph_optimization = GraphOptimization::basic;
  }
  return quick;
}
}  // namespace

bool tiered_start_asked(const std::string& model, const Device& device, const RunConfig& config) {
  const TieredStart asked = config.session.tiered_start;
  if (asked == TieredStart::off) return false;
  // Shapes made at start-up, a captured CUDA graph: the quick session would be one of several.
  const auto& shapes = config.shapes;
  if ((device.is_cuda() && config.cuda.cuda_graph) || !shapes.declared.empty() || !shapes.batches.empty() || !shapes.buckets.empty()) return false;
  if (quick_config_of(device, config) == config) return false;  // the configured session is as quick as it gets
  if (asked == TieredStart::on) return true;
  // auto: measured only for a GPU's convolutions, where cuDNN's search is what a quick session saves.
  if (!detail::device_has(device, detail::Capability::kernel_search, config)) return false;
  try {
    const ModelFacts facts = inspect_model(model);
    const auto count = [&facts](const char* op) { return facts.op_counts.count(op) ? facts.op_counts.at(op) : 0; };
    return count("Conv") + count("ConvTranspose") >= kTieredStartMinConvs;
  } catch (const std::exception&) {
    return false;  // the start says what is wrong with the model
  }
}

bool Session::Impl::tiers_apply(const detail::CacheUse& cache, std::optional<uint64_t> view_bytes) const {
  // auto tiers a first start, which only the model cache tells from any other: a start without the
  // cache (--no-model-cache) is ONNX Runtime's own, the plain start ortfleet is measured against.
  if (spec.config.session.tiered_start == TieredStart::automatic && !spec.config.session.optimized_model_cache.value_or(false)) return false;
  // A cached start has its optimised graph, and on a GPU cuDNN's record of the model's choices: it is
  // quick already. A profile measures the one session it makes.
  if (cache.hit() || cache.writing() || !spec.profile_prefix.empty() || !tiered_start_asked(spec.model_path, spec.device, spec.config)) return false;
  // Never two copies of the weights where the device does not hold them. (Read from the model only for
  // a start that would be tiered: the plain start does not read it for this.)
  const uint64_t weight_bytes = view_bytes ? *view_bytes : inspect_model(spec.model_path).initializer_bytes;
  constexpr uint64_t kRoom = uint64_t{512} << 20;
  const bool fits = ep().offers(detail::Capability::weight_sharing) ? detail::SharedWeights::fit_twice(spec.device, weight_bytes) : host_memory_available() > 2 * weight_bytes + kRoom;
  if (!fits) spdlog::debug("{}: no tiered start: the device does not hold {} MB of weights twice", lane, weight_bytes >> 20);
  return fits;
}

RunConfig Session::Impl::quick_config() const { return quick_config_of(spec.device, spec.config); }

void Session::Impl::begin_full_session() {
  if (!tiered) return;
  std::call_once(full_started, [this] { full_maker = std::thread([this] { make_full_session(); }); });
}

void Session::Impl::make_full_session() {
  const auto began = std::chrono::steady_clock::now();
  std::shared_ptr<ShapeSession> quick;
  {
    std::lock_guard lock(mutex);
    for (const auto& s : sessions) {
      if (s->first) quick = s;
    }
  }
  auto full = std::make_shared<ShapeSession>();
  full->first = true;
  std::string refused;
  try {
    auto p = phase(phase::session_full);
    const CrashScope creating(crash_creating, crash_record);
    Ort::SessionOptions so = make_options(/*first=*/false);
    if (shared_weights) shared_weights->add_to(so);
    const auto creating_at = std::chrono::steady_clock::now();
    // The model's view while it lasts, else its file (the caller's bytes are gone after ready).
    full->session = open(spec.model_path, weights_view.empty() ? nullptr : weights_view.data(), weights_view.size(), so);
    full->create_ms = ms_since(creating_at);
    const auto given = warmup_source->make(first_warmup_shape(), /*seed=*/1).tensors;
    {
      std::lock_guard lock(full_run_mutex);
      full_run_options = Ort::RunOptions();
      if (stopping) full_run_options.SetTerminate();
    }
    std::vector<Tensor> got;
    {
      // The job's calls wait while this run searches cuDNN's kernels: the search times kernels on the
      // GPU, and beside the quick session's calls it took past 45 s where it takes 18 s alone (a
      // 2,000-convolution zoo on an H100), the calls themselves running 4x slower than after the switch
      // (docs/results/2026-12-06/1xH100-final). Held once, for what a start without tiers spends before
      // its first output.
      tier_gate.close();
      struct Reopen {
        TierGate& gate;
        ~Reopen() { gate.open(); }
      } reopen{tier_gate};
      const CrashScope first_run(crash_first_run, crash_record);
      got = run_plain(*full, given, /*outputs_on_device=*/false, /*shrink_arena=*/false, &full_run_options);
    }
    if (quick == nullptr) {
      refused = "the quick session was evicted";
    } else {
      const auto want = run_on(*quick, given);
      for (size_t i = 0; i < want.size() && refused.empty() && i < got.size(); ++i) {
        refused = detail::output_difference(want[i], got[i], detail::Agreement::other_device);
      }
      if (refused.empty() && detail::env_on(detail::EnvVar::test_tier_disagree).value_or(false)) refused = "told to disagree (a test)";
    }
    if (p) {
      p->arg("create_ms", fmt::format("{:.0f}", full->create_ms));
      p->arg("outcome", refused.empty() ? "switched" : "refused");
    }
  } catch (const std::exception& e) {
    refused = stopping ? "the session was closed first" : Error::from(e).what_failed();
  }
  const double full_ms = ms_since(began);
  const bool switched = refused.empty() && !stopping;
  // Said before anyone waiting hears of it.
  if (switched) {
    spdlog::info("{}: {}: the full session took over from the quick one {:.1f} s after ready (outputs agree)", lane, spec.model_path, full_ms / 1000);
  } else if (!stopping) {
    spdlog::warn("{}: {}: the quick session keeps serving: the full one was not switched in ({})", lane, spec.model_path, refused);
  }
  if (timeline != nullptr && !stopping) {
    const int64_t now = monotonic_ns();
    timeline->add({phase::session_switch, lane, now, now, 0, {{"outcome", switched ? "switched" : "refused"}}});
  }
  tier_settled = true;
  {
    std::lock_guard lock(mutex);
    tier.full_ms = full_ms;
    if (switched) {
      for (auto& s : sessions) {
        if (s != quick) continue;
        // Between two runs: a run already on the quick session holds it until it ends.
        full->signature = quick->signature;
        full->last_signature = quick->last_signature;
        full->declared = quick->declared;
        full->last_used = quick->last_used;
        s = full;
      }
      tier.stage = SessionTier::Stage::full;
      tier.note = fmt::format("the full session switched in {:.1f} s after ready", full_ms / 1000);
    } else {
      tier.stage = SessionTier::Stage::refused;
      tier.note = refused;
    }
  }
  tier_changed.notify_all();
}

Session::Impl::TierGate::Pass::~Pass() {
  if (gate_ == nullptr) return;
  std::lock_guard lock(gate_->m_);
  if (--gate_->active_ == 0) gate_->changed_.notify_all();
}

Session::Impl::TierGate::Pass Session::Impl::TierGate::enter() {
  std::unique_lock lock(m_);
  changed_.wait(lock, [this] { return !closed_; });
  ++active_;
  return Pass(this);
}

void Session::Impl::TierGate::close() {
  std::unique_lock lock(m_);
  closed_ = true;
  changed_.wait(lock, [this] { return active_ == 0; });
}

void Session::Impl::TierGate::open() {
  std::lock_guard lock(m_);
  closed_ = false;
  changed_.notify_all();
}

void Session::Impl::stop_full_session() {
  stopping = true;
  if (!full_maker.joinable()) return;
  {
    std::lock_guard lock(full_run_mutex);  // its creation cannot be stopped; its first run (cuDNN's search) can
    if (full_run_options) full_run_options.SetTerminate();
  }
  full_maker.join();
}

SessionTier Session::tier() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->tier;
}

SessionTier Session::wait_for_full_session(double timeout_s) const {
  std::unique_lock lock(impl_->mutex);
  impl_->tier_changed.wait_for(lock, std::chrono::duration<double>(timeout_s),
                               [this] { return impl_->tier.stage != SessionTier::Stage::quick; });
  return impl_->tier;
}

}  // namespace ortfleet
