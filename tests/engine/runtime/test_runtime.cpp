#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/system_paths.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {

TEST(Runtime, LoadsTheFetchedRuntimeAndReportsIt) {
  const RuntimeInfo& rt = load_runtime();
  EXPECT_FALSE(rt.library_path.empty());
  EXPECT_FALSE(rt.source.empty());
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(rt.version.c_str(), "%d.%d", &major, &minor), 2) << rt.version;
  EXPECT_TRUE(major > 1 || minor >= kOldestSupportedOrtMinor) << rt.version;
  EXPECT_NE(std::find(rt.providers.begin(), rt.providers.end(), "CPUExecutionProvider"), rt.providers.end());
  EXPECT_EQ(loaded_runtime(), &rt);
}

// The fetched core carries Microsoft's telemetry uploader, which left /tmp/mat-debug-<pid>.log for every
// process (and /tmp/.ses, a device id in ~/.cache): ortfleet keeps it from starting, and says so.
TEST(Runtime, TelemetryIsOffAndLeavesNoFile) {
  load_runtime();
  const RuntimeTelemetry t = runtime_telemetry();
  EXPECT_FALSE(t.collects) << t.evidence;
  EXPECT_STREQ(std::getenv(kOrtTelemetryVariable), "1");
  EXPECT_FALSE(detail::written_since_this_process_started("/tmp/mat-debug-" + std::to_string(::getpid()) + ".log")) << t.evidence;
  EXPECT_NE(t.evidence.find(t.uploader ? "ortfleet keeps it off" : "has no telemetry uploader"), std::string::npos) << t.evidence;
}

TEST(Runtime, LoadingAgainReturnsTheSameRuntime) {
  const RuntimeInfo& a = load_runtime();
  const RuntimeInfo& b = load_runtime();
  EXPECT_EQ(&a, &b);
}

TEST(Runtime, AskingForAnotherLibraryOnceLoadedIsAnError) {
  load_runtime();
  EXPECT_THROW(load_runtime("/nonexistent/libonnxruntime.so"), Error);
}

TEST(Runtime, CandidatesFollowTheDocumentedOrder) {
  ::setenv("ORTFLEET_ORT_LIB", "/from/env/libonnxruntime.so", 1);
  const auto c = runtime_candidates("/from/flag/libonnxruntime.so");
  ::unsetenv("ORTFLEET_ORT_LIB");
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0].source, "`ort_library`");  // the setting, as the front ends say it: --ort-lib, ort_library=
  EXPECT_EQ(c[0].path, "/from/flag/libonnxruntime.so");
  EXPECT_TRUE(c[0].explicit_choice);
  EXPECT_FALSE(c[0].exists);
  EXPECT_EQ(c[1].source, "ORTFLEET_ORT_LIB");
  EXPECT_TRUE(c[1].explicit_choice);
}

TEST(Runtime, AFolderGivenAsLibraryIsSearchedForTheLibrary) {
  const RuntimeInfo& rt = load_runtime();
  const std::string folder = std::filesystem::path(rt.library_path).parent_path().string();
  const auto c = runtime_candidates(folder);
  ASSERT_FALSE(c.empty());
  EXPECT_TRUE(c[0].exists);
  EXPECT_NE(c[0].path.find("libonnxruntime.so"), std::string::npos);
}

}  // namespace ortfleet
