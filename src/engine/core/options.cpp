// What options resolve to: the warm pool's idle and park times from the environment, the CUDA EP's option
// keys, and the one-line summary of a config against the defaults. Beside it: option_values.cpp (the
// values' names), option_checks.cpp (checks across fields), config_file.cpp (JSON).
#include "base/environment.hpp"
#include "ortfleet/engine/options.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>


namespace ortfleet {

std::optional<double> WarmPoolOptions::chosen_idle_exit_s() const {
  if (idle_exit_s) return *idle_exit_s;
  return detail::env_number(detail::EnvVar::warm_pool_idle);  // checked by its setting: a bad value is refused, naming it
}

double WarmPoolOptions::resolved_park_after_s() const {
  if (park_after_s) return *park_after_s;
  return detail::env_number(detail::EnvVar::warm_pool_park).value_or(kDefaultParkAfterS);
}

double WarmPoolOptions::default_idle_exit_s(bool workers_park) { return workers_park ? kDefaultParkedIdleExitS : kDefaultIdleExitS; }

std::vector<std::pair<std::string, std::string>> CudaOptions::provider_options() const {
  // The single mapping from our typed fields to the CUDA EP's option keys.
  std::vector<std::pair<std::string, std::string>> out = {
      {"cudnn_conv_algo_search", to_string(conv_algo_search)},
      {"cudnn_conv_use_max_workspace", conv_use_max_workspace ? "1" : "0"},
      {"arena_extend_strategy", to_string(arena_extend)},
      {"enable_cuda_graph", cuda_graph ? "1" : "0"},
      {"use_tf32", tf32 ? "1" : "0"},
      {"do_copy_in_default_stream", copy_in_default_stream ? "1" : "0"},
      {"prefer_nhwc", prefer_nhwc ? "1" : "0"},
  };
  if (gpu_mem_limit) out.emplace_back("gpu_mem_limit", std::to_string(*gpu_mem_limit));
  if (user_compute_stream != 0) {
    out.emplace_back("has_user_compute_stream", "1");
    out.emplace_back("user_compute_stream", std::to_string(user_compute_stream));
  }
  for (const auto& [k, v] : extra) {
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& kv) { return kv.first == k; });
    if (same != out.end()) same->second = v;
    else out.emplace_back(k, v);
  }
  return out;
}

std::string RunConfig::summary() const {
  const RunConfig d;
  std::vector<std::string> parts;
  if (cuda.conv_algo_search != d.cuda.conv_algo_search) parts.push_back("conv=" + to_string(cuda.conv_algo_search));
  if (cuda.conv_use_max_workspace != d.cuda.conv_use_max_workspace) parts.push_back("max_workspace=0");
  if (cuda.gpu_mem_limit) parts.push_back("gpu_mem_limit=" + std::to_string(*cuda.gpu_mem_limit >> 20) + "MiB");
  if (cuda.arena_extend != d.cuda.arena_extend) parts.push_back("arena=same_as_requested");
  if (cuda.cuda_graph) parts.push_back("cuda_graph");
  if (!cuda.tf32) parts.push_back("tf32=0");
  if (cuda.prefer_nhwc) parts.push_back("nhwc");
  for (const auto& [k, v] : cuda.extra) parts.push_back(k + "=" + v);
  for (const auto& stacked : providers) parts.push_back("provider=" + stacked.first);
  if (session.graph_optimization != d.session.graph_optimization) parts.push_back("opt=" + to_string(session.graph_optimization));
  if (!session.memory_pattern) parts.push_back("mem_pattern=0");
  if (!session.cpu_arena) parts.push_back("cpu_arena=0");
  if (session.intra_op_threads != 0) parts.push_back("intra=" + std::to_string(session.intra_op_threads));
  if (session.inter_op_threads != 0) parts.push_back("inter=" + std::to_string(session.inter_op_threads));
  if (!session.thread_spinning) parts.push_back("spin=0");
  if (session.optimized_model_cache) parts.push_back(*session.optimized_model_cache ? "model_cache" : "no_model_cache");
  if (session.model_cache_format != d.session.model_cache_format) parts.push_back("cache_format=" + to_string(session.model_cache_format));
  if (session.model_cache_fill != d.session.model_cache_fill) parts.push_back("cache_fill=" + to_string(session.model_cache_fill));
  if (session.tiered_start != d.session.tiered_start) parts.push_back("tiered=" + to_string(session.tiered_start));
  if (!session.model_cache_shared.empty()) parts.push_back("cache_shared=" + session.model_cache_shared);
  if (warm_pool.idle_exit_s) parts.push_back(fmt::format("warm_pool_idle={}", *warm_pool.idle_exit_s));
  if (warm_pool.park_after_s) parts.push_back(fmt::format("warm_pool_park={}", *warm_pool.park_after_s));
  if (!session.cuda_module_loading.empty()) parts.push_back("module_loading=" + session.cuda_module_loading);
  if (session.cuda_max_connections != 0) parts.push_back("connections=" + std::to_string(session.cuda_max_connections));
  for (const auto& [k, v] : session.config_entries) parts.push_back(k + "=" + v);
  for (const auto& lib : session.custom_op_libraries) parts.push_back("custom_ops=" + std::filesystem::path(lib).filename().string());
  if (!shapes.declared.empty() || !shapes.batches.empty()) {
    parts.push_back("shapes=" + std::to_string(shapes.declared.size() + shapes.batches.size()));
  }
  if (shapes.max_sessions != ShapeOptions{}.max_sessions) parts.push_back("max_shape_sessions=" + std::to_string(shapes.max_sessions));
  if (shapes.pad_batch) parts.push_back("pad_batch");
  for (const auto& b : shapes.buckets) parts.push_back("buckets:" + to_string(b));
  for (const auto& [input, v] : shapes.pad_values) parts.push_back(fmt::format("pad:{}={}", input, v));
  if (shapes.policy != ShapePolicy::measured) parts.push_back(std::string("shape_policy=") + to_string(shapes.policy));
  if (!shapes.share_weights) parts.push_back("no_shared_weights");
  if (!warmup.inputs_file.empty()) parts.push_back("warmup_inputs=" + std::filesystem::path(warmup.inputs_file).filename().string());
  for (const auto& [input, r] : warmup.input_ranges) parts.push_back(fmt::format("range:{}={}:{}", input, r.lo, r.hi));
  if (parts.empty()) return "defaults";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

}  // namespace ortfleet
