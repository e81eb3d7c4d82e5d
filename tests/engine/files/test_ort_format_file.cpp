#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/files/model_file.hpp"
#include "engine/runtime/ort_api.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "engine/files/ort_format_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {
/// `model` saved by ONNX Runtime in the ORT format, its graph unchanged (no optimisation), so that
/// its initializers are the source model's.
std::string save_as_ort(const std::string& model) {
  load_runtime();
  const fs::path out = test::scratch_dir() / "ort-format-file" / (fs::path(model).stem().string() + ".ort");
  fs::create_directories(out.parent_path());
  fs::remove(out);
  Ort::SessionOptions so;
  so.SetGraphOptimizationLevel(ORT_DISABLE_ALL);
  so.SetOptimizedModelFilePath(out.c_str());
  so.AddConfigEntry("session.save_model_format", "ORT");
  Ort::Session session(ort_env(), model.c_str(), so);
  return out.string();
}

std::string bytes_of(const InitializerBytes& init) { return test::read_all(init.file).substr(init.offset, init.bytes); }

std::string write(const std::string& name, const std::string& bytes) {
  const auto path = (test::scratch_dir() / "ort-format-file" / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}
}  // namespace

// The reader finds every initializer ONNX Runtime wrote, with its name, type, dims and the very bytes
// of the source model (the MLP's inline raw data, the small transformer's external data file).
TEST(OrtFormatFile, FindsEveryInitializerWithItsBytes) {
  for (const std::string& model : {test::mlp_model(), test::small_transformer()}) {
    SCOPED_TRACE(model);
    const std::string ort = save_as_ort(model);
    const MappedFile ort_file(ort);
    ASSERT_TRUE(has_ort_format_identifier(ort_file));
    EXPECT_FALSE(has_ort_format_identifier(MappedFile(model)));
    std::map<std::string, InitializerBytes> want;
    for (auto& init : initializer_bytes(model)) want[init.name] = init;
    ASSERT_FALSE(want.empty());
    const auto got = ort_format_initializers(ort_file);
    size_t matched = 0;
    for (const auto& init : got) {
      EXPECT_EQ(init.file, fs::absolute(ort).string());
      const auto it = want.find(init.name);
      if (it == want.end()) continue;  // small tensors the source wrote as typed fields, not raw bytes
      ++matched;
      EXPECT_EQ(init.type, it->second.type) << init.name;
      EXPECT_EQ(init.dims, it->second.dims) << init.name;
      ASSERT_EQ(init.bytes, it->second.bytes) << init.name;
      EXPECT_TRUE(bytes_of(init) == bytes_of(it->second)) << init.name << ": different bytes";
    }
    EXPECT_EQ(matched, want.size());
  }
}

// A CPU session's saved graph assigns every node to the CPU provider: none reads anything off it, and
// off CUDA every node's inputs are read, the weights among them.
TEST(OrtFormatFile, NamesWhatNodesOnOtherProvidersRead) {
  const MappedFile ort(save_as_ort(test::mlp_model()));
  EXPECT_TRUE(inputs_of_nodes_not_on(ort, "CPUExecutionProvider").empty());
  const auto off_cuda = inputs_of_nodes_not_on(ort, "CUDAExecutionProvider");
  const auto weights = ort_format_initializers(ort);
  ASSERT_FALSE(weights.empty());
  for (const auto& w : weights) EXPECT_TRUE(off_cuda.contains(w.name)) << w.name;
  EXPECT_GT(off_cuda.size(), weights.size());  // the graph's input too
}

// A damaged file is an error that names it, never a read outside the file.
TEST(OrtFormatFile, ADamagedFileIsAnErrorNotACrash) {
  const std::string whole = test::read_all(save_as_ort(test::mlp_model()));
  for (const size_t keep : {size_t{8}, size_t{64}, whole.size() / 2, whole.size() - 1}) {
    const std::string path = write("cut.ort", whole.substr(0, keep));
    try {
      const auto got = ort_format_initializers(MappedFile(path));
      // A cut that only loses the end may leave every table the reader follows intact: then what it
      // finds must still lie inside the file.
      for (const auto& init : got) EXPECT_LE(init.offset + init.bytes, keep) << init.name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  std::string flipped = whole;
  flipped[0] = static_cast<char>(0xff);  // the root table now points past the end
  flipped[1] = static_cast<char>(0xff);
  flipped[3] = static_cast<char>(0x7f);
  EXPECT_THROW(ort_format_initializers(MappedFile(write("flipped.ort", flipped))), Error);
  EXPECT_THROW(ort_format_initializers(MappedFile(write("not-ort.ort", "plain text, no identifier"))), Error);
  EXPECT_FALSE(has_ort_format_identifier(MappedFile(write("short.ort", "ORTM"))));
}

}  // namespace ortfleet::detail
