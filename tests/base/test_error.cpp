#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

#include "ortfleet/base/error.hpp"

namespace ortfleet {

TEST(Error, SaysWhatWhereAndWhatToDoOnOneLine) {
  const Error e("could not load x.so: missing\nlibcudnn", "Install cuDNN", "cuda:1");
  EXPECT_STREQ(e.what(), "could not load x.so: missing libcudnn (on cuda:1). Install cuDNN");
  EXPECT_EQ(e.where(), "cuda:1");
  EXPECT_EQ(e.hint(), "Install cuDNN");
}

TEST(Error, AtAttributesToADeviceKeepingTheRest) {
  const Error e = Error("session failed", "Retry").at("cuda:2");
  EXPECT_STREQ(e.what(), "session failed (on cuda:2). Retry");
  EXPECT_EQ(e.what_failed(), "session failed");
}

TEST(Error, WithoutHintOrPlaceIsJustTheMessage) { EXPECT_STREQ(Error("plain").what(), "plain"); }

// A failed allocation (shapes=['input=99999999x64'] warmed up: 25 GB) was a device's error "std::bad_alloc"
// (issue 58's audit): it says what it is, and what to do.
TEST(Error, FromAFailedAllocationSaysOutOfMemory) {
  const Error e = Error::from(std::bad_alloc());
  EXPECT_EQ(e.what_failed(), "out of memory: an allocation of this process failed");
  EXPECT_FALSE(e.hint().empty());
  EXPECT_STREQ(Error::from(std::runtime_error("other")).what(), "other");
}

}  // namespace ortfleet
