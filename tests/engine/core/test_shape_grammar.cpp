// The one grammar of shapes and sizes (ortfleet/engine/shape_grammar.hpp): every form it reads, and
// errors that name the text, the character and an example.
#include <gtest/gtest.h>

#include "diagnostics/shape_stream.hpp"
#include "engine/core/shape_grammar.hpp"
#include "ortfleet/base/error.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace {
std::vector<int64_t> all_sizes(const DimSizes& sizes) {
  std::vector<int64_t> out;
  for (uint64_t i = 0; i < sizes.count(); ++i) out.push_back(sizes.at(i));
  return out;
}
}  // namespace

TEST(ShapeGrammar, ReadsShapeLists) {
  const auto one = parse_shape_list("input=1x3x224x224");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].at("input"), (std::vector<int64_t>{1, 3, 224, 224}));
  // Spaces around any part; names may hold dots, 'x' and spaces inside.
  const auto spaced = parse_shape_list(" ids = 1 x 128 , attention mask.x=1x128 ");
  ASSERT_EQ(spaced.size(), 1u);
  EXPECT_EQ(spaced[0].at("ids"), (std::vector<int64_t>{1, 128}));
  EXPECT_EQ(spaced[0].at("attention mask.x"), (std::vector<int64_t>{1, 128}));
  EXPECT_EQ(parse_shape_list("x=1x3,x=8x3").size(), 2u);  // a name again starts the next signature
  EXPECT_EQ(to_string(parse_shape_list("b=2,a=1x4")[0]), "a=1x4,b=2");
}

