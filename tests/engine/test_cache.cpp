#include <gtest/gtest.h>

#include <fstream>

#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

TEST(ModelCache, EntriesDependOnEverythingThatShapesTheOptimisedGraph) {
  load_runtime();
  const ModelCache cache((test::scratch_dir() / "keys").string());
  const std::string model = test::mlp_model();
  RunConfig base;
  const std::string key = cache.entry_path(model, Device::cpu(), base);
  EXPECT_EQ(cache.entry_path(model, Device::cpu(), base), key);
  EXPECT_EQ(cache.entry_path(model, Device::cpu(1), base), key);  // CPU instances share entries
  RunConfig basic = base;
  basic.session.graph_optimization = GraphOptimization::basic;
  EXPECT_NE(cache.entry_path(model, Device::cpu(), basic), key);
  RunConfig threads = base;
  threads.session.intra_op_threads = 3;  // does not change the graph
  EXPECT_EQ(cache.entry_path(model, Device::cpu(), threads), key);
  EXPECT_NE(cache.entry_path(model, Device::cuda(0), base), key);
  EXPECT_NE(cache.entry_path(test::resnet18_model(), Device::cpu(), base), key);
}

TEST(ModelCache, AModifiedModelGetsANewEntry) {
  load_runtime();
  const ModelCache cache((test::scratch_dir() / "keys2").string());
  const auto copy = test::scratch_dir() / "mlp-copy.onnx";
  fs::copy_file(test::mlp_model(), copy, fs::copy_options::overwrite_existing);
  const std::string before = cache.entry_path(copy.string(), Device::cpu(), {});
  std::ofstream(copy, std::ios::app) << ' ';
  EXPECT_NE(cache.entry_path(copy.string(), Device::cpu(), {}), before);
}

TEST(ModelCache, ListsAndClearsEntries) {
  const auto dir = test::scratch_dir() / "list";
  fs::create_directories(dir);
  std::ofstream(dir / "m-1.onnx") << "graph";
  std::ofstream(dir / "m-1.onnx.data") << "weights";
  const ModelCache cache(dir.string());
  const auto entries = cache.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].bytes, 12u);  // graph and weights together
  cache.clear();
  EXPECT_TRUE(cache.entries().empty());
}

}  // namespace ortfleet
