#pragma once
// Shared by the tests: a scratch folder, synthetic models made once per test process, paths of the
// built executables.
#include <sys/stat.h>

#include <spdlog/sinks/ringbuffer_sink.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>

#include "ortfleet/base/error.hpp"
#include "ortfleet/synth/synth.hpp"

namespace ortfleet::test {

/// A fresh folder, removed at the end of the test process.
const std::filesystem::path& scratch_dir();

/// scratch_dir() / `relative`, made empty (its parents made as needed).
std::filesystem::path fresh_dir(const std::filesystem::path& relative);

/// Fails the test unless `got` holds `want`'s values, each within 1e-4 relative (outputs of the same
/// model from two starts: a cached one against a plain one).
void expect_same_values(const std::vector<float>& want, const std::vector<float>& got);

/// Replaces the graph of the cache entry `entry` with junk that its manifest vouches for: the
/// manifest's checks pass, loading it fails (an entry ortfleet wrote that no longer loads).
void make_unloadable(const std::string& entry);

/// The ortfleet::Error `call` throws; a test failure, and an empty Error, when it throws none.
Error error_from(const std::function<void()>& call);

/// Every byte of the file at `path` ("" when it cannot be read).
std::string read_all(const std::filesystem::path& path);

/// Models written once per test process with `ortfleet::synth` (seed 1).
const std::string& mlp_model();          ///< 3 layers, 64 wide
const std::string& dynamic_mlp_model();  ///< the same with a dynamic batch dim
const std::string& identity_model();     ///< input -> output, 16 wide, a dynamic batch dim
const std::string& resnet18_model();     ///< a ResNet-18 (small enough for quick CPU runs)
const std::string& dynamic_resnet18_model();  ///< the same with a dynamic batch dim
const std::string& conv_zoo_model();     ///< 120 distinct conv shapes, 32x32 inputs
const std::string& segmenter_model();    ///< fully convolutional, image [1, 3, height, width] -> [1, 1, height/4, width/4]
/// One attention block without a mask, as issue 58 found buckets silently changing: x [batch, sequence,
/// 64] -> Q, K and V MatMuls, Softmax over the keys, MatMul, a residual Add.
const std::string& attention_model();
/// A 2-layer transformer: input_ids and attention_mask [1, sequence] (up to 64 tokens of 100 words).
const std::string& masked_transformer_model();
const std::string& small_transformer();  ///< 2 layers x 64, with its weights in external data
/// A copy of `model` at `to` with other values in its largest weight inside the .onnx (a new checkpoint
/// of the same export: the same graph and weight sizes).
std::string copy_with_other_weights(const std::string& model, const std::filesystem::path& to);
/// The small transformer's architecture with weights from `seed`, written to `path` (and path.data).
std::string write_small_transformer(const std::filesystem::path& path, uint64_t seed);

/// While it lives, a umask of 000 (anyone may write what is made), as a careless shell or service may
/// set: what ortfleet makes must be private all the same. The scratch folder is made first, as usual.
class OpenUmask {
 public:
  OpenUmask() : saved_((static_cast<void>(scratch_dir()), ::umask(0))) {}
  ~OpenUmask() { ::umask(saved_); }
  OpenUmask(const OpenUmask&) = delete;
  OpenUmask& operator=(const OpenUmask&) = delete;

 private:
  mode_t saved_;
};

/// While it lives, the environment variable `name` is `value` (unset when nullopt); then as before.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

/// What ortfleet logs while it lives (the last 64 lines, formatted).
class CapturedLog {
 public:
  CapturedLog();
  ~CapturedLog();
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::vector<std::string> lines() const;
  size_t count(const std::string& text) const;  ///< lines that contain `text`
  std::string text() const;                     ///< every line, for a failure's message

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};


/// The text of the ortfleet::Error `f` throws, or "(no error)".
std::string error_of(const std::function<void()>& f);

/// What in `folder` ortfleet made (names starting "ortfleet"); ONNX Runtime leaves its own files in $TMPDIR.
std::vector<std::string> ortfleet_files_in(const std::filesystem::path& folder);

std::string bin(const std::string& name);  ///< a built executable (ortfleet, ortfleet-worker)

/// Sends SIGSTOP to `pid` and returns once every thread of it has stopped: the signal takes effect a
/// moment after kill() returns, and a thread still running then could answer a request sent after it.
/// Throws when the process is not there, or ends before it stops.
void stop_process(int pid);

/// Runs `body` in a forked child and returns its exit code, or -1 when it still ran after `seconds` (it
/// is then killed): a call that would wait forever (on a pipe nobody writes) fails the test instead of
/// hanging it.
int exit_code_within(double seconds, const std::function<int()>& body);

/// Runs `body` on a thread of this process (a session's start may run there, unlike in a forked child)
/// and returns whether it finished within `seconds`. When it did not, it is taken to wait on the named
/// pipe `pipe`: the pipe is opened from both ends at once, which ends that wait, and the thread is
/// joined before this returns false.
bool finishes_without_waiting_on_pipe(const std::filesystem::path& pipe, double seconds, const std::function<void()>& body);

/// True when the machine has a usable GPU (the driver initialises and sees one).
bool have_gpu();

#define ORTFLEET_REQUIRE_GPU()                                          \
  do {                                                                  \
    if (!::ortfleet::test::have_gpu()) GTEST_SKIP() << "needs a GPU";  \
  } while (false)

}  // namespace ortfleet::test
