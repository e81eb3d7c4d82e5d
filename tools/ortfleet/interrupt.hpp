#pragma once
// Ctrl-C (SIGINT), SIGTERM and SIGHUP during a long command (bench, profile, tune): the command stops in
// order, its child processes ended and its temporary files removed (each diagnostic takes a stop token
// and ends with "stopped on request"), says so in one line and exits 128 + the signal (130 for Ctrl-C),
// as a shell expects of a program a signal ended. A second signal ends it at once, as the signal would
// have. A signal the command was started with ignored (a background job of a script: SIGINT; nohup:
// SIGHUP) stays ignored, and its children ignore it too (process/spawn.cpp).
#include <functional>
#include <stop_token>
#include <string>

namespace ortfleet::cli {

/// Runs `body` with a stop token that SIGINT, SIGTERM and SIGHUP request while it runs. A body that
/// ends by throwing after one came returns 128 + the signal, with one line on stderr saying that
/// `what` ("bench") was interrupted and left nothing behind; any other outcome is the body's own.
int stoppable(const std::string& what, const std::function<int(std::stop_token)>& body);

}  // namespace ortfleet::cli
