// Which ONNX Runtime session serves a call's shapes: the declared shapes made at start-up, a shape
// session made (or one evicted) on demand, the shared session's switches priced, the buckets learned.
#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/crash_report.hpp"
#include "engine/cache/output_compare.hpp"
#include "engine/runtime/ort_errors.hpp"
#include "engine/session/session_impl.hpp"
#include "engine/session/tensor_padding.hpp"
#include "engine/shapes/buckets.hpp"
#include "engine/shapes/shape_policy.hpp"
#include "engine/shapes/shapes.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {

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

std::shared_ptr<ShapeSession> Session::Impl::make_shape_session(const std::string& signature) {
  auto s = std::make_shared<ShapeSession>();
  s->signature = signature;
  s->memory_before = detail::memory_in_use(spec.device);
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
    // Said where new shapes cost (detail::shape_advice): on the CPU a stream of them costs nothing to warn of.
    if (auto advice = detail::new_shapes_cost(spec.device) ? traffic.advice_once(static_cast<size_t>(max_sessions()), detail::padding_refusal(spec.model_path))
                                                           : std::nullopt) {
      spdlog::warn("{}: {}: {}", lane, spec.model_path, *advice);
    }
    // A declared shape always has a session of its own; so has every shape of a captured CUDA graph.
    if (policy != ShapePolicy::per_shape && !is_declared(signature) && !graph_mode()) {
      const auto& shared = sessions.front();
      const bool own = policy == ShapePolicy::measured && ep().offers(detail::Capability::kernel_search) && static_cast<int>(sessions.size()) < max_sessions() &&
                       traffic.pays_for_session(signature, shared->last_signature != signature, costs);
      if (!own) {
        if (prices_switch != nullptr) {
          *prices_switch = policy == ShapePolicy::measured && ep().offers(detail::Capability::kernel_search) && !costs && returning && max_sessions() > 1 &&
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

void Session::Impl::learn_buckets() {
  if (buckets.empty()) return;
  auto p = phase(phase::buckets_learn);
  const auto shapes = buckets.shapes(inputs, spec.dynamic_dim, kMaxShapeSessions);
  // Padded batches alone have no bucket shapes of their own: the declared batches are theirs.
  const InputShapes base_shape = shapes.empty() ? first_warmup_shape() : shapes.front();
  const auto base = session_for(base_shape);
  // Shapes other than a declared one run (unpadded) on the first bucket's session, which runs its own
  // shape again afterwards, so that its next call is a steady one.
  bool disturbed = false;
  const auto run_shape = [&](const InputShapes& shape, const std::vector<Tensor>& given) {
    const bool own = is_declared(to_string(shape));
    // A captured CUDA graph runs its own shape only: another shape gets a session of its own, not kept.
    const auto session = own ? session_for(shape) : graph_mode() ? make_shape_session(to_string(shape)) : base;
    disturbed = disturbed || (!own && !graph_mode());
    return run_on(*session, given);
  };
  std::vector<std::vector<int64_t>> at_base;  // the outputs' shapes at the first bucket shape
  buckets.learn(shapes, outputs, [&](const InputShapes& shape) {
    std::vector<std::vector<int64_t>> out;
    for (const auto& t : run_shape(shape, warmup_source->make(shape, /*seed=*/1).tensors)) out.push_back(t.shape);
    if (shape == shapes.front()) at_base = out;
    return out;
  });
  check_padding_keeps_outputs(base_shape, run_shape);
  if (disturbed) run_on(*base, warmup_source->make(base_shape, 1).tensors);
  if (shapes.empty()) return;
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

void Session::Impl::check_padding_keeps_outputs(const InputShapes& base_shape, const RunShape& run_shape) {
  // The bucket shape's session runs other kernels than the real shape's (cuDNN chooses per shape,
  // TF32 on a GPU): padding may change the outputs as much as running them on another device would
  // (the crash locator's tolerance), the same on every device, so that a model's buckets are refused or
  // kept alike on the CPU and on a GPU; relative to each output's own scale, since made-up inputs may
  // leave it far below 1 (PaddleOCR's detector: probabilities near 0 that padding moved by as much as
  // they are, and by up to 1 on an image of text).
  const auto agreement = detail::Agreement::other_shape;
  const auto& pad_values = spec.config.shapes.pad_values;
  // The outputs that differ, cropped back from a call of `given` padded as `probe` says, against the
  // same call unpadded: "'y' max |diff| 1.29 of 10.5", or "" where none does.
  const auto padding_difference = [&](const detail::PaddingProbe& probe, const std::vector<Tensor>& given) {
    const std::vector<Tensor> want = run_shape(probe.real, given);
    std::vector<Tensor> padded_inputs;
    for (const auto& t : given) padded_inputs.push_back(detail::padded(t, probe.bucket.at(t.name), detail::pad_value_of(t.name, pad_values), Device::cpu()));
    std::vector<Tensor> got = run_shape(probe.bucket, padded_inputs);
    std::vector<std::vector<int64_t>> got_shapes;
    for (const auto& t : got) got_shapes.push_back(t.shape);
    const auto real_shapes = buckets.cropped_shapes(probe.real, probe.bucket, got_shapes);
    std::string differ;
    for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
      const Tensor cropped = detail::cropped(got[o], real_shapes[o], Device::cpu());
      const std::string why = detail::output_difference(want[o], cropped, agreement);
      if (why.empty()) continue;
      const std::string largest = detail::largest_difference(want[o], cropped);
      differ += fmt::format("{}'{}' {}", differ.empty() ? "" : ", ", outputs[o].name, largest.empty() ? why : largest);
    }
    return differ;
  };
  // Each padded dim is probed with the warm-up inputs, then with every real-valued input above its pad
  // value and with every one below it: an output that reads the padded positions only through a min or
  // a max passes the first (made-up inputs in [-1, 1] around a pad of 0), and not real inputs of one sign.
  std::vector<std::optional<detail::OneSidedInputs>> variants{std::nullopt};
  for (auto& side : detail::one_sided_inputs(inputs, warmup_source->ranges(), pad_values)) variants.emplace_back(std::move(side));
  const std::map<std::string, ValueRange> own_ranges;  // the warm-up inputs' own
  for (const auto& probe : buckets.padding_probes(base_shape)) {
    for (const auto& one_sided : variants) {
      const auto given = warmup_source->make(probe.real, /*seed=*/2, one_sided ? one_sided->ranges : own_ranges).tensors;
      const std::string differ = padding_difference(probe, given);
      if (differ.empty()) continue;
      const std::string& dim = buckets.dims()[probe.dim].name;
      const int64_t from = buckets.size_in(probe.dim, probe.real);
      const int64_t to = buckets.size_in(probe.dim, probe.bucket);
      const std::string inputs_text = one_sided ? ", with " + one_sided->text(pad_values) : std::string();
      detail::remember_padding_refusal(spec.model_path, fmt::format("{} = {} padded to {}{}: {}", dim, from, to, inputs_text, differ));
      throw Error(detail::buckets_refused(dim) +
                      fmt::format("padding changes the model's outputs: a call of {} = {} padded to {} and cropped back gives {} against the same "
                                  "call unpadded{}, beyond what two devices' runs may differ by (1% of the output's largest value)",
                                  dim, from, to, differ, inputs_text),
                  fmt::format("Padding keeps outputs only where no value depends on the padded positions: attention without a mask over them, "
                              "normalisation, pooling, a min or max (min-max scaling, x - max) or cumulative sums over the padded dim change "
                              "every value, a convolutional net's near the border. Remove the buckets for {} and "
                              "declare the shapes you feed ({}) instead, or pad an input the model reads as padding ({}){}",
                              dim, named(Setting::shapes), named(Setting::pad_value, "attention_mask=0"),
                              one_sided ? fmt::format(". Where the inputs you feed never lie in that half of their range, give the range they "
                                                      "lie in ({}), and the check probes within it",
                                                      named(Setting::input_range, "NAME=LO:HI"))
                                        : std::string()),
                  lane);
    }
  }
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

}  // namespace ortfleet
