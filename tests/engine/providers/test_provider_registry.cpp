// The providers' seam (engine/runtime/execution_provider.hpp, engine/providers/provider_registry.hpp):
// the registry walked, every device's stack, and a test double registered by name and stacked in front of
// the CPU's own provider, as TensorRT would stand in front of CUDA's: its options, its cache mark, its
// attachment to a session and its preparation in the overlapped start.
#include "engine/providers/provider_registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <vector>

#include "engine/cache/cache_use.hpp"
#include "fleet/local/local_start.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/engine/timeline.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace {

using detail::Capability;
using detail::DeviceProvider;
using detail::ExecutionProvider;

/// A provider that stands in front of the device's own (on `kind`'s devices), by the name "test-double"
/// unless told otherwise: it takes one option, "level", marks the cache key with it, gives up weight
/// sharing, counts what is asked of it and attaches nothing ONNX Runtime would notice.
class DoubleProvider : public ExecutionProvider {
 public:
  explicit DoubleProvider(Device::Kind kind = Device::Kind::cpu, std::string name = "test-double") : kind_(kind), name_(std::move(name)) {}
  const char* name() const override { return name_.c_str(); }
  const char* ort_name() const override { return "TestDoubleExecutionProvider"; }
  Device::Kind device_kind() const override { return kind_; }
  bool offers(Capability capability) const override { return capability != Capability::weight_sharing; }

  void check_options(const std::map<std::string, std::string>& options) const override {
    for (const auto& [key, value] : options) {
      if (key != "level") throw Error("'" + key + "' is no option of the test double (it takes: level)");
    }
  }
  std::vector<std::pair<std::string, std::string>> provider_options(const RunConfig& config) const override {
    const auto& options = config.providers.at(name_);
    return {options.begin(), options.end()};
  }
  std::string cache_mark(const RunConfig& config) const override {
    const auto& options = config.providers.at(name_);
    return options.count("level") ? "|level=" + options.at("level") : "";
  }

  std::vector<std::string> apply_environment(const RunConfig&) const override { return {}; }
  bool prepares_ahead() const override { return true; }
  bool preload() const override {
    ++preloads;
    return true;
  }
  std::string prepare() const override {
    ++prepares;
    prepared_ = true;
    return "double";
  }
  bool prepared() const override { return prepared_; }
  ProviderAttachment attach(Ort::SessionOptions&, const Device&, const RunConfig& config) const override {
    ++attaches;
    return {"test-double", "", "level " + config.providers.at(name_).at("level")};
  }

  mutable std::atomic<int> preloads{0};
  mutable std::atomic<int> prepares{0};
  mutable std::atomic<int> attaches{0};

 private:
  Device::Kind kind_;
  std::string name_;
  mutable std::atomic<bool> prepared_{false};
};

RunConfig stacking_the_double(const std::string& level = "2") {
  RunConfig config;
  config.providers["test-double"] = {{"level", level}};
  return config;
}

std::vector<std::string> names_of(const std::vector<const ExecutionProvider*>& providers) {
  std::vector<std::string> names;
  for (const auto* p : providers) names.emplace_back(p->name());
  return names;
}

// --- the registry walked ---

TEST(ProviderRegistry, EveryProviderHasANameOfItsOwnAndEveryKindOfDeviceOneProviderOfItsOwn) {
  std::set<std::string> names;
  for (const ExecutionProvider* p : detail::execution_providers()) {
    const std::string name = p->name();
    EXPECT_TRUE(names.insert(name).second) << name << " is the name of two providers";
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_"), std::string::npos) << name;
    EXPECT_NE(std::string(p->ort_name()), "") << name;
    EXPECT_EQ(detail::find_provider(name), p) << name;
  }
  EXPECT_EQ(detail::find_provider("no-such-provider"), nullptr);
  for (const Device::Kind kind : {Device::Kind::cpu, Device::Kind::cuda}) {
    const DeviceProvider& own = detail::provider_for(kind);
    EXPECT_EQ(own.device_kind(), kind);
    EXPECT_EQ(std::count(detail::device_providers().begin(), detail::device_providers().end(), &own), 1);
  }
  EXPECT_EQ(names_of({detail::device_providers().begin(), detail::device_providers().end()}), (std::vector<std::string>{"cpu", "cuda"}));
}

