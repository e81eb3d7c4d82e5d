// The cache entry a start wrote (inline fill), checked against the model's own outputs on warm-up
// inputs before it is published, and what later shape sessions load from.
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/crash_report.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/cache/output_compare.hpp"
#include "engine/session/session_impl.hpp"
#include "engine/shapes/shape_policy.hpp"

namespace ortfleet {

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

}  // namespace ortfleet
