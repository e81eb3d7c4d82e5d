#pragma once
// What every subcommand shares to register itself: the global flags, its action, and the words the
// help texts share. One file per command group (cmd_*.cpp) registers its commands.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "ortfleet/base/error.hpp"

namespace ortfleet::cli {

/// Where the pool socket is by default (default_pool_socket()), in words: the help must not depend on
/// who reads it or where.
inline constexpr const char* kDefaultSocketDoc =
    "$XDG_RUNTIME_DIR/ortfleet/pool.sock, else /tmp/ortfleet-<uid>/pool.sock; under Slurm pool-job<SLURM_JOB_ID>.sock";

/// The socket a pool flag names: "default" is default_pool_socket(), anything else a path (`start --pool`,
/// `serve --socket` and `pool --socket` alike; cmd_serve.cpp).
std::string pool_socket_named(const std::string& given);

/// Ends the help of every flag that takes shapes or sizes as text: where their one grammar is shown.
inline constexpr const char* kShapesAndSizesDoc = " (how to write shapes and sizes: docs/inference.md#writing-shapes-and-sizes)";

struct Globals {
  std::string ort_lib;
  bool json = false;
  int verbose = 0;
  bool quiet = false;
  std::string command_line;  ///< as typed, for the results and reports to say how they were made
};

/// What a subcommand does once the command line is parsed; returns the exit code, one of these (every
/// one documented in docs/cli.md and the man pages, scripts/gen-cli-reference.sh):
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;        ///< an error: one line on stderr, "ortfleet: error: ..."
inline constexpr int kExitUsage = 2;        ///< a command line refused before any work
inline constexpr int kExitDeviceFailed = 3; ///< it ran, but a device (start) or a row (bench) failed: said in the output
inline constexpr int kExitNoPool = 4;       ///< pool status or evict: no pool server listens on the socket
using Action = std::function<int()>;

/// A setting the command line took but the model contradicts (a bucket on a fixed dim, warm-up inputs
/// of another element type), refused before any work: said like any error, with exit code 2, since the
/// fix is in the command line.
class SettingRefused : public Error {
 public:
  explicit SettingRefused(const Error& e) : Error(e) {}
};

/// Each subcommand registers itself: adds its options to `app` and sets `action`.
void register_doctor(CLI::App& app, Globals& globals, Action& action);
void register_synth(CLI::App& app, Globals& globals, Action& action);
void register_start(CLI::App& app, Globals& globals, Action& action);
void register_bench(CLI::App& app, Globals& globals, Action& action);
void register_profile(CLI::App& app, Globals& globals, Action& action);
void register_tune(CLI::App& app, Globals& globals, Action& action);
void register_cache(CLI::App& app, Globals& globals, Action& action);
void register_serve(CLI::App& app, Globals& globals, Action& action);
void register_report(CLI::App& app, Globals& globals, Action& action);
void register_completion(CLI::App& app, Globals& globals, Action& action);

}  // namespace ortfleet::cli
