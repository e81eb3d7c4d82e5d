#pragma once
// Shared by the tests: a scratch folder, synthetic models made once per test process, paths of the
// built executables.
#include <filesystem>
#include <string>

#include "ortfleet/synth/synth.hpp"

namespace ortfleet::test {

/// A fresh folder, removed at the end of the test process.
const std::filesystem::path& scratch_dir();

/// Models written once per test process with `ortfleet::synth` (seed 1).
const std::string& mlp_model();          ///< 3 layers, 64 wide
const std::string& dynamic_mlp_model();  ///< the same with a dynamic batch dim
const std::string& resnet18_model();     ///< a ResNet-18 (small enough for quick CPU runs)
const std::string& dynamic_resnet18_model();  ///< the same with a dynamic batch dim
const std::string& conv_zoo_model();     ///< 120 distinct conv shapes, 32x32 inputs
const std::string& small_transformer();  ///< 2 layers x 64, with its weights in external data

std::string bin(const std::string& name);  ///< a built executable (ortfleet, ortfleet-worker)

/// True when the machine has a usable GPU (the driver initialises and sees one).
bool have_gpu();

#define ORTFLEET_REQUIRE_GPU()                                          \
  do {                                                                  \
    if (!::ortfleet::test::have_gpu()) GTEST_SKIP() << "needs a GPU";  \
  } while (false)

}  // namespace ortfleet::test
