#include <gtest/gtest.h>

#include "ortfleet/base/error.hpp"
#include "engine/shapes/shapes.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace {
TensorSpec image_input() { return {"input", ElementType::float32, {-1, 3, 224, 224}, {"batch", "", "", ""}}; }

using test::error_of;
}  // namespace

TEST(Shapes, ParsesShapeListsAndBatchLists) {
  const auto two = parse_shape_list("input=1x3x224x224,input=8x3x224x224");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].at("input"), (std::vector<int64_t>{8, 3, 224, 224}));
  const auto several_inputs = parse_shape_list("ids=1x128,mask=1x128,ids=4x128,mask=4x128");
  ASSERT_EQ(several_inputs.size(), 2u);
  EXPECT_EQ(several_inputs[0].size(), 2u);
  EXPECT_EQ(to_string(several_inputs[1]), "ids=4x128,mask=4x128");
  EXPECT_EQ(parse_batch_list("1,2,4,8"), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_NE(error_of([] { parse_shape_list("input=1x0x3"); }).find("dims must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_list("input=1x-3"); }).find("dims must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_list("input"); }).find("is not name=dims"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_list("input=1xtwo"); }).find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_list("input=99999999999999999999x3"); }).find("'99999999999999999999' in 'input=99999999999999999999x3' is too large for a size"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_batch_list("1,0"); }).find("dims must be positive"), std::string::npos);
}

TEST(Shapes, BadShapesNameTheInputAndWhatTheModelExpects) {
  const std::vector<TensorSpec> inputs = {image_input()};
  check_shapes(inputs, {{"input", {2, 3, 224, 224}}});  // fits
  const std::string fixed = error_of([&] { check_shapes(inputs, {{"input", {2, 3, 100, 224}}}); });
  EXPECT_NE(fixed.find("input 'input' has shape [2, 3, 100, 224]; the model expects [batch, 3, 224, 224]"), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("Dim 2 is fixed at 224"), std::string::npos);
  EXPECT_NE(error_of([&] { check_shapes(inputs, {{"input", {3, 224, 224}}}); }).find("has 3 dims"), std::string::npos);
  EXPECT_NE(error_of([&] { check_shapes(inputs, {{"input", {0, 3, 224, 224}}}); }).find("its dynamic dim 0 is 0"), std::string::npos);
  EXPECT_NE(error_of([&] { check_shapes(inputs, {{"input", {-2, 3, 224, 224}}}); }).find("its dynamic dim 0 is -2"), std::string::npos);
  EXPECT_NE(error_of([&] { check_shapes(inputs, {{"input", {1, -3, 224, 224}}}); }).find("its dim 1 is -3"), std::string::npos);
  EXPECT_NE(error_of([&] { check_shapes(inputs, {{"image", {1, 3, 224, 224}}}); }).find("'image' is not an input of this model"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_shapes(inputs, {}); }).find("input 'input' [batch, 3, 224, 224] is missing"), std::string::npos);
}

// A dim the model itself fixes at 0 is what it expects: the shape fits (it used to be refused with
// "has shape [0, 3], with a dim of 0; the model expects [0, 3]").
TEST(Shapes, ADimTheModelFixesAtZeroFits) {
  const std::vector<TensorSpec> inputs = {{"x", ElementType::float32, {0, 3}, {"", ""}}};
  EXPECT_NO_THROW(check_shapes(inputs, {{"x", {0, 3}}}));
  EXPECT_NE(error_of([&] { check_shapes(inputs, {{"x", {1, 3}}}); }).find("Dim 0 is fixed at 0"), std::string::npos);
  ShapeOptions declared;
  declared.declared = {{{"x", {0, 3}}}};
  EXPECT_EQ(to_string(resolve_shapes(inputs, declared, 1).front()), "x=0x3");
}

