#include "engine/files/model_view.hpp"

#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "base/content_hash.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
namespace {

constexpr const char* kInPlaceHint = "Give the path of an .onnx model ('ortfleet synth' writes test models)";

// Field numbers of onnx.proto3 this view reads or writes.
namespace in_place_field {
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorRawData = 9;
constexpr uint64_t kTensorExternalData = 13;
constexpr uint64_t kTensorDataLocation = 14;
constexpr uint64_t kEntryKey = 1;
constexpr uint64_t kEntryValue = 2;
constexpr uint64_t kExternal = 1;  // TensorProto.DataLocation.EXTERNAL
}  // namespace in_place_field

/// One protobuf field of a message held in memory.
struct Field {
  uint64_t number = 0;
  uint64_t wire = 0;
  uint64_t value = 0;            ///< a varint's value
  std::string_view payload;      ///< a length-delimited field's bytes
  std::string_view whole;        ///< the field as encoded, tag included
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  bool done() const { return pos_ >= bytes_.size(); }
  Field next() {
    const size_t start = pos_;
    const uint64_t tag = varint();
    Field f;
    f.number = tag >> 3;
    f.wire = tag & 7;
    switch (f.wire) {
      case 0: f.value = varint(); break;
      case 1: skip(8); break;
      case 5: skip(4); break;
      case 2: {
        const uint64_t n = varint();
        if (n > bytes_.size() - pos_) fail("a protobuf field runs past its end (truncated?)");
        f.payload = bytes_.substr(pos_, n);
        pos_ += n;
        break;
      }
      default: fail("invalid protobuf encoding");
    }
    f.whole = bytes_.substr(start, pos_ - start);
    return f;
  }

 private:
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) fail("truncated protobuf number");
      const auto byte = static_cast<unsigned char>(bytes_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("a protobuf number longer than 10 bytes");
  }
  void skip(size_t n) {
    if (n > bytes_.size() - pos_) fail("truncated protobuf field");
    pos_ += n;
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(path_ + ": " + what, kInPlaceHint); }

  std::string_view bytes_;
  size_t pos_ = 0;
  const std::string& path_;
};

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}
void put_bytes(std::string& out, uint64_t field, std::string_view bytes) {
  put_varint(out, field << 3 | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_entry(std::string& out, std::string_view key, std::string_view value) {
  std::string entry;
  put_bytes(entry, in_place_field::kEntryKey, key);
  put_bytes(entry, in_place_field::kEntryValue, value);
  put_bytes(out, in_place_field::kTensorExternalData, entry);
}

/// `tensor` with its raw_data replaced by a reference to where those bytes lie in the file (`base` is
/// the file's first byte; `raw` is set to them), or nullopt where it keeps its data (small, typed
/// fields, already external).
std::optional<std::string> pointing_in_place(std::string_view tensor, const char* base, const std::string& location, uint64_t min_bytes,
                                    const std::string& path, std::string_view& raw) {
  std::string out;
  out.reserve(tensor.size() < 4096 ? tensor.size() : 256);
  raw = {};
  for (Reader r(tensor, path); !r.done();) {
    const Field f = r.next();
    if (f.number == in_place_field::kTensorRawData && f.wire == 2) {
      raw = f.payload;
      continue;
    }
    // A tensor already stored elsewhere (or in a form this view does not know) is left whole.
    if (f.number == in_place_field::kTensorExternalData || f.number == in_place_field::kTensorDataLocation) return std::nullopt;
    out.append(f.whole);
  }
  if (raw.empty() || raw.size() < min_bytes) return std::nullopt;
  put_entry(out, "location", location);
  put_entry(out, "offset", std::to_string(raw.data() - base));
  put_entry(out, "length", std::to_string(raw.size()));
  put_varint(out, in_place_field::kTensorDataLocation << 3 | 0);
  put_varint(out, in_place_field::kExternal);
  return out;
}

}  // namespace

ModelView view_of(const std::string& path, const void* data, uint64_t size, uint64_t min_bytes) {
  const auto* base = static_cast<const char*>(data);
  const std::string location = std::filesystem::path(path).filename().string();
  ModelView view;
  std::string graph_model;  // the view's ModelProto
  std::string layout;       // what the layout hashes: the file with each weight left in place cut to its length
  auto cut = [&](const char* from, const char* to, uint64_t length) {
    layout.append(from, static_cast<size_t>(to - from));
    for (int shift = 0; shift < 64; shift += 8) layout.push_back(static_cast<char>((length >> shift) & 0xff));
  };
  const char* copied = base;  // the file up to here is in `layout`
  for (Reader model({base, size}, path); !model.done();) {
    const Field f = model.next();
    if (f.number != in_place_field::kModelGraph || f.wire != 2) {
      graph_model.append(f.whole);
      continue;
    }
    std::string graph;
    graph.reserve(f.payload.size() < (1 << 20) ? f.payload.size() : (1 << 20));
    for (Reader g(f.payload, path); !g.done();) {
      const Field field = g.next();
      if (field.number == in_place_field::kGraphInitializer && field.wire == 2) {
        std::string_view raw;
        if (auto tensor = pointing_in_place(field.payload, base, location, min_bytes, path, raw)) {
          put_bytes(graph, in_place_field::kGraphInitializer, *tensor);
          ++view.initializers;
          view.bytes += raw.size();
          cut(copied, raw.data(), raw.size());
          copied = raw.data() + raw.size();
          continue;
        }
      }
      graph.append(field.whole);
    }
    put_bytes(graph_model, in_place_field::kModelGraph, graph);
  }
  layout.append(copied, static_cast<size_t>(base + size - copied));
  view.layout = xxh64(layout.data(), layout.size());
  if (view.initializers > 0) view.model = std::move(graph_model);
  return view;
}

}  // namespace ortfleet::detail
