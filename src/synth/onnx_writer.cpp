#include "synth/onnx_writer.hpp"

#include <bit>
#include <cstring>

namespace ortfleet::onnx {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed32 = 5, kLengthDelimited = 2 };

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

uint64_t varint_size(uint64_t value) {
  uint64_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

void append_tag(std::string& out, int field, WireType type) {
  append_varint(out, (static_cast<uint64_t>(field) << 3) | type);
}

}  // namespace

ProtoMessage& ProtoMessage::varint(int field, uint64_t value) {
  Part part;
  append_tag(part.inline_bytes, field, kVarint);
  append_varint(part.inline_bytes, value);
  parts_.push_back(std::move(part));
  return *this;
}

ProtoMessage& ProtoMessage::float32(int field, float value) {
  Part part;
  append_tag(part.inline_bytes, field, kFixed32);
  const auto bits = std::bit_cast<uint32_t>(value);
  for (int shift = 0; shift < 32; shift += 8) part.inline_bytes.push_back(static_cast<char>((bits >> shift) & 0xff));
  parts_.push_back(std::move(part));
  return *this;
}

ProtoMessage& ProtoMessage::bytes(int field, std::string_view value) {
  Part part;
  append_tag(part.inline_bytes, field, kLengthDelimited);
  append_varint(part.inline_bytes, value.size());
  part.inline_bytes.append(value);
  parts_.push_back(std::move(part));
  return *this;
}

ProtoMessage& ProtoMessage::message(int field, ProtoMessage child) {
  Part part;
  append_tag(part.inline_bytes, field, kLengthDelimited);
  part.child = std::make_unique<ProtoMessage>(std::move(child));
  parts_.push_back(std::move(part));
  return *this;
}

ProtoMessage& ProtoMessage::streamed(int field, uint64_t size, PayloadWriter writer) {
  Part part;
  append_tag(part.inline_bytes, field, kLengthDelimited);
  part.payload_size = size;
  part.payload = std::move(writer);
  parts_.push_back(std::move(part));
  return *this;
}

uint64_t ProtoMessage::size() const {
  uint64_t total = 0;
  for (const auto& part : parts_) {
    total += part.inline_bytes.size();
    if (part.child) {
      const uint64_t n = part.child->size();
      total += varint_size(n) + n;
    } else if (part.payload) {
      total += varint_size(part.payload_size) + part.payload_size;
    }
  }
  return total;
}

void ProtoMessage::write(std::ostream& out) const {
  for (const auto& part : parts_) {
    out.write(part.inline_bytes.data(), static_cast<std::streamsize>(part.inline_bytes.size()));
    std::string length;
    if (part.child) {
      append_varint(length, part.child->size());
      out.write(length.data(), static_cast<std::streamsize>(length.size()));
      part.child->write(out);
    } else if (part.payload) {
      append_varint(length, part.payload_size);
      out.write(length.data(), static_cast<std::streamsize>(length.size()));
      part.payload(out);
    }
  }
}

// Field numbers below are those of onnx.proto.
namespace {
ProtoMessage shape_of(const std::vector<Dim>& shape) {
  ProtoMessage tensor_shape;
  for (const auto& d : shape) {
    ProtoMessage dim;
    if (d.param.empty()) {
      dim.int64(1, d.value);
    } else {
      dim.bytes(2, d.param);
    }
    tensor_shape.message(1, std::move(dim));
  }
  return tensor_shape;
}

ProtoMessage tensor_header(const std::string& name, DataType type, const std::vector<int64_t>& dims) {
  ProtoMessage t;
  for (int64_t d : dims) t.int64(1, d);
  t.varint(2, static_cast<uint64_t>(type));
  t.bytes(8, name);
  return t;
}
}  // namespace

ProtoMessage value_info(const std::string& name, DataType type, const std::vector<Dim>& shape) {
  ProtoMessage tensor_type;
  tensor_type.varint(1, static_cast<uint64_t>(type));
  tensor_type.message(2, shape_of(shape));
  ProtoMessage type_proto;
  type_proto.message(1, std::move(tensor_type));
  ProtoMessage info;
  info.bytes(1, name);
  info.message(2, std::move(type_proto));
  return info;
}

