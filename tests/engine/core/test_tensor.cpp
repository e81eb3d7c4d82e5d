#include <gtest/gtest.h>

#include <cstring>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet {

TEST(Tensor, ElementSizesAndNames) {
  EXPECT_EQ(element_size(ElementType::float32), 4u);
  EXPECT_EQ(element_size(ElementType::int64), 8u);
  EXPECT_EQ(element_size(ElementType::float16), 2u);
  EXPECT_EQ(element_size(ElementType::string), 0u);
  EXPECT_EQ(parse_element_type(to_string(ElementType::bfloat16)), ElementType::bfloat16);
  EXPECT_THROW(parse_element_type("float128"), Error);
}

TEST(Tensor, HostCopyOwnsItsBytes) {
  const float values[] = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::host_copy("x", ElementType::float32, {2, 3}, values);
  EXPECT_EQ(t.element_count(), 6);
  EXPECT_EQ(t.bytes, 24u);
  EXPECT_NE(t.data, static_cast<const void*>(values));
  EXPECT_EQ(t.values<float>()[5], 6.0f);
  EXPECT_NE(t.owner, nullptr);
  EXPECT_FALSE(t.on_gpu());
}

TEST(Tensor, RandomInputsFollowSpecsAndRanges) {
  const std::vector<TensorSpec> specs = {{"ids", ElementType::int64, {-1, 8}, {"batch", ""}},
                                         {"x", ElementType::float32, {2, 3}, {}}};
  const auto a = random_inputs(specs, 5, 4, {{"ids", {10, 20}}});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].shape, (std::vector<int64_t>{4, 8}));
  for (int64_t i = 0; i < a[0].element_count(); ++i) {
    EXPECT_GE(a[0].values<int64_t>()[i], 10);
    EXPECT_LE(a[0].values<int64_t>()[i], 20);
  }
  for (int64_t i = 0; i < a[1].element_count(); ++i) {
    EXPECT_GE(a[1].values<float>()[i], -1.0f);
    EXPECT_LE(a[1].values<float>()[i], 1.0f);
  }
  const auto b = random_inputs(specs, 5, 4, {{"ids", {10, 20}}});
  EXPECT_EQ(0, std::memcmp(a[1].data, b[1].data, a[1].bytes));  // deterministic from the seed
  const auto c = random_inputs(specs, 6, 4, {{"ids", {10, 20}}});
  EXPECT_NE(0, std::memcmp(a[1].data, c[1].data, a[1].bytes));
}

TEST(Tensor, StringInputsCannotBeGenerated) {
  EXPECT_THROW(random_inputs({{"s", ElementType::string, {1}, {}}}, 1), Error);
}

}  // namespace ortfleet
