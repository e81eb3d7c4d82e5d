#include <gtest/gtest.h>

#include <sstream>

#include "synth/onnx_writer.hpp"

namespace ortfleet::onnx {

namespace {
std::string bytes_of(const ProtoMessage& m) {
  std::ostringstream out;
  m.write(out);
  return out.str();
}
}  // namespace

TEST(OnnxWriter, EncodesVarintsAsProtobufDoes) {
  ProtoMessage m;
  m.varint(1, 300);  // tag 0x08, then 300 = 0xAC 0x02
  EXPECT_EQ(bytes_of(m), std::string("\x08\xAC\x02", 3));
  EXPECT_EQ(m.size(), 3u);
}

TEST(OnnxWriter, NegativeInt64sTakeTenBytes) {
  ProtoMessage m;
  m.int64(2, -1);
  const std::string b = bytes_of(m);
  ASSERT_EQ(b.size(), 11u);
  EXPECT_EQ(static_cast<unsigned char>(b[0]), 0x10);
  EXPECT_EQ(static_cast<unsigned char>(b[10]), 0x01);
}

TEST(OnnxWriter, NestedAndStreamedFieldsCarryTheirLengths) {
  ProtoMessage child;
  child.bytes(1, "ab");
  ProtoMessage m;
  m.message(3, std::move(child));
  m.streamed(4, 5, [](std::ostream& out) { out << "hello"; });
  m.float32(5, 1.0f);
  const std::string b = bytes_of(m);
  EXPECT_EQ(b, std::string("\x1a\x04\x0a\x02" "ab" "\x22\x05" "hello" "\x2d\x00\x00\x80\x3f", 18));
  EXPECT_EQ(m.size(), b.size());
}

TEST(OnnxWriter, ExternalTensorsRecordLocationOffsetAndLength) {
  const std::string b = bytes_of(external_tensor("w", DataType::float32, {2, 3}, {"m.onnx.data", 4096, 24}));
  for (const char* needle : {"location", "m.onnx.data", "offset", "4096", "length", "24"}) {
    EXPECT_NE(b.find(needle), std::string::npos) << needle;
  }
}

}  // namespace ortfleet::onnx