// What a device provider offers is what it has: memory of its own, memory shared in place, parking.
TEST(ProviderRegistry, EachDeviceProviderOffersWhatItHas) {
  for (const DeviceProvider* p : detail::device_providers()) {
    EXPECT_EQ(p->offers(Capability::device_memory), p->memory() != nullptr) << p->name();
    EXPECT_EQ(p->offers(Capability::memory_sharing), p->sharing() != nullptr) << p->name();
    if (!p->offers(Capability::worker_parking)) {
      EXPECT_TRUE(p->parking().unavailable().has_value()) << p->name();
    }
    // Sharing memory in place, capturing graphs, sharing weights and searching kernels all need memory of its own.
    for (const Capability c : detail::kCapabilities) {
      if (c != Capability::worker_parking && p->offers(c)) {
        EXPECT_TRUE(p->offers(Capability::device_memory)) << p->name() << " " << detail::capability_name(c);
      }
    }
  }
  // The CPU offers nothing beyond running a session; CUDA's GPUs everything (no GPU is asked: a fact of the provider).
  for (const Capability c : detail::kCapabilities) {
    EXPECT_FALSE(detail::device_has(Device::cpu(), c)) << detail::capability_name(c);
    EXPECT_TRUE(detail::device_has(Device::cuda(0), c)) << detail::capability_name(c);
  }
}

TEST(ProviderRegistry, AStackIsTheDevicesOwnProviderAloneUnlessTheConfigStacksOne) {
  for (const Device& d : {Device::cpu(), Device::cpu(3), Device::cuda(0), Device::cuda(5)}) {
    const detail::ProviderStack stack = detail::provider_stack(d, RunConfig{});
    EXPECT_TRUE(stack.in_front().empty()) << d.to_string();
    EXPECT_EQ(&stack.device_provider(), &detail::provider_for(d)) << d.to_string();
    EXPECT_EQ(names_of(stack.providers()), std::vector<std::string>{d.kind == Device::Kind::cpu ? "cpu" : "cuda"});
    // The cache's mark is the device provider's alone, as before the seam had stacks.
    EXPECT_EQ(stack.cache_mark(RunConfig{}), detail::provider_for(d).cache_mark(RunConfig{})) << d.to_string();
  }
  EXPECT_EQ(detail::provider_stack(Device::cuda(0)).cache_mark(RunConfig{}), "|nhwc=0");
  EXPECT_EQ(detail::provider_stack(Device::cpu()).cache_mark(RunConfig{}), "");
}

TEST(ProviderRegistry, TheConfigNamesOnlyProvidersThisBuildHasThatStandInFrontOfAnother) {
  RunConfig unknown;
  unknown.providers["tensorrt"] = {};
  EXPECT_EQ(test::error_of([&] { detail::provider_stack(Device::cpu(), unknown); }),
            "the config's `providers` names 'tensorrt', and this build has no execution provider of that name (it has: cpu, cuda). Remove it "
            "from `providers`, or use a build of ortfleet with that provider");
  RunConfig own;
  own.providers["cuda"] = {};
  EXPECT_NE(test::error_of([&] { detail::provider_stack(Device::cuda(0), own); })
                .find("names 'cuda', the provider of cuda devices themselves: it is always attached, last"),
            std::string::npos);
}

// A fleet refuses a config stacking a provider this build lacks before anything starts (the command line:
// cli.unknown_provider).
TEST(ProviderRegistry, AFleetRefusesAStackedProviderThisBuildLacksBeforeAnythingStarts) {
  FleetOptions o;
  o.devices = {Device::cpu()};
  o.config.providers["tensorrt"] = {};
  EXPECT_NE(test::error_of([&] { Fleet fleet(test::mlp_model(), o); }).find("names 'tensorrt', and this build has no execution provider of that name"),
            std::string::npos);
}