TEST(ShapeGrammar, ReadsSizesAsListsAndRanges) {
  EXPECT_EQ(parse_batch_list("1,2,4,8"), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(parse_batch_list("2,1,2"), (std::vector<int64_t>{2, 1, 2}));  // as written: a shape mix cycles through it
  EXPECT_EQ(parse_batch_list("8:32:8"), (std::vector<int64_t>{8, 16, 24, 32}));
  EXPECT_EQ(parse_batch_list("[1, 2]"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(parse_batch_list("4"), (std::vector<int64_t>{4}));
  EXPECT_EQ(parse_batch_list("5:5:3"), (std::vector<int64_t>{5}));
}

TEST(ShapeGrammar, ReadsBuckets) {
  const auto listed = parse_buckets("x.2=640,480,960,480");
  EXPECT_EQ(listed.input, "x");
  EXPECT_EQ(listed.dim, 2);
  EXPECT_EQ(listed.sizes, (std::vector<int64_t>{480, 640, 960}));  // sorted, each once
  EXPECT_EQ(parse_buckets("x.3=320:900:128").sizes, (std::vector<int64_t>{320, 448, 576, 704, 832, 900}));
  EXPECT_EQ(parse_buckets("x.2=[480,640]"), parse_buckets("x.2=480,640"));  // two spellings, one meaning
  EXPECT_EQ(parse_buckets("x.3=[320:960:320]").sizes, (std::vector<int64_t>{320, 640, 960}));
  EXPECT_EQ(to_string(parse_buckets("x.3=320:960:320")), "x.3=320,640,960");
}

TEST(ShapeGrammar, ReadsPatternsWhoseDimsTakeSeveralSizes) {
  const auto pattern = parse_shape_pattern("x=1x3x[320:960:32]x[480,640,960],mask=1x[8:20:8]");
  ASSERT_EQ(pattern.size(), 2u);
  const auto& x = pattern.at("x");
  ASSERT_EQ(x.size(), 4u);
  EXPECT_EQ(all_sizes(x[0]), (std::vector<int64_t>{1}));
  EXPECT_EQ(x[2].count(), 21u);
  EXPECT_EQ(x[2].at(0), 320);
  EXPECT_EQ(x[2].at(20), 960);
  EXPECT_EQ(all_sizes(x[3]), (std::vector<int64_t>{480, 640, 960}));
  EXPECT_EQ(all_sizes(pattern.at("mask")[1]), (std::vector<int64_t>{8, 16, 20}));  // a last step short of the end adds the end
  // A long range is not spelled out to be drawn from.
  const auto wide = parse_shape_pattern("ids=1x[1:4000000000000:1]");
  EXPECT_EQ(wide.at("ids")[1].count(), 4000000000000u);
  EXPECT_EQ(wide.at("ids")[1].at(4000000000000u - 1), 4000000000000);
}

TEST(ShapeGrammar, AStreamDrawsWhatItDrewBeforeTheGrammarWasShared) {
  // The first calls of seed 1, as the stream's own parser drew them (exact ranges draw as before).
  const auto stream = detail::parse_shape_stream("x=1x3x[320:960:32]x[320:960:32]", 4, 1);
  ASSERT_EQ(stream.size(), 4u);
  EXPECT_EQ(to_string(stream[0]), "x=1x3x896x704");
  EXPECT_EQ(to_string(stream[1]), "x=1x3x960x896");
  EXPECT_EQ(to_string(stream[2]), "x=1x3x480x576");
  EXPECT_EQ(to_string(stream[3]), "x=1x3x768x512");
  for (const auto& call : detail::parse_shape_stream("x=[2,4]x[10:11:1]", 20, 3)) {
    const auto& dims = call.at("x");
    EXPECT_TRUE(dims[0] == 2 || dims[0] == 4);
    EXPECT_TRUE(dims[1] == 10 || dims[1] == 11);
  }
}

TEST(ShapeGrammar, ErrorsNameTheTextThePositionAndAnExample) {
  const Error bad = test::error_from([] { parse_shape_list("input=1x3xtwo"); });
  EXPECT_EQ(bad.what_failed(), "'two' in 'input=1x3xtwo' is not a whole number (at character 11)");
  EXPECT_NE(bad.hint().find("name=1x3x224x224"), std::string::npos) << bad.hint();
  EXPECT_NE(bad.hint().find("docs/inference.md#writing-shapes-and-sizes"), std::string::npos) << bad.hint();

  const std::vector<std::pair<std::string, std::string>> shape_lists = {
      {"input", "'input' is not name=dims (at character 1)"},
      {"=1x3", "'=1x3' is not name=dims (at character 1)"},
      {"a=1,b=", "'b=' in 'a=1,b=' is not name=dims (at character 5)"},
      {"x=1x0", "'0' in 'x=1x0' is not positive: dims must be positive (at character 5)"},
      {"x=1x-3", "'-3' in 'x=1x-3' is not positive: dims must be positive (at character 5)"},
      {"x=1x", "'x=1x' ends where a size should be (at character 5)"},
      {"x=1x3,", "'x=1x3,' is not name=dims (at character 7)"},
      {"x=1xx3", "'x' in 'x=1xx3' stands where a size should be (at character 5)"},
      {"x=1x99999999999999999999", "'99999999999999999999' in 'x=1x99999999999999999999' is too large for a size (at character 5)"},
      {"x=1x[2,3]", "'[2,3]' in 'x=1x[2,3]' gives several sizes, and these shapes take one size per dim (at character 5)"},
      {"x=1x2:4:1", "'2:4:1' in 'x=1x2:4:1' is a range, and these shapes take one size per dim (at character 5)"},
      {"x=1x3]", "']' in 'x=1x3]' is not expected here (at character 6)"},
  };
  for (const auto& [text, message] : shape_lists) EXPECT_EQ(test::error_from([&] { parse_shape_list(text); }).what_failed(), message) << text;
  EXPECT_EQ(test::error_from([] { parse_shape_list(""); }).what_failed(), "no shape given");

  const std::vector<std::pair<std::string, std::string>> patterns = {
      {"x=1x[320:960]", "'320:960' in 'x=1x[320:960]' is not first:last:step (at character 6)"},
      {"x=1x[9:1:1]", "'9:1:1' in 'x=1x[9:1:1]' is not first:last:step with first <= last (at character 6)"},
      {"x=1x[1:2:3:4]", "'1:2:3:4' in 'x=1x[1:2:3:4]' is not first:last:step (at character 6)"},
      {"x=1x[1,2", "'[1,2' in 'x=1x[1,2' opens a '[' that does not close (at character 5)"},
      {"x=1x[1,2x3", "'x' in 'x=1x[1,2x3' is not expected here: a ']' is (at character 9)"},
      {"x=1x[]", "']' in 'x=1x[]' stands where a size should be (at character 6)"},
      {"x=1x2:4:1", "'2:4:1' in 'x=1x2:4:1' is a range: write it in brackets, [320:960:32] (at character 5)"},
      {"x=1,x=2", "'x' in 'x=1,x=2' names an input a second time (at character 5)"},
  };
  for (const auto& [text, message] : patterns) EXPECT_EQ(test::error_from([&] { parse_shape_pattern(text); }).what_failed(), message) << text;
  EXPECT_NE(test::error_from([] { parse_shape_pattern("x=1x[1:2]"); }).hint().find("x=1x3x[320:960:32]"), std::string::npos);

  EXPECT_EQ(test::error_from([] { parse_batch_list("1,0"); }).what_failed(), "'0' in '1,0' is not positive: dims must be positive (at character 3)");
  EXPECT_EQ(test::error_from([] { parse_batch_list("1,2,"); }).what_failed(), "'1,2,' ends where a size should be (at character 5)");
  EXPECT_EQ(test::error_from([] { parse_batch_list("1x2"); }).what_failed(), "'x' in '1x2' is not expected here (at character 2)");
  EXPECT_EQ(test::error_from([] { parse_batch_list(" "); }).what_failed(), "no batch size given");
  EXPECT_NE(test::error_from([] { parse_batch_list("1;2"); }).hint().find("1,2,4,8"), std::string::npos);
  EXPECT_EQ(test::error_from([] { parse_batch_list("1:2000:1"); }).what_failed(), "'1:2000:1' makes more than 1024 sizes");

  EXPECT_EQ(test::error_from([] { parse_buckets("x=1"); }).what_failed(), "'x=1' is not input.dim=sizes (at character 1)");
  EXPECT_EQ(test::error_from([] { parse_buckets("x.a=1"); }).what_failed(), "'a' in 'x.a=1' is not a dim index (at character 3)");
  EXPECT_EQ(test::error_from([] { parse_buckets("x.2=1:2"); }).what_failed(), "'1:2' in 'x.2=1:2' is not first:last:step (at character 5)");
  EXPECT_EQ(test::error_from([] { parse_buckets("x.2=8:1:1"); }).what_failed(),
            "'8:1:1' in 'x.2=8:1:1' is not first:last:step with first <= last (at character 5)");
  EXPECT_EQ(test::error_from([] { parse_buckets("x.2=1:99999:1"); }).what_failed(), "'x.2=1:99999:1' makes more than 1024 sizes");
  EXPECT_NE(test::error_from([] { parse_buckets("x.2=0"); }).hint().find("x.2=480,640,960"), std::string::npos);
}

}  // namespace ortfleet
