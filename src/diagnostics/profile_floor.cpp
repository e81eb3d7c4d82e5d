// The floor of a start: what each of its terms (process, runtime and CUDA, the weights, the first
// inference) would cost at best on this machine, from the machine's speeds measured beside it.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/cuda/cuda_driver.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/engine/cuda_devices.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

void add_floor(ProfileReport& r, const MachineSpeeds& speeds) {
  r.speeds = speeds;
  r.floor.clear();
  auto phase_ms = [&](const char* name) {
    double ms = 0;
    for (const auto& p : r.phases) ms += p.name == name ? p.ms : 0;
    return ms;
  };
  const auto events = r.timeline.events();
  auto event_ms = [&](const char* name) {
    for (const auto& e : events) {
      if (e.name == name) return e.duration_ms();
    }
    return 0.0;
  };
  const TimelineEvent* create = nullptr;
  for (const auto& e : events) create = create == nullptr && e.name == phase::session_create ? &e : create;

  // Process: exec to main is the price of any process; ortfleet's own set-up is not.
  FloorTerm process{"process", "process start", phase_ms("process.start"), phase_ms("process.start") + phase_ms("tool.setup"),
                    "exec to main, as measured"};

  // Runtime: loading ONNX Runtime and registering the EP can overlap cuInit and the context, so the
  // floor is the longer of the two; measured is the span they took.
  FloorTerm runtime{"runtime", r.on_gpu ? "runtime, EP and CUDA context" : "runtime load", 0, 0, ""};
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  for (const auto& e : events) {
    if (create != nullptr && e.end_ns > create->start_ns) continue;
    if (e.name != phase::runtime_load && e.name != phase::ep_library_load && e.name != phase::ep_register &&
        e.name != phase::cuda_init && e.name != phase::cuda_context) continue;
    first_ns = first_ns == 0 ? e.start_ns : std::min(first_ns, e.start_ns);
    last_ns = std::max(last_ns, e.end_ns);
  }
  runtime.measured_ms = static_cast<double>(last_ns - first_ns) / 1e6;
  const double ort_ms = event_ms(phase::runtime_load);
  if (!r.on_gpu) {
    runtime.floor_ms = ort_ms;
    runtime.basis = "ONNX Runtime's library load, as measured";
  } else {
    // A start that ran cuInit on its own (the fleet's) has it on the timeline; a sequential one ran
    // it inside the EP's registration, so cuInit as measured here is taken out of that.
    const bool own_init = event_ms(phase::cuda_init) > 0;
    const double init_ms = own_init ? event_ms(phase::cuda_init) : speeds.cuda_init_ms;
    const double context_ms = event_ms(phase::cuda_context) > 0 ? event_ms(phase::cuda_context) : speeds.cuda_context_ms;
    const double ep_ms = event_ms(phase::ep_library_load) +
                         std::max(0.0, event_ms(phase::ep_register) - (own_init ? 0.0 : speeds.cuda_init_ms));
    const double ep_side = ort_ms + ep_ms;
    const double cuda_side = init_ms + context_ms;
    runtime.floor_ms = std::max(ep_side, cuda_side);
    runtime.basis = fmt::format("max(ONNX Runtime + EP load and registration {:.0f} ms, cuInit {:.0f} ms + context {:.0f} ms){}",
                                ep_side, init_ms, context_ms, own_init ? "" : " (cuInit measured apart)");
  }

  // Session: the weights moved once at the machine's measured speed; the rest of session creation
  // (graph work, kernels, planning) has no floor of its own.
  FloorTerm session{"session", "session creation (weights)", 0, event_ms(phase::model_read) + event_ms(phase::weights_upload) + event_ms(phase::session_create), ""};
  const double gb = static_cast<double>(r.initializer_bytes) / 1e9;
  const double speed = r.on_gpu ? speeds.upload_gb_per_s : speeds.read_gb_per_s;
  if (speed > 0) {
    session.floor_ms = gb / speed * 1e3;
    session.basis = fmt::format("{:.3f} GB of weights at {:.1f} GB/s ({})", gb, speed,
                                r.on_gpu ? "pinned host-to-device copy" : "the model's files read from the page cache");
  } else {
    session.basis = "bandwidth not measured: no floor for the weights";
  }

  // Inference: one call at its steady latency, plus the convolution search the first call of the
  // chosen mode does (measured: it is what the mode needs, not overhead).
  double first_ms = 0;
  for (const auto& e : events) {
    if (e.name == phase::warmup && (!e.args.count("run") || e.args.at("run") == "1")) {
      first_ms = e.duration_ms();
      break;
    }
  }
  const double search_ms = r.on_gpu ? std::max(0.0, r.conv_first_ms - r.conv_steady_ms) : 0.0;
  FloorTerm inference{"inference", "first inference", r.steady_p50_ms + search_ms, first_ms,
                      search_ms > 0 ? fmt::format("steady p50 + conv first calls {:.0f} ms", search_ms) : "steady p50"};

  r.floor = {process, runtime, session, inference};
  r.floor_ms = 0;
  for (const auto& t : r.floor) r.floor_ms += t.floor_ms;
}

MachineSpeeds measure_machine_speeds(const Device& device, const std::string& model, uint64_t weight_bytes) {
  MachineSpeeds speeds;
  try {
    if (device.is_cuda()) {
      auto& driver = detail::CudaDriver::instance();
      if (!driver.ok()) return speeds;
      speeds.cuda_init_ms = driver.init_ms();
      const int ordinal = cuda_ordinal(device);
      const bool made = driver.holds_context(ordinal);
      const auto start = std::chrono::steady_clock::now();
      const detail::CudaDriver::PrimaryContext context(ordinal);
      if (!made) speeds.cuda_context_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      // Large enough to reach the bus's speed, small enough to fit beside anything else on the GPU.
      const size_t bytes = std::clamp<uint64_t>(weight_bytes, uint64_t{64} << 20, uint64_t{512} << 20);
      speeds.upload_gb_per_s = driver.pinned_upload_gb_per_s(ordinal, bytes);
      return speeds;
    }
    // The CPU's weights term: the model's files read again, as ONNX Runtime reads them after the start.
    std::vector<std::string> files = {model};
    if (fs::exists(model + ".data")) files.push_back(model + ".data");
    std::vector<char> buffer(size_t{4} << 20);
    uint64_t bytes = 0;
    double seconds = 0;
    for (int pass = 0; pass < 2; ++pass) {  // the first pass brings them into the page cache
      bytes = 0;
      const auto start = std::chrono::steady_clock::now();
      for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
          bytes += static_cast<uint64_t>(in.gcount());
        }
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    speeds.read_gb_per_s = seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0;
  } catch (const std::exception& e) {
    spdlog::debug("could not measure the machine's speeds for the floor: {}", e.what());
  }
  return speeds;
}

}  // namespace ortfleet
