// A program of a user's: it includes ortfleet/ortfleet.hpp and nothing else of ortfleet's, and what
// getting-started.md shows works with that alone: a model written, a Fleet started on the CPU and run,
// one Session, a tensor, the config and its errors. (No test_support: a user has none.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <ortfleet/ortfleet.hpp>

namespace {

TEST(OneHeader, AUserStartsAFleetAndASessionWithOrtfleetHppAlone) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::temp_directory_path() / ("ortfleet-one-header-" + std::to_string(::getpid()));
  fs::create_directories(folder);
  const std::string model = (folder / "identity.onnx").string();
  ortfleet::synth::write_identity(model, ortfleet::synth::IdentitySpec{});

  ortfleet::FleetOptions options;
  options.devices = ortfleet::select_devices("cpu").devices;
  options.strategy = ortfleet::Strategy::threads;
  options.auto_pool = false;
  options.config.session.optimized_model_cache = false;
  ortfleet::Fleet fleet(model, options);
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const std::vector<ortfleet::Tensor> inputs = ortfleet::random_inputs(fleet.inputs(), 1);
  const auto outputs = fleet.run(ortfleet::Device::cpu(), inputs);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].shape, inputs[0].shape);
  EXPECT_EQ(fleet.status().front().state, ortfleet::DeviceState::ready);
  fleet.shutdown();

  ortfleet::SessionSpec spec;
  spec.model_path = model;
  spec.device = ortfleet::Device::cpu();
  ortfleet::Session session(spec);
  EXPECT_EQ(session.run(inputs).size(), 1u);

  try {
    ortfleet::RunConfig::from_json(R"({"ortfleet_config": 1, "cuda": {"conv_algo_search": "FASTEST"}})", "a user's config");
    ADD_FAILURE() << "a bad config was taken";
  } catch (const ortfleet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv_algo_search"), std::string::npos) << e.what();
  }
  fs::remove_all(folder);
}

}  // namespace