ProtoMessage tensor(const std::string& name, DataType type, const std::vector<int64_t>& dims, uint64_t byte_size,
                    PayloadWriter payload) {
  ProtoMessage t = tensor_header(name, type, dims);
  t.streamed(9, byte_size, std::move(payload));  // raw_data
  return t;
}

ProtoMessage external_tensor(const std::string& name, DataType type, const std::vector<int64_t>& dims,
                             const ExternalLocation& where) {
  ProtoMessage t = tensor_header(name, type, dims);
  auto entry = [](std::string_view key, const std::string& value) {
    ProtoMessage kv;
    kv.bytes(1, key);
    kv.bytes(2, value);
    return kv;
  };
  t.message(13, entry("location", where.file));
  t.message(13, entry("offset", std::to_string(where.offset)));
  t.message(13, entry("length", std::to_string(where.length)));
  t.varint(14, 1);  // data_location = EXTERNAL
  return t;
}

ProtoMessage int64_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
  std::string raw(values.size() * sizeof(int64_t), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());  // little-endian host, as ONNX raw_data requires
  ProtoMessage t = tensor_header(name, DataType::int64, dims);
  t.bytes(9, raw);
  return t;
}

ProtoMessage float_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  std::string raw(values.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  ProtoMessage t = tensor_header(name, DataType::float32, dims);
  t.bytes(9, raw);
  return t;
}

ProtoMessage float_scalar_tensor(const std::string& name, float value) { return float_tensor(name, {}, {value}); }

ProtoMessage node(const std::string& op_type, const std::string& name, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs, const std::vector<Attribute>& attributes,
                  const std::string& domain) {
  ProtoMessage n;
  for (const auto& in : inputs) n.bytes(1, in);
  for (const auto& out : outputs) n.bytes(2, out);
  n.bytes(3, name);
  n.bytes(4, op_type);
  for (const auto& a : attributes) {
    ProtoMessage attr;
    attr.bytes(1, a.name);
    switch (a.kind) {
      case Attribute::Kind::f:
        attr.float32(2, a.f).varint(20, 1);
        break;
      case Attribute::Kind::i:
        attr.int64(3, a.i).varint(20, 2);
        break;
      case Attribute::Kind::s:
        attr.bytes(4, a.s).varint(20, 3);
        break;
      case Attribute::Kind::ints:
        for (int64_t v : a.ints) attr.int64(8, v);
        attr.varint(20, 7);
        break;
    }
    n.message(5, std::move(attr));
  }
  if (!domain.empty()) n.bytes(7, domain);
  return n;
}

ProtoMessage model(GraphParts parts, int64_t opset, const std::vector<std::pair<std::string, std::string>>& metadata) {
  ProtoMessage graph;
  for (auto& n : parts.nodes) graph.message(1, std::move(n));
  graph.bytes(2, parts.name);
  for (auto& t : parts.initializers) graph.message(5, std::move(t));
  for (auto& v : parts.inputs) graph.message(11, std::move(v));
  for (auto& v : parts.outputs) graph.message(12, std::move(v));

  ProtoMessage m;
  m.int64(1, 8);  // ir_version 8 (ONNX 1.10+), understood by every ONNX Runtime we support
  m.bytes(2, "ortfleet synth");
  m.bytes(3, "1");
  ProtoMessage opset_id;
  opset_id.bytes(1, "");
  opset_id.int64(2, opset);
  m.message(8, std::move(opset_id));
  for (const auto& [domain, version] : parts.domains) {
    ProtoMessage other;
    other.bytes(1, domain);
    other.int64(2, version);
    m.message(8, std::move(other));
  }
  m.message(7, std::move(graph));
  for (const auto& [key, value] : metadata) {
    ProtoMessage kv;
    kv.bytes(1, key);
    kv.bytes(2, value);
    m.message(14, std::move(kv));
  }
  return m;
}

}  // namespace ortfleet::onnx
