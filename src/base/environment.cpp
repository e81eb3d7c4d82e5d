#include "base/environment.hpp"

#include "base/system_paths.hpp"

namespace ortfleet::detail {

std::optional<std::string> env_value(EnvVar v) { return env_var(env_name(v)); }

}  // namespace ortfleet::detail
