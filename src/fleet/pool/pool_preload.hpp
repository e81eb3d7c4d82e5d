#pragma once
// What a node daemon makes resident as it starts, before any job asks (issue 60; ServeOptions::preload):
// the models named to it, those it served before it last stopped (served_models.hpp), and, where asked,
// those this node's model cache has entries of (what `cache import` brought), chosen within a budget of
// host memory (a parked session's weights live in host memory), least recently used left out first.
// Choosing is a pure function (tests/fleet/pool/test_pool_preload.cpp); PoolServer makes the chosen.
#include <cstdint>
#include <string>
#include <vector>

#include "fleet/local/local_start.hpp"
#include "fleet/pool/served_models.hpp"
#include "ortfleet/fleet/pool_server.hpp"

namespace ortfleet::detail {

struct PreloadItem {
  enum class Source { named, served, cached } source = Source::named;
  std::string model;       ///< absolute
  Device device;
  LocalStartPlan plan;     ///< its one device
  uint64_t bytes = 0;      ///< what it takes of the budget: its files' size
  double last_used_s = 0;  ///< served before: when a job last used it (seconds since the epoch)
};
/// "named", "served before", "in the model cache"
const char* to_string(PreloadItem::Source source);

struct PreloadChoice {
  std::vector<PreloadItem> chosen;
  std::vector<std::string> left_out;  ///< one line each: which, on which device, and why
};

/// Named models first, in their order, then those served before, most recently used first, then the
/// cache's: each session once (a model both named and served before is made with the plan it was served
/// with; the cache's models only where nothing else makes them), as many as `budget_bytes` holds in
/// that order, the rest left out.
PreloadChoice choose_preload(std::vector<PreloadItem> items, uint64_t budget_bytes);

/// The plan a job's Fleet sends with its defaults for `model` on `device` of a daemon serving
/// `device_count` devices with `config` (its sessions then match a job's start, resident).
LocalStartPlan default_plan(const std::string& model, const Device& device, size_t device_count, const RunConfig& config);

/// Every candidate the options ask for on `devices`: named models on every device, what `served`
/// remembered (on devices of the pool, while the model's file still holds what it held then), and with
/// PreloadOptions::cached the models of this node's cache entries. One that cannot be had goes to
/// `left_out`, in one line.
std::vector<PreloadItem> preload_items(const PreloadOptions& options, const std::vector<Device>& devices, const RunConfig& config,
                                       const std::vector<ServedModel>& served, std::vector<std::string>& left_out);

/// PreloadOptions::budget_bytes, else a quarter of this machine's memory.
uint64_t preload_budget(const PreloadOptions& options);

}  // namespace ortfleet::detail
