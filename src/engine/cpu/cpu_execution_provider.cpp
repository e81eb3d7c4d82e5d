#include "engine/cpu/cpu_execution_provider.hpp"

#include <unistd.h>

#include <fstream>

#include "base/content_hash.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string model;
  std::string flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  const std::string text = model + flags;
  return hex64(xxh64(text.data(), text.size()));
}

namespace {

class NoParking : public ProcessParking {
 public:
  std::optional<std::string> unavailable() const override { return std::string("a CPU worker holds no GPU memory to release"); }
  void park(int, double) const override { throw Error(*unavailable()); }
  void unpark(int) const override { throw Error(*unavailable()); }
};

class CpuExecutionProvider : public DeviceProvider {
 public:
  const char* name() const override { return "cpu"; }
  const char* ort_name() const override { return "CPUExecutionProvider"; }
  Device::Kind device_kind() const override { return Device::Kind::cpu; }
  bool offers(Capability) const override { return false; }  // sessions in host memory, on the host's cores: nothing beyond

  void check_options(const std::map<std::string, std::string>& options) const override {
    if (!options.empty()) throw Error("the CPU's execution provider takes no options of its own", "Leave it out of the config's `providers`");
  }
  std::vector<std::pair<std::string, std::string>> provider_options(const RunConfig&) const override { return {}; }
  std::string cache_mark(const RunConfig&) const override { return ""; }

  std::vector<std::string> apply_environment(const RunConfig&) const override { return {}; }
  bool prepares_ahead() const override { return false; }
  bool preload() const override { return false; }
  std::string prepare() const override { return ""; }
  bool prepared() const override { return true; }
  ProviderAttachment attach(Ort::SessionOptions&, const Device&, const RunConfig&) const override { return {"cpu", "", ""}; }

  int device_count() const override { return 1; }  // the host, which any number of CPU sessions share
  std::string device_class(const Device&) const override { return "cpu-" + cpu_identity(); }
  uint64_t memory_in_use(const Device&) const override {
    std::ifstream statm("/proc/self/statm");
    uint64_t size = 0;
    uint64_t resident = 0;
    statm >> size >> resident;
    return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  std::string arena_name(const Device&) const override { return "cpu:0"; }

  const DeviceMemory* memory() const override { return nullptr; }
  const DeviceMemorySharing* sharing() const override { return nullptr; }
  const ProcessParking& parking() const override { return parking_; }

  void tune_for_fleet(RunConfig&) const override {}
  WorkerEnvironment worker_environment(const Device&, const std::string&, bool) const override { return {}; }
  void use_narrowed(const Device&) const override {}
  void start_driver() const override {}
  bool device_open(const Device&) const override { return true; }
  std::shared_ptr<void> open_device(const Device&) const override { return nullptr; }
  void open_device_for_process(const Device&) const override {}

 private:
  NoParking parking_;
};

}  // namespace

const DeviceProvider& cpu_execution_provider() {
  static const CpuExecutionProvider provider;
  return provider;
}

}  // namespace ortfleet::detail
