#include "test_support.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <cstdlib>

#include "ortfleet/base/error.hpp"
#include <nlohmann/json.hpp>

#include "engine/cache/model_digest.hpp"
#include "engine/files/model_file.hpp"
#include "synth/graph_builder.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/devices.hpp"

namespace ortfleet::test {
namespace fs = std::filesystem;

int exit_code_within(double seconds, const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(body());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool finishes_without_waiting_on_pipe(const fs::path& pipe, double seconds, const std::function<void()>& body) {
  auto running = std::async(std::launch::async, body);
  if (running.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready) {
    running.get();
    return true;
  }
  // A reader waits in open() for a writer, a writer for a reader: both come. The writer leaves at once
  // (the reader then reads the end), the reader stays until the body is done (a write never meets a
  // pipe without a reader, which would be SIGPIPE).
  const int reader = ::open(pipe.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  const int writer = ::open(pipe.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (writer >= 0) ::close(writer);
  running.wait();
  if (reader >= 0) ::close(reader);
  return false;
}

Error error_from(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error("");
}

namespace {
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    path = fs::temp_directory_path() / ("ortfleet-test-" + std::to_string(::getpid()));
    fs::create_directories(path);
    // Worker processes and child runs share the process's model cache; keep it in the scratch folder.
    ::setenv("ORTFLEET_CACHE", (path / "cache").c_str(), 1);
    ::setenv("ORTFLEET_WORKER", bin("ortfleet-worker").c_str(), 1);
    // A pool server the developer runs on the default socket must not carry the tests' fleets.
    ::setenv("ORTFLEET_AUTO_POOL", "0", 1);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
}  // namespace

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

const fs::path& scratch_dir() {
  static ScratchDir dir;
  return dir.path;
}

namespace {
// Made before main, while this process has one thread: its setenv() calls must not meet a thread that
// reads the environment (a pool's worker spawned in the background; ThreadSanitizer saw a test's first
// model written, and the variables set, while the pool it had just made spawned its workers).
[[maybe_unused]] const fs::path& scratch_made_at_start = scratch_dir();
}  // namespace

fs::path fresh_dir(const fs::path& relative) {
  const fs::path p = scratch_dir() / relative;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void expect_same_values(const std::vector<float>& want, const std::vector<float>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(want[i], got[i], 1e-4f * (1 + std::abs(want[i]))) << "output " << i;
}

void make_unloadable(const std::string& entry) {
  { std::ofstream(entry, std::ios::trunc) << "not an ONNX graph"; }
  auto m = nlohmann::json::parse(read_all(entry + ".manifest.json"));
  for (auto& file : m.at("files")) {
    if (file.at("name") != fs::path(entry).filename().string()) continue;
    auto record = detail::to_record(detail::digest_file(entry, detail::Symlinks::refuse));
    record["name"] = file.at("name");
    file = record;
  }
  std::ofstream(entry + ".manifest.json", std::ios::trunc) << m.dump();
}

const std::string& mlp_model() {
  static const std::string path = synth::write_mlp((scratch_dir() / "mlp.onnx").string(), {}).path;
  return path;
}

const std::string& identity_model() {
  static const std::string path = synth::write_identity((scratch_dir() / "identity.onnx").string(), synth::IdentitySpec{}).path;
  return path;
}

const std::string& dynamic_mlp_model() {
  static const std::string path = [] {
    synth::MlpSpec spec;
    spec.dynamic_batch = true;
    return synth::write_mlp((scratch_dir() / "mlp-dynamic.onnx").string(), spec).path;
  }();
  return path;
}

const std::string& resnet18_model() {
  static const std::string path = [] {
    synth::ResNetSpec spec;
    spec.depth = 18;
    spec.image_size = 64;
    return synth::write_resnet((scratch_dir() / "resnet18.onnx").string(), spec).path;
  }();
  return path;
}

const std::string& dynamic_resnet18_model() {
  static const std::string path = [] {
    synth::ResNetSpec spec;
    spec.depth = 18;
    spec.image_size = 64;
    spec.dynamic_batch = true;
    return synth::write_resnet((scratch_dir() / "resnet18-dynamic.onnx").string(), spec).path;
  }();
  return path;
}

const std::string& conv_zoo_model() {
  static const std::string path = [] {
    synth::ConvZooSpec spec;
    spec.convs = 120;
    spec.max_spatial = 32;
    return synth::write_conv_zoo((scratch_dir() / "convzoo.onnx").string(), spec).path;
  }();
  return path;
}

const std::string& segmenter_model() {
  static const std::string path = [] {
    synth::SegmenterSpec spec;
    spec.channels = 4;
    spec.depth = 1;
    return synth::write_segmenter((scratch_dir() / "segmenter.onnx").string(), spec).path;
  }();
  return path;
}

const std::string& attention_model() {
  static const std::string path = [] {
    using onnx::Attribute;
    using onnx::DataType;
    synth::GraphBuilder g("attention", 1);
    g.input("x", DataType::float32, {"batch", "sequence", 64});
    const auto project = [&](const char* name) { return g.op("MatMul", {"x", g.fan_in_weight(name, {64, 64}, 64)}); };
    const std::string q = project("query");
    const std::string k = project("key");
    const std::string v = project("value");
    const std::string scores = g.op("MatMul", {q, g.op("Transpose", {k}, {Attribute::Ints("perm", {0, 2, 1})})});
    const std::string probs = g.op("Softmax", {scores}, {Attribute::Int("axis", -1)});
    const std::string y = g.op("Add", {g.op("MatMul", {probs, v}), "x"});
    g.output(y, DataType::float32, {"batch", "sequence", 64});
    return g.write((scratch_dir() / "attention.onnx").string(), "attention", synth::WriteOptions{}).path;
  }();
  return path;
}

const std::string& masked_transformer_model() {
  static const std::string path = [] {
    synth::TransformerSpec spec;
    spec.layers = 2;
    spec.hidden = 32;
    spec.heads = 4;
    spec.sequence = 64;
    spec.vocabulary = 100;
    spec.dynamic_sequence = true;
    spec.attention_mask = true;
    return synth::write_transformer((scratch_dir() / "transformer-masked.onnx").string(), spec).path;
  }();
  return path;
}

std::string write_small_transformer(const fs::path& path, uint64_t seed) {
  synth::TransformerSpec spec;
  spec.layers = 2;
  spec.hidden = 64;
  spec.heads = 4;
  spec.sequence = 16;
  spec.vocabulary = 100;
  synth::WriteOptions o;
  o.seed = seed;
  o.external_data = synth::ExternalData::always;
  return synth::write_transformer(path.string(), spec, o).path;
}

std::string copy_with_other_weights(const std::string& model, const fs::path& to) {
  std::string bytes = read_all(model);
  detail::InitializerBytes largest;
  for (const auto& w : detail::initializer_bytes(model)) largest = w.bytes > largest.bytes ? w : largest;
  if (largest.bytes == 0) throw std::runtime_error(model + " has no weight inside its file");
  for (uint64_t i = 0; i < largest.bytes; i += 7) bytes[largest.offset + i] = static_cast<char>(bytes[largest.offset + i] ^ 0x5a);
  std::ofstream(to, std::ios::binary) << bytes;
  return to.string();
}

const std::string& small_transformer() {
  static const std::string path = write_small_transformer(scratch_dir() / "transformer.onnx", 1);
  return path;
}

ScopedEnv::ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) saved_ = old;
  if (value) ::setenv(name_.c_str(), value->c_str(), 1);
  else ::unsetenv(name_.c_str());
}

ScopedEnv::~ScopedEnv() {
  if (saved_) ::setenv(name_.c_str(), saved_->c_str(), 1);
  else ::unsetenv(name_.c_str());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

namespace {
/// What every CapturedLog captures through: one sink added to the default logger before main, while this
/// process has one thread. A logger's own list of sinks must not change while other threads log through
/// it (a pool's server, a fleet's workers' readers: ThreadSanitizer saw a test add a sink while a pool
/// server logged); a dist_sink's list may, under its mutex.
const std::shared_ptr<spdlog::sinks::dist_sink_mt>& capture_sink() {
  static const auto sink = [] {
    auto made = std::make_shared<spdlog::sinks::dist_sink_mt>();
    spdlog::default_logger()->sinks().push_back(made);
    return made;
  }();
  return sink;
}
[[maybe_unused]] const bool capture_sink_installed_at_start = static_cast<bool>(capture_sink());
}  // namespace

CapturedLog::CapturedLog() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) { capture_sink()->add_sink(sink_); }

CapturedLog::~CapturedLog() { capture_sink()->remove_sink(sink_); }

std::vector<std::string> CapturedLog::lines() const { return sink_->last_formatted(); }

size_t CapturedLog::count(const std::string& text) const {
  size_t n = 0;
  for (const auto& l : lines()) n += l.find(text) != std::string::npos ? 1 : 0;
  return n;
}

std::string CapturedLog::text() const {
  std::string out;
  for (const auto& l : lines()) out += l;
  return out;
}

std::vector<std::string> ortfleet_files_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ortfleet", 0) == 0) names.push_back(name);
  }
  return names;
}

void stop_process(int pid) {
  if (::kill(pid, SIGSTOP) != 0) throw std::runtime_error("cannot stop process " + std::to_string(pid) + ": " + std::strerror(errno));
  const fs::path tasks = fs::path("/proc") / std::to_string(pid) / "task";
  while (true) {
    std::error_code error;
    bool stopped = true;
    for (fs::directory_iterator it(tasks, error), end; !error && it != end; it.increment(error)) {
      // /proc/PID/task/TID/stat: "TID (name) STATE ...": the state follows the last ')'.
      std::ifstream stat(it->path() / "stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') stopped = false;
    }
    if (error) throw std::runtime_error("process " + std::to_string(pid) + " ended before it stopped");
    if (stopped) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string bin(const std::string& name) {
  // ORTFLEET_TEST_BIN_DIR overrides the build tree's folder: the tests travel to the GPU machine.
  const char* dir = std::getenv("ORTFLEET_TEST_BIN_DIR");
  return (fs::path(dir != nullptr && *dir != '\0' ? dir : ORTFLEET_TEST_BIN_DIR) / name).string();
}

bool have_gpu() { return probe_cuda_driver().loaded && !probe_cuda_driver().gpus.empty(); }

}  // namespace ortfleet::test
