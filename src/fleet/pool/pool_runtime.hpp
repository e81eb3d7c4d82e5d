#pragma once
// The ONNX Runtime a pool's workers run is part of what makes its sessions the same: a start that names
// a runtime (the `ort_library` setting, ORTFLEET_ORT_LIB, ORTFLEET_ORT_ROOT) is served by a pool only
// where its workers run that very library, told by its content, not its path.
#include <optional>
#include <string>

namespace ortfleet::detail {

/// What tells one runtime library from another: "xxh64:<hex>:<bytes>" of its content, read once per
/// file identity. Throws ortfleet::Error when it cannot be read.
std::string runtime_content(const std::string& library);

/// Whether libraries `a` and `b` are the same runtime: the same file, or the same content.
bool same_runtime(const std::string& a, const std::string& b);

/// The runtime a start names (`setting`, else ORTFLEET_ORT_LIB or ORTFLEET_ORT_ROOT), checked as loading
/// it would (a missing file fails here, as it does without a pool); nothing when it names none.
std::optional<std::string> named_runtime(const std::string& setting);

/// Throws ortfleet::Error when a start naming runtime `named` may not be served by `pool`'s workers,
/// which run `pool_library`: it is another library. `pool` names the pool in the error.
void check_pool_runs(const std::string& named, const std::string& pool_library, const std::string& pool);

}  // namespace ortfleet::detail