// --- a test double registered by name ---

TEST(ProviderRegistry, AProviderRegisteredByNameIsFoundWhileItsRegistrationLives) {
  const DoubleProvider double_provider;
  {
    const detail::ProviderRegistration registration(double_provider);
    EXPECT_EQ(detail::find_provider("test-double"), &double_provider);
    EXPECT_EQ(names_of(detail::execution_providers()), (std::vector<std::string>{"cpu", "cuda", "test-double"}));
    const DoubleProvider namesake;
    EXPECT_EQ(test::error_of([&] { detail::ProviderRegistration again(namesake); }),
              "an execution provider named 'test-double' is already registered. Give it another name");
  }
  EXPECT_EQ(detail::find_provider("test-double"), nullptr);
  const DoubleProvider badly_named(Device::Kind::cpu, "Test Double");
  EXPECT_NE(test::error_of([&] { detail::ProviderRegistration r(badly_named); }).find("is not written as names are"), std::string::npos);
  const DoubleProvider taken(Device::Kind::cpu, "cuda");
  EXPECT_NE(test::error_of([&] { detail::ProviderRegistration r(taken); }).find("named 'cuda' is already registered"), std::string::npos);
}

TEST(ProviderRegistry, AProviderTheConfigStacksStandsInFrontOfTheDevicesOwnOnItsKindOfDevice) {
  const DoubleProvider on_cpu;
  const detail::ProviderRegistration registration(on_cpu);
  const RunConfig config = stacking_the_double();
  EXPECT_EQ(names_of(detail::provider_stack(Device::cpu(), config).providers()), (std::vector<std::string>{"test-double", "cpu"}));
  // It runs on CPUs: a GPU's stack is CUDA's alone, with the same config.
  EXPECT_EQ(names_of(detail::provider_stack(Device::cuda(0), config).providers()), std::vector<std::string>{"cuda"});
  // Its options are its own to check, named where they are in the config.
  RunConfig wrong = config;
  wrong.providers["test-double"]["speed"] = "max";
  EXPECT_EQ(test::error_of([&] { detail::provider_stack(Device::cpu(), wrong); }),
            "the config's `providers.test-double`: 'speed' is no option of the test double (it takes: level)");
  RunConfig typo;
  typo.providers["test-dubble"] = {};
  EXPECT_NE(test::error_of([&] { detail::provider_stack(Device::cpu(), typo); }).find("Did you mean 'test-double'?"), std::string::npos);
}

TEST(ProviderRegistry, AProviderInFrontMarksTheCacheKeyWithItsNameAndOptions) {
  const DoubleProvider on_cpu;
  const detail::ProviderRegistration registration(on_cpu);
  const std::string alone = detail::cache_key_text("content", Device::cpu(), RunConfig{});
  const std::string stacked = detail::cache_key_text("content", Device::cpu(), stacking_the_double("2"));
  EXPECT_NE(stacked, alone);
  EXPECT_NE(stacked.find("|provider=test-double|level=2"), std::string::npos) << stacked;
  EXPECT_NE(detail::cache_key_text("content", Device::cpu(), stacking_the_double("3")), stacked);  // its option changes the entry
  EXPECT_EQ(detail::cache_key_text("content", Device::cpu(), RunConfig{}), alone);                 // nothing left behind
}

// A provider in front may give up a capability of the device's own: the stack offers what both keep.
TEST(ProviderRegistry, AStackOffersWhatEveryProviderOfItKeeps) {
  const DoubleProvider on_gpus(Device::Kind::cuda);
  const detail::ProviderRegistration registration(on_gpus);
  const RunConfig config = stacking_the_double();
  EXPECT_TRUE(detail::device_has(Device::cuda(0), Capability::weight_sharing));
  EXPECT_FALSE(detail::device_has(Device::cuda(0), Capability::weight_sharing, config));
  EXPECT_TRUE(detail::device_has(Device::cuda(0), Capability::device_memory, config));
  EXPECT_EQ(names_of(detail::provider_stack(Device::cuda(0), config).providers()), (std::vector<std::string>{"test-double", "cuda"}));
  EXPECT_EQ(detail::provider_stack(Device::cuda(0), config).cache_mark(config), "|nhwc=0|provider=test-double|level=2");
}

