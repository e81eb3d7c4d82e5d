// What a node daemon makes resident as it starts (pool_preload.hpp).
#include "fleet/pool/pool_preload.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "fleet/worker/wire.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/engine/cache.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

const char* to_string(PreloadItem::Source source) {
  switch (source) {
    case PreloadItem::Source::named: return "named";
    case PreloadItem::Source::served: return "served before";
    case PreloadItem::Source::cached: return "in the model cache";
  }
  return "?";
}

namespace {
int rank(PreloadItem::Source s) { return s == PreloadItem::Source::named ? 0 : s == PreloadItem::Source::served ? 1 : 2; }
std::string session_of(const PreloadItem& i) { return i.device.to_string() + "|" + plan_to_json(i.plan).dump(); }
std::string model_on(const PreloadItem& i) { return i.device.to_string() + "|" + i.model; }
}  // namespace

PreloadChoice choose_preload(std::vector<PreloadItem> items, uint64_t budget_bytes) {
  // Named first (in their order: a stable sort), then served before by recency, then the cache's.
  std::stable_sort(items.begin(), items.end(), [](const PreloadItem& a, const PreloadItem& b) {
    if (rank(a.source) != rank(b.source)) return rank(a.source) < rank(b.source);
    return a.source == PreloadItem::Source::served && a.last_used_s > b.last_used_s;
  });
  // A model named and served before: made with the plan it was served with (a job's start then finds
  // it resident), in the named one's place.
  std::set<std::string> served_models;
  for (const auto& i : items) {
    if (i.source == PreloadItem::Source::served) served_models.insert(model_on(i));
  }
  std::vector<PreloadItem> ordered;
  std::set<std::string> sessions, models;
  for (const auto& i : items) {
    if (i.source == PreloadItem::Source::named && served_models.count(model_on(i)) != 0) {
      for (const auto& s : items) {
        if (s.source == PreloadItem::Source::served && model_on(s) == model_on(i) && sessions.insert(session_of(s)).second) {
          models.insert(model_on(s));
          ordered.push_back(s);
        }
      }
      continue;
    }
    if (i.source == PreloadItem::Source::cached && models.count(model_on(i)) != 0) continue;  // made already, with other settings
    if (!sessions.insert(session_of(i)).second) continue;
    models.insert(model_on(i));
    ordered.push_back(i);
  }
  PreloadChoice choice;
  uint64_t used = 0;
  for (auto& i : ordered) {
    if (used + i.bytes > budget_bytes) {
      choice.left_out.push_back(fmt::format("{} on {} ({}, {}): over the preload budget ({} of {} taken)", terminal_text(i.model), i.device.to_string(),
                                            to_string(i.source), bytes_text(i.bytes), bytes_text(used), bytes_text(budget_bytes)));
      continue;
    }
    used += i.bytes;
    choice.chosen.push_back(std::move(i));
  }
  return choice;
}

LocalStartPlan default_plan(const std::string& model, const Device& device, size_t device_count, const RunConfig& config) {
  LocalStartPlan plan;  // as Fleet::Impl::plan_for makes it from FleetOptions' defaults
  plan.model_path = model;
  plan.devices = {device};
  plan.config = config;
  plan.config.warm_pool = {};
  plan.mode = LocalMode::overlapped;
  plan.warmup_runs = 1;
  plan.dynamic_dim = 1;
  plan.fleet_size = static_cast<int>(std::max<size_t>(1, device_count));
  return plan;
}

std::vector<PreloadItem> preload_items(const PreloadOptions& options, const std::vector<Device>& devices, const RunConfig& config,
                                       const std::vector<ServedModel>& served, std::vector<std::string>& left_out) {
  std::vector<PreloadItem> items;
  const auto add_everywhere = [&](const std::string& named, PreloadItem::Source source) {
    const std::string model = fs::absolute(named).lexically_normal().string();
    const auto now = model_now(model);
    if (!now) {
      left_out.push_back(fmt::format("{} ({}): cannot be read", terminal_text(model), to_string(source)));
      return;
    }
    for (const auto& d : devices) items.push_back({source, model, d, default_plan(model, d, devices.size(), config), now->bytes, 0});
  };
  for (const auto& m : options.models) add_everywhere(m, PreloadItem::Source::named);
  for (const auto& m : served) {
    std::optional<Device> device;
    try {
      device = Device::parse(m.device);
    } catch (const Error&) {
    }
    if (!device || std::find(devices.begin(), devices.end(), *device) == devices.end()) continue;  // a device this daemon does not serve
    const auto now = model_now(m.model);
    if (!now || m.content.empty() || now->content != m.content) {
      left_out.push_back(fmt::format("{} on {} (served before): {}", terminal_text(m.model), m.device,
                                     now ? "its file changed since it was served" : "cannot be read"));
      continue;
    }
    try {
      LocalStartPlan plan = plan_from_json(m.plan);
      if (plan.model_path != m.model) continue;  // not the daemon's own writing: never made
      plan.devices = {*device};
      items.push_back({PreloadItem::Source::served, m.model, *device, std::move(plan), now->bytes, m.last_used_s});
    } catch (const std::exception& e) {
      left_out.push_back(fmt::format("{} on {} (served before): its plan is not read ({})", terminal_text(m.model), m.device, Error::from(e).what_failed()));
    }
  }
  if (options.cached) {
    try {
      std::set<std::string> seen;
      for (const auto& entry : ModelCache().entries()) {
        if (entry.model.empty() || !entry.used || !entry.skipped.empty() || !fs::path(entry.model).is_absolute()) continue;
        std::error_code ec;
        if (!fs::is_regular_file(entry.model, ec) || !seen.insert(entry.model).second) continue;  // not on this node
        add_everywhere(entry.model, PreloadItem::Source::cached);
      }
    } catch (const std::exception& e) {
      left_out.push_back(fmt::format("the model cache's models: not read ({})", Error::from(e).what_failed()));
    }
  }
  return items;
}

uint64_t preload_budget(const PreloadOptions& options) {
  if (options.budget_bytes) return *options.budget_bytes;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4 : 0;
}

}  // namespace ortfleet::detail