TEST(Shapes, ResolvesDeclaredShapesAndBatches) {
  const std::vector<TensorSpec> inputs = {image_input(), {"scale", ElementType::float32, {1}, {""}}};
  ShapeOptions o;
  o.batches = {1, 4, 1};
  o.declared = {{{"input", {2, 3, 224, 224}}}};
  const auto shapes = resolve_shapes(inputs, o, 1);
  ASSERT_EQ(shapes.size(), 3u);  // the repeated batch 1 counts once
  EXPECT_EQ(to_string(shapes[0]), "input=2x3x224x224,scale=1");  // inputs left out take the model's dims
  EXPECT_EQ(to_string(shapes[2]), "input=4x3x224x224,scale=1");
  EXPECT_EQ(declared_batches(inputs, shapes), (std::vector<int64_t>{1, 2, 4}));
  o.max_sessions = 2;
  EXPECT_NE(error_of([&] { resolve_shapes(inputs, o, 1); }).find("3 input shapes were declared, more than the 2 sessions"), std::string::npos);
  ShapeOptions fixed_batch;
  fixed_batch.batches = {2};
  EXPECT_NE(error_of([&] { resolve_shapes({{"x", ElementType::float32, {1, 3}, {"", ""}}}, fixed_batch, 1); })
                .find("no input of this model has a dynamic first dim"),
            std::string::npos);
}

// Two inputs the model names a dim alike in (a token and its mask), given two sizes: said as such,
// whether declared up front or given to a run, rather than as whatever the graph trips on.
TEST(Shapes, InputsSharingASymbolicDimMustBeGivenOneSize) {
  const std::vector<TensorSpec> inputs = {{"input_ids", ElementType::int64, {1, -1}, {"", "sequence"}},
                                          {"attention_mask", ElementType::int64, {1, -1}, {"", "sequence"}},
                                          {"pixels", ElementType::float32, {-1, -1}, {"side", "side"}}};
  EXPECT_EQ(shared_dim_conflict(inputs, {{"input_ids", {1, 12}}, {"attention_mask", {1, 12}}, {"pixels", {4, 4}}}), std::nullopt);
  EXPECT_EQ(shared_dim_conflict(inputs, {{"input_ids", {1, 12}}}), std::nullopt);  // one input alone shares nothing
  EXPECT_EQ(shared_dim_conflict(inputs, {{"input_ids", {1, 10}}, {"attention_mask", {1, 12}}}).value_or(""),
            "inputs 'input_ids' [1, 10] and 'attention_mask' [1, 12] share dim 'sequence' but were given 10 and 12");
  EXPECT_EQ(shared_dim_conflict(inputs, {{"pixels", {4, 5}}}).value_or(""), "input 'pixels' [4, 5] names dims 0 and 1 both 'side' but was given 4 and 5");
  ShapeOptions declared;
  declared.declared = {{{"input_ids", {1, 10}}, {"attention_mask", {1, 12}}}};
  const std::string refused = error_of([&] { resolve_shapes(inputs, declared, 1); });
  EXPECT_NE(refused.find("declared shapes: inputs 'input_ids' [1, 10] and 'attention_mask' [1, 12] share dim 'sequence' but were given 10 "
                         "and 12: they must be equal"),
            std::string::npos)
      << refused;
}

TEST(Shapes, SizesFromAModelAreCheckedForOverflow) {
  const int64_t huge = int64_t{1} << 40;
  EXPECT_EQ(checked_element_count({huge}, "x"), huge);
  EXPECT_NE(error_of([&] { checked_element_count({huge, huge}, "input 'x'"); }).find("input 'x' of shape [1099511627776, 1099511627776] has more elements"),
            std::string::npos);
  EXPECT_THROW(checked_bytes({huge, 1 << 30}, ElementType::float32, "x"), Error);
  EXPECT_THROW(checked_element_count({-1, 3}, "x"), Error);
  Tensor t;
  t.shape = {huge, huge};
  EXPECT_THROW(t.element_count(), Error);
}

}  // namespace ortfleet