TEST(ProviderRegistry, ASessionAttachesTheProviderInFrontBeforeTheDevicesOwn) {
  const DoubleProvider on_cpu;
  const detail::ProviderRegistration registration(on_cpu);
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  spec.device = Device::cpu();
  spec.config = stacking_the_double("7");
  Session session(spec);
  EXPECT_EQ(session.provider().path, "test-double+cpu");
  EXPECT_EQ(session.provider().note, "level 7");
  EXPECT_EQ(on_cpu.attaches.load(), 1);
  EXPECT_TRUE(on_cpu.prepared());
  // It computes what the CPU alone computes (the double attaches nothing ONNX Runtime sees).
  SessionSpec plain = spec;
  plain.config = RunConfig{};
  Session alone(plain);
  EXPECT_EQ(alone.provider().path, "cpu");
  const std::vector<Tensor> inputs = random_inputs(session.inputs(), 5);
  const auto values = [&inputs](Session& s) {
    const auto out = s.run(inputs);
    return std::vector<float>(out.front().values<float>(), out.front().values<float>() + out.front().element_count());
  };
  test::expect_same_values(values(alone), values(session));
}

// The overlapped start prepares through the seam: a provider in front that prepares ahead has its library
// loaded beside the runtime's and is registered after it, in the timeline's ep.* phases; a CPU start
// without one has none of them, nor a driver's start.
TEST(ProviderRegistry, TheOverlappedStartPreparesTheProvidersOfEachStackThroughTheSeam) {
  const DoubleProvider on_cpu;
  const detail::ProviderRegistration registration(on_cpu);
  auto phases_of = [](const RunConfig& config, const DoubleProvider* expect_ready) {
    detail::LocalStartPlan plan;
    plan.model_path = test::mlp_model();
    plan.devices = {Device::cpu()};
    plan.config = config;
    plan.config.session.optimized_model_cache = false;
    plan.mode = detail::LocalMode::overlapped;
    Timeline timeline;
    std::vector<detail::LocalDeviceResult> results;
    detail::start_locally(plan, timeline, results, [](size_t) {});
    EXPECT_FALSE(results.front().error) << results.front().error->what();
    if (expect_ready != nullptr && results.front().session) {
      EXPECT_EQ(results.front().session->provider().path, "test-double+cpu");
    }
    std::map<std::string, std::map<std::string, std::string>> phases;
    for (const auto& e : timeline.events()) phases[e.name] = e.args;
    return phases;
  };
  const auto plain = phases_of(RunConfig{}, nullptr);
  for (const char* none : {phase::ep_library_load, phase::ep_register, phase::cuda_init, phase::cuda_context}) EXPECT_EQ(plain.count(none), 0u) << none;
  EXPECT_EQ(on_cpu.preloads.load(), 0);

  const auto stacked = phases_of(stacking_the_double(), &on_cpu);
  ASSERT_EQ(stacked.count(phase::ep_library_load), 1u);
  EXPECT_EQ(stacked.at(phase::ep_library_load).count("loaded"), 0u);  // loaded
  ASSERT_EQ(stacked.count(phase::ep_register), 1u);
  EXPECT_EQ(stacked.at(phase::ep_register).at("path"), "double");
  EXPECT_EQ(stacked.count(phase::cuda_init), 0u);  // the CPU's own provider has no driver to start
  EXPECT_EQ(on_cpu.preloads.load(), 1);
  EXPECT_GE(on_cpu.prepares.load(), 1);
}

}  // namespace
}  // namespace ortfleet
