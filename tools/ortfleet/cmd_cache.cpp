#include "cli.hpp"
namespace ortfleet::cli {
void register_cache(CLI::App&, Globals&, Action&) {}
}  // namespace ortfleet::cli
