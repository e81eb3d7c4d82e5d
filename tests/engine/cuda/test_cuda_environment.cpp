#include "engine/cuda/cuda_environment.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace ortfleet {
namespace {

TEST(CudaEnvironment, WritesAVariableOnlyWhereItDiffers) {
  const test::ScopedEnv loading("CUDA_MODULE_LOADING", std::nullopt), connections("CUDA_DEVICE_MAX_CONNECTIONS", "1");
  RunConfig config;
  config.session.cuda_module_loading = "EAGER";
  config.session.cuda_max_connections = 1;  // already so: not written
  EXPECT_EQ(detail::apply_cuda_environment(config), std::vector<std::string>{"CUDA_MODULE_LOADING"});
  EXPECT_STREQ(std::getenv("CUDA_MODULE_LOADING"), "EAGER");
  EXPECT_TRUE(detail::apply_cuda_environment(config).empty());  // the next session's start writes nothing
  config.session.cuda_max_connections = 2;
  EXPECT_EQ(detail::apply_cuda_environment(config), std::vector<std::string>{"CUDA_DEVICE_MAX_CONNECTIONS"});
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "2");
  EXPECT_TRUE(detail::apply_cuda_environment(RunConfig{}).empty());  // a config that names none writes none
}

TEST(CudaEnvironment, SessionsStartedInParallelWriteEachVariableOnce) {
  const test::ScopedEnv loading("CUDA_MODULE_LOADING", std::nullopt);
  RunConfig config;
  config.session.cuda_module_loading = "LAZY";
  std::atomic<int> writes{0};
  std::vector<std::thread> sessions;
  for (int i = 0; i < 8; ++i) {
    sessions.emplace_back([&] { writes += static_cast<int>(detail::apply_cuda_environment(config).size()); });
  }
  for (auto& t : sessions) t.join();
  EXPECT_EQ(writes.load(), 1);
  EXPECT_STREQ(std::getenv("CUDA_MODULE_LOADING"), "LAZY");
}

}  // namespace
}  // namespace ortfleet
