// The ONNX Runtime a pool's workers run, told by content (pool_runtime.hpp).
#include "fleet/pool/pool_runtime.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "base/environment.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/files/mapped_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet::detail {

std::string runtime_content(const std::string& library) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<FileIdentity, std::string>> known;  // path -> identity, content
  const auto id = identity_of(library);
  if (!id) throw Error("cannot read the ONNX Runtime library " + library, runtime_choice_hint());
  {
    std::lock_guard lock(mutex);
    const auto it = known.find(library);
    if (it != known.end() && it->second.first == *id) return it->second.second;
  }
  const FileDigest digest = digest_file(library, Symlinks::follow);
  const std::string content = fmt::format("xxh64:{:016x}:{}", digest.xxh64, digest.identity.bytes);
  std::lock_guard lock(mutex);
  known[library] = {digest.identity, content};
  return content;
}

std::optional<std::string> named_runtime(const std::string& setting) {
  // Nothing named: the search through the machine's folders is not the pool's business (nor a job's cost).
  if (setting.empty() && !env_value(EnvVar::ort_lib) && !env_value(EnvVar::ort_root)) return std::nullopt;
  const auto candidates = runtime_candidates(setting);
  if (candidates.empty() || !candidates.front().explicit_choice) return std::nullopt;
  check_runtime_candidate(candidates.front());
  return candidates.front().path;
}

bool same_runtime(const std::string& a, const std::string& b) {
  // The same file needs no reading (a start on a pool pays nothing for it); another one, its content.
  std::error_code ec;
  if (a == b || std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec)) return true;
  return runtime_content(a) == runtime_content(b);
}

void check_pool_runs(const std::string& named, const std::string& pool_library, const std::string& pool) {
  if (named.empty() || same_runtime(named, pool_library)) return;
  throw Error(fmt::format("{} runs ONNX Runtime {}, and this start names another library: {}", pool, pool_library, named),
              "Start without the pool (ORTFLEET_AUTO_POOL=0), name the pool's runtime, or stop the pool (ortfleet pool stop) so that a start "
              "with this runtime leaves one that runs it");
}

}  // namespace ortfleet::detail
