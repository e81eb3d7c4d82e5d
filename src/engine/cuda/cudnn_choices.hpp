#pragma once
// cuDNN's choices kept across processes (src/preload/: libortfleet_cudnn.so, preloaded into GPU worker
// processes): the environment a worker gets so that the library is loaded and knows its store, and what
// the library did in this process (cuDNN's time by kind, its queries answered from the record).
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ortfleet::detail {

/// The environment that loads libortfleet_cudnn.so (found beside `executable`) into a process and points
/// it at this machine's store (cudnn-choices/ beside the model cache, in user_cache_root(); per GPU and
/// cuDNN version): LD_PRELOAD (the library first, then what was there) and ORTFLEET_CUDNN_CHOICES.
/// Nothing when the library is not there, that folder is not private, or ORTFLEET_CUDNN_CHOICES=0.
std::map<std::string, std::string> cudnn_choices_environment(const std::string& executable);

/// What the preloaded library did in this process so far; nothing when it is not loaded.
struct CudnnWork {
  double heuristics_ms = 0;      ///< cuDNN's heuristics queries (what a record saves)
  double engine_configs_ms = 0;  ///< engine configurations made, read and checked
  double plan_build_ms = 0;      ///< execution plans built (a runtime-compiled engine compiles here)
  double execute_ms = 0;         ///< each plan's first execution (where its kernels load); later ones go untimed
  int64_t queries = 0;           ///< heuristics queries asked
  int64_t replayed = 0;          ///< of them, answered from this machine's record
  int64_t refused = 0;           ///< records cuDNN would not build: its own query ran instead
  int64_t recorded = 0;          ///< choices recorded for later processes
};
std::optional<CudnnWork> cudnn_work();
/// `after` less `before` (the work of one step of a start).
CudnnWork operator-(const CudnnWork& after, const CudnnWork& before);

}  // namespace ortfleet::detail
