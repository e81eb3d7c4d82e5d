#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/ort_log.hpp"
#include "test_support.hpp"

namespace ortfleet {

TEST(OrtLog, AnUnwritablePathIsAClearErrorAndLeaksNothing) {
  // The capture once held a raw pointer that its constructor leaked on this path (ASan: tsan/asan presets).
  try {
    OrtLogCapture capture("/nonexistent/folder/ort-log.jsonl");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write the ONNX Runtime log to /nonexistent/folder/ort-log.jsonl"), std::string::npos);
  }
}

TEST(OrtLog, WritesOneJsonLinePerMessage) {
  const auto path = (test::scratch_dir() / "ort-log.jsonl").string();
  {
    OrtLogCapture capture(path);
  }
  std::ifstream in(path);
  EXPECT_TRUE(in.good());
}

}  // namespace ortfleet
