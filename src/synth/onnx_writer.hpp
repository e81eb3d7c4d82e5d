#pragma once
// A minimal writer of ONNX protobuf messages, so that `ortfleet synth` needs neither Python nor
// libprotobuf. Large payloads (weights) are streamed straight to the file by a callback, never held
// in memory, so multi-gigabyte models cost no more RAM than small ones.
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ortfleet::onnx {

/// Writes exactly the number of bytes it was declared with.
using PayloadWriter = std::function<void(std::ostream&)>;

class ProtoMessage {
 public:
  ProtoMessage() = default;
  ProtoMessage(ProtoMessage&&) noexcept = default;
  ProtoMessage& operator=(ProtoMessage&&) noexcept = default;

  ProtoMessage& varint(int field, uint64_t value);
  ProtoMessage& int64(int field, int64_t value) { return varint(field, static_cast<uint64_t>(value)); }
  ProtoMessage& float32(int field, float value);
  ProtoMessage& bytes(int field, std::string_view value);
  ProtoMessage& message(int field, ProtoMessage child);
  /// A length-delimited field whose `size` bytes are produced by `writer` at write time.
  ProtoMessage& streamed(int field, uint64_t size, PayloadWriter writer);

  uint64_t size() const;
  void write(std::ostream& out) const;

 private:
  struct Part {
    std::string inline_bytes;              // tag + value, or tag alone for the two kinds below
    std::unique_ptr<ProtoMessage> child;   // nested message
    uint64_t payload_size = 0;             // streamed payload
    PayloadWriter payload;
  };
  std::vector<Part> parts_;
};

// ONNX enums used by the builders (onnx.proto).
enum class DataType : int { float32 = 1, uint8 = 2, int8 = 3, int32 = 6, int64 = 7, bool_ = 9, float16 = 10 };

/// A dimension: a fixed size, or a symbolic name ("batch").
struct Dim {
  int64_t value = 0;
  std::string param;
  Dim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor): shapes read as {1, 3, 224, 224}
  Dim(const char* p) : param(p) {}  // NOLINT(google-explicit-constructor)
};

ProtoMessage value_info(const std::string& name, DataType type, const std::vector<Dim>& shape);

/// An initializer whose bytes are produced while writing (size = element count × element size).
/// With an external_data location the proto only records where the bytes are; the caller streams
/// them to that file itself.
struct ExternalLocation {
  std::string file;  // relative to the model's folder
  uint64_t offset = 0;
  uint64_t length = 0;
};
ProtoMessage tensor(const std::string& name, DataType type, const std::vector<int64_t>& dims, uint64_t byte_size,
                    PayloadWriter payload);
ProtoMessage external_tensor(const std::string& name, DataType type, const std::vector<int64_t>& dims,
                             const ExternalLocation& where);
ProtoMessage int64_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values);
ProtoMessage float_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
ProtoMessage float_scalar_tensor(const std::string& name, float value);

/// A node attribute.
struct Attribute {
  std::string name;
  enum class Kind { f, i, s, ints } kind = Kind::i;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<int64_t> ints;
  static Attribute Float(std::string n, float v) { return {std::move(n), Kind::f, v, 0, {}, {}}; }
  static Attribute Int(std::string n, int64_t v) { return {std::move(n), Kind::i, 0, v, {}, {}}; }
  static Attribute String(std::string n, std::string v) { return {std::move(n), Kind::s, 0, 0, std::move(v), {}}; }
  static Attribute Ints(std::string n, std::vector<int64_t> v) { return {std::move(n), Kind::ints, 0, 0, {}, std::move(v)}; }
};

ProtoMessage node(const std::string& op_type, const std::string& name, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs, const std::vector<Attribute>& attributes = {},
                  const std::string& domain = {});

/// Assembles graph parts into a model (IR version 8, default-domain opset `opset`).
struct GraphParts {
  std::string name;
  std::vector<ProtoMessage> nodes;
  std::vector<ProtoMessage> initializers;
  std::vector<ProtoMessage> inputs;
  std::vector<ProtoMessage> outputs;
  std::vector<std::pair<std::string, int64_t>> domains;  ///< opsets of other domains the nodes use
};
ProtoMessage model(GraphParts graph, int64_t opset, const std::vector<std::pair<std::string, std::string>>& metadata);

}  // namespace ortfleet::onnx
