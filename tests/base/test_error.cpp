#include <gtest/gtest.h>

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

}  // namespace ortfleet
