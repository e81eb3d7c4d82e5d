#include "ortfleet/engine/model_file.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <functional>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>

#include "base/file_reading.hpp"
#include "ortfleet/base/output_file.hpp"  // describe_file
#include "engine/files/mapped_file.hpp"
#include "engine/files/model_file.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {

constexpr const char* kModelHint = "Give the path of an .onnx model ('ortfleet synth' writes test models)";

class FileReader {
 public:
  // Never waiting on a named pipe put at the path: ok() is false for anything but a file.
  explicit FileReader(const std::string& path) {
    try {
      fd_ = detail::open_file_to_read(path, "model file", kModelHint).fd.release();
    } catch (const Error&) {
      errno = EINVAL;
    }
  }
  ~FileReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  bool ok() const { return fd_ >= 0; }
  size_t read(uint64_t offset, void* buffer, size_t n) const {
    const ssize_t got = ::pread(fd_, buffer, n, static_cast<off_t>(offset));
    return got < 0 ? 0 : static_cast<size_t>(got);
  }

 private:
  int fd_ = -1;
};

/// Reads a protobuf varint at `pos`, advancing it; nullopt past the end or if longer than 10 bytes.
std::optional<uint64_t> read_varint(const FileReader& file, uint64_t& pos, uint64_t size) {
  unsigned char bytes[10];
  const size_t got = file.read(pos, bytes, static_cast<size_t>(std::min<uint64_t>(10, size - pos)));
  uint64_t value = 0;
  for (size_t i = 0; i < got; ++i) {
    value |= static_cast<uint64_t>(bytes[i] & 0x7f) << (7 * i);
    if ((bytes[i] & 0x80) == 0) {
      pos += i + 1;
      return value;
    }
  }
  return std::nullopt;
}

bool looks_like_text(const FileReader& file, uint64_t size) {
  unsigned char head[256];
  const size_t n = file.read(0, head, static_cast<size_t>(std::min<uint64_t>(sizeof(head), size)));
  for (size_t i = 0; i < n; ++i) {
    if (!std::isprint(head[i]) && !std::isspace(head[i])) return false;
  }
  return n > 0;
}

/// The model files found valid, by path and identity. One start hands its model through several
/// layers (the Fleet, the start, the session, the model cache), each of which must be able to trust
/// it: the walk of its fields runs once per version of the file, and the others find it here.
class ValidatedFiles {
 public:
  bool contains(const std::string& path, const detail::FileIdentity& identity) {
    std::lock_guard lock(mutex_);
    const auto it = files_.find(path);
    return it != files_.end() && it->second == identity;
  }
  void add(const std::string& path, const detail::FileIdentity& identity) {
    std::lock_guard lock(mutex_);
    if (files_.size() >= kMaxFiles) files_.clear();  // a long-lived process that saw many models
    files_[path] = identity;
  }

 private:
  static constexpr size_t kMaxFiles = 256;
  std::mutex mutex_;
  std::map<std::string, detail::FileIdentity> files_;
};

ValidatedFiles& validated_files() {
  static ValidatedFiles files;
  return files;
}

/// What inspect_model found, by path and identity: a start reads a model's graph once (the model
/// cache's format choice asks while ONNX Runtime loads, and again when the session looks its entry up).
class InspectedFiles {
 public:
  std::optional<ModelFacts> find(const std::string& path, const detail::FileIdentity& identity) {
    std::lock_guard lock(mutex_);
    const auto it = files_.find(path);
    if (it == files_.end() || !(it->second.first == identity)) return std::nullopt;
    return it->second.second;
  }
  void add(const std::string& path, const detail::FileIdentity& identity, const ModelFacts& facts) {
    std::lock_guard lock(mutex_);
    if (files_.size() >= kMaxFiles) files_.clear();
    files_[path] = {identity, facts};
  }

 private:
  static constexpr size_t kMaxFiles = 64;
  std::mutex mutex_;
  std::map<std::string, std::pair<detail::FileIdentity, ModelFacts>> files_;
};

/// Throws ortfleet::Error when `path` is no readable ONNX model: a walk of its top-level fields.
void check_model_file(const std::string& path) {
  std::error_code ec;
  if (path.empty()) throw Error("no model path given", kModelHint);
  if (!fs::exists(path, ec)) {
    if (ec == std::errc::too_many_symbolic_link_levels) {
      throw Error("model file " + path + " is a symbolic link loop", "Point the link (or one it leads to) at the real model file");
    }
    if (ec) throw Error("cannot reach model file " + path + ": " + ec.message(), "Check the permissions of its folders");
    std::error_code link_ec;
    if (fs::is_symlink(fs::symlink_status(path, link_ec))) {
      throw Error("model file " + path + " is a symbolic link to " + fs::read_symlink(path, link_ec).string() +
                      ", which does not exist",
                  "Point the link at the real model file");
    }
    throw Error("model file " + path + " does not exist", kModelHint);
  }
  if (fs::is_directory(path, ec)) throw Error(path + " is a folder, not a model file", kModelHint);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) throw Error(path + " is " + describe_file(st) + ", not a model file", kModelHint);
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw Error("cannot read the size of " + path + ": " + ec.message(), kModelHint);
  if (size == 0) throw Error("model file " + path + " is empty", kModelHint);
  FileReader file(path);
  if (!file.ok()) throw Error("cannot open model file " + path + ": " + std::strerror(errno), "Check its permissions");

  // Walk the top-level fields of ModelProto: a real model is a handful of well-formed fields that end
  // exactly at the end of the file, one of them the graph (field 7). Anything else is not ONNX.
  auto not_onnx = [&](const std::string& why) -> Error {
    const std::string kind = looks_like_text(file, size) ? " (it looks like a text file)" : "";
    return Error(path + " is not an ONNX model" + kind + ": " + why, kModelHint);
  };
  uint64_t pos = 0;
  bool has_graph = false;
  while (pos < size) {
    auto tag = read_varint(file, pos, size);
    if (!tag) throw not_onnx("unreadable field header at byte " + std::to_string(pos));
    const uint64_t field = *tag >> 3;
    const uint64_t wire = *tag & 7;
    if (field == 0 || field > 64) throw not_onnx("unexpected field " + std::to_string(field) + " at the top level");
    switch (wire) {
      case 0:
        if (!read_varint(file, pos, size)) throw not_onnx("truncated number");
        break;
      case 1: pos += 8; break;
      case 5: pos += 4; break;
      case 2: {
        auto length = read_varint(file, pos, size);
        if (!length || *length > size - pos) {
          throw not_onnx("a field runs past the end of the file (truncated download?)");
        }
        pos += *length;
        if (field == 7) has_graph = true;
        break;
      }
      default: throw not_onnx("invalid field encoding");
    }
  }
  if (pos != size) throw not_onnx("the last field runs past the end of the file (truncated?)");
  if (!has_graph) throw not_onnx("it has no graph");
}

}  // namespace

void validate_model_file(const std::string& path) {
  // Its identity before the walk: a file written meanwhile has another, and is walked again next time.
  const auto identity = path.empty() ? std::nullopt : detail::identity_of(path);
  if (identity && identity->regular && validated_files().contains(path, *identity)) return;
  check_model_file(path);
  if (identity && identity->regular) validated_files().add(path, *identity);
}

namespace {

/// Sequential reads of protobuf fields through a file, skipping payloads we do not need.
class ProtoCursor {
 public:
  ProtoCursor(const FileReader& file, uint64_t begin, uint64_t end) : file_(file), pos_(begin), end_(end) {}
  bool done() const { return pos_ >= end_; }
  struct Field {
    uint64_t number;
    uint64_t wire;
    uint64_t value;   // varint value, or payload length
    uint64_t offset;  // where a length-delimited payload starts
  };
  Field next(const std::string& path) {
    auto tag = read_varint(file_, pos_, end_);
    if (!tag) throw Error(path + ": unreadable protobuf field", kModelHint);
    Field f{*tag >> 3, *tag & 7, 0, 0};
    switch (f.wire) {
      case 0: {
        auto v = read_varint(file_, pos_, end_);
        if (!v) throw Error(path + ": truncated protobuf number", kModelHint);
        f.value = *v;
        break;
      }
      case 1: pos_ += 8; break;
      case 5: pos_ += 4; break;
      case 2: {
        auto len = read_varint(file_, pos_, end_);
        if (!len || *len > end_ - pos_) throw Error(path + ": a protobuf field runs past its end (truncated?)", kModelHint);
        f.value = *len;
        f.offset = pos_;
        pos_ += *len;
        break;
      }
      default: throw Error(path + ": invalid protobuf encoding", kModelHint);
    }
    return f;
  }
  std::string string_of(const Field& f) const {
    std::string s(static_cast<size_t>(std::min<uint64_t>(f.value, 4096)), '\0');
    file_.read(f.offset, s.data(), s.size());
    return s;
  }

 private:
  const FileReader& file_;
  uint64_t pos_;
  uint64_t end_;
};

/// Calls `inside` with a cursor over each message in field `number` of the message `outer` reads.
void each_message(const FileReader& file, ProtoCursor& outer, uint64_t number, const std::string& path,
                  const std::function<void(ProtoCursor&)>& inside) {
  while (!outer.done()) {
    const auto n = outer.next(path);
    if (n.number != number || n.wire != 2) continue;
    ProtoCursor c(file, n.offset, n.offset + n.value);
    inside(c);
  }
}

uint64_t onnx_element_size(uint64_t data_type) {
  switch (data_type) {
    case 1: case 6: case 12: return 4;   // float, int32, uint32
    case 2: case 3: case 9: return 1;    // uint8, int8, bool
    case 4: case 5: case 10: case 16: return 2;
    case 7: case 11: case 13: return 8;  // int64, double, uint64
    default: return 0;
  }
}

/// A ValueInfoProto (name = 1, type = 2) as ONNX Runtime describes an input or output: a tensor's
/// element type and dims (TypeProto.tensor_type = 1 -> elem_type = 1, shape = 2 -> dim = 1 -> dim_value
/// = 1 | dim_param = 2), a dim without a size -1 (a negative size too, as ONNX Runtime reads it), named
/// by its dim_param; another type (a sequence, a map) as undefined.
TensorSpec value_info(const FileReader& file, const ProtoCursor::Field& field, const std::string& path) {
  TensorSpec spec;
  spec.type = ElementType::undefined;
  ProtoCursor info(file, field.offset, field.offset + field.value);
  while (!info.done()) {
    const auto v = info.next(path);
    if (v.number == 1 && v.wire == 2) spec.name = info.string_of(v);
    if (v.number != 2 || v.wire != 2) continue;
    ProtoCursor type(file, v.offset, v.offset + v.value);
    each_message(file, type, 1, path, [&](ProtoCursor& tensor) {
      while (!tensor.done()) {
        const auto t = tensor.next(path);
        if (t.number == 1 && t.wire == 0) spec.type = static_cast<ElementType>(t.value);
        if (t.number != 2 || t.wire != 2) continue;
        ProtoCursor shape(file, t.offset, t.offset + t.value);
        each_message(file, shape, 1, path, [&](ProtoCursor& dim) {
          int64_t size = -1;
          std::string name;
          while (!dim.done()) {
            const auto d = dim.next(path);
            if (d.number == 1 && d.wire == 0) size = std::max<int64_t>(static_cast<int64_t>(d.value), -1);
            if (d.number == 2 && d.wire == 2) name = dim.string_of(d);
          }
          spec.shape.push_back(size);
          spec.dim_names.push_back(size >= 0 ? "" : name);
        });
      }
    });
  }
  return spec;
}

}  // namespace

namespace {
/// The walk of a model's fields inspect_model() remembers.
ModelFacts inspect_model_file(const std::string& path) {
  validate_model_file(path);
  FileReader file(path);
  const uint64_t size = fs::file_size(path);
  ModelFacts facts;
  std::set<std::string> initializer_names;
  ProtoCursor model(file, 0, size);
  while (!model.done()) {
    const auto f = model.next(path);
    if (f.number == 1 && f.wire == 0) facts.ir_version = static_cast<int64_t>(f.value);
    if (f.number == 8 && f.wire == 2) {  // opset_import {domain=1, version=2}
      ProtoCursor opset(file, f.offset, f.offset + f.value);
      std::string domain;
      int64_t version = 0;
      while (!opset.done()) {
        const auto o = opset.next(path);
        if (o.number == 1 && o.wire == 2) domain = opset.string_of(o);
        if (o.number == 2 && o.wire == 0) version = static_cast<int64_t>(o.value);
      }
      if (domain.empty() || domain == "ai.onnx") facts.opset = version;
    }
    if (f.number != 7 || f.wire != 2) continue;
    ProtoCursor graph(file, f.offset, f.offset + f.value);
    while (!graph.done()) {
      const auto g = graph.next(path);
      if (g.wire != 2) continue;
      if (g.number == 1) {  // NodeProto: op_type = 4
        ++facts.nodes;
        ProtoCursor node(file, g.offset, g.offset + g.value);
        while (!node.done()) {
          const auto n = node.next(path);
          if (n.number == 4 && n.wire == 2) ++facts.op_counts[node.string_of(n)];
        }
      } else if (g.number == 5) {  // TensorProto: dims = 1, data_type = 2, data_location = 14
        ++facts.initializers;
        ProtoCursor tensor(file, g.offset, g.offset + g.value);
        uint64_t elements = 1;
        uint64_t type = 0;
        while (!tensor.done()) {
          const auto t = tensor.next(path);
          if (t.number == 8 && t.wire == 2) initializer_names.insert(tensor.string_of(t));
          if (t.number == 1 && t.wire == 0) elements *= t.value;
          if (t.number == 1 && t.wire == 2) {  // packed dims
            uint64_t pos = t.offset;
            while (pos < t.offset + t.value) {
              auto d = read_varint(file, pos, t.offset + t.value);
              if (!d) break;
              elements *= *d;
            }
          }
          if (t.number == 2 && t.wire == 0) type = t.value;
          if (t.number == 14 && t.wire == 0 && t.value == 1) facts.external_data = true;
        }
        facts.initializer_bytes += elements * onnx_element_size(type);
      } else if (g.number == 11 || g.number == 12) {  // ValueInfoProto
        TensorSpec spec = value_info(file, g, path);
        if (g.number == 11) {
          for (size_t i = 0; i < spec.shape.size(); ++i) {
            if (spec.shape[i] >= 0) continue;
            facts.dynamic_dims.push_back(spec.name + "[" + std::to_string(i) + "]" + (spec.dim_names[i].empty() ? "" : " (" + spec.dim_names[i] + ")"));
          }
        }
        (g.number == 11 ? facts.inputs : facts.outputs).push_back(spec.name);
        (g.number == 11 ? facts.input_specs : facts.output_specs).push_back(std::move(spec));
      }
    }
  }
  // An initializer listed among the graph's inputs (IR version 3 lists them all) is no input a run
  // gives: ONNX Runtime leaves it out of the session's inputs too.
  std::erase_if(facts.input_specs, [&](const TensorSpec& spec) { return initializer_names.count(spec.name) > 0; });
  return facts;
}
}  // namespace

ModelFacts inspect_model(const std::string& path) {
  static InspectedFiles inspected;
  const auto identity = detail::identity_of(path);
  if (identity && identity->regular) {
    if (auto known = inspected.find(path, *identity)) return *known;
  }
  ModelFacts facts = inspect_model_file(path);
  if (identity && identity->regular) inspected.add(path, *identity, facts);
  return facts;
}


}  // namespace ortfleet

namespace ortfleet::detail {

std::vector<InitializerBytes> initializer_bytes(const std::string& path) {
  validate_model_file(path);
  FileReader file(path);
  const uint64_t size = fs::file_size(path);
  const fs::path folder = fs::absolute(path).parent_path();
  std::vector<InitializerBytes> out;
  ProtoCursor model(file, 0, size);
  while (!model.done()) {
    const auto f = model.next(path);
    if (f.number != 7 || f.wire != 2) continue;  // the graph
    ProtoCursor graph(file, f.offset, f.offset + f.value);
    while (!graph.done()) {
      const auto g = graph.next(path);
      if (g.number != 5 || g.wire != 2) continue;  // TensorProto: dims 1, data_type 2, name 8, raw_data 9, external_data 13
      InitializerBytes init;
      bool located = false;
      ProtoCursor tensor(file, g.offset, g.offset + g.value);
      while (!tensor.done()) {
        const auto t = tensor.next(path);
        if (t.number == 1 && t.wire == 0) init.dims.push_back(static_cast<int64_t>(t.value));
        if (t.number == 1 && t.wire == 2) {  // packed dims
          uint64_t pos = t.offset;
          while (pos < t.offset + t.value) {
            auto d = read_varint(file, pos, t.offset + t.value);
            if (!d) break;
            init.dims.push_back(static_cast<int64_t>(*d));
          }
        }
        if (t.number == 2 && t.wire == 0) init.type = static_cast<ElementType>(t.value);
        if (t.number == 8 && t.wire == 2) init.name = tensor.string_of(t);
        if (t.number == 9 && t.wire == 2) {
          init.file = fs::absolute(path).string();
          init.offset = t.offset;
          init.bytes = t.value;
          located = true;
        }
        if (t.number == 13 && t.wire == 2) {  // StringStringEntryProto {key 1, value 2}
          ProtoCursor entry(file, t.offset, t.offset + t.value);
          std::string key;
          std::string value;
          while (!entry.done()) {
            const auto e = entry.next(path);
            if (e.number == 1 && e.wire == 2) key = entry.string_of(e);
            if (e.number == 2 && e.wire == 2) value = entry.string_of(e);
          }
          if (key == "location") init.file = (folder / value).string();
          auto number = [&](uint64_t& n) {
            if (std::from_chars(value.data(), value.data() + value.size(), n).ec != std::errc()) {
              throw Error(path + ": initializer '" + init.name + "' has a bad external-data " + key + " '" + value + "'", kModelHint);
            }
          };
          if (key == "offset") number(init.offset);
          if (key == "length") number(init.bytes);
          located = located || key == "location";
        }
      }
      if (located && !init.name.empty()) out.push_back(std::move(init));
    }
  }
  return out;
}

namespace {

/// protobuf's default recursion limit, which ONNX Runtime's model reader keeps: messages nested deeper
/// than this make it fail with "Protobuf parsing failed".
constexpr int kProtobufDepthLimit = 100;

/// The deepest nesting of subgraphs (attributes g = 6 and graphs = 11 of a node's attributes) below the
/// graph at [begin, end): 0 for none. Stops counting past the depth protobuf could read anyway.
int subgraph_depth(const FileReader& file, uint64_t begin, uint64_t end, const std::string& path, int level) {
  int deepest = level;
  if (level > kProtobufDepthLimit) return deepest;
  ProtoCursor graph(file, begin, end);
  while (!graph.done()) {
    const auto g = graph.next(path);
    if (g.number != 1 || g.wire != 2) continue;  // NodeProto; its attributes are field 5
    ProtoCursor node(file, g.offset, g.offset + g.value);
    while (!node.done()) {
      const auto n = node.next(path);
      if (n.number != 5 || n.wire != 2) continue;
      ProtoCursor attribute(file, n.offset, n.offset + n.value);
      while (!attribute.done()) {
        const auto a = attribute.next(path);
        if ((a.number == 6 || a.number == 11) && a.wire == 2) deepest = std::max(deepest, subgraph_depth(file, a.offset, a.offset + a.value, path, level + 1));
      }
    }
  }
  return deepest;
}

}  // namespace

std::optional<Error> model_structure_problem(const std::string& path) {
  try {
    FileReader file(path);
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec || !file.ok()) return std::nullopt;
    ProtoCursor model(file, 0, size);
    while (!model.done()) {
      const auto f = model.next(path);
      if (f.number != 7 || f.wire != 2) continue;
      int outputs = 0;
      ProtoCursor graph(file, f.offset, f.offset + f.value);
      while (!graph.done()) outputs += graph.next(path).number == 12 ? 1 : 0;
      if (outputs == 0) {
        return Error("the model " + path + " declares no outputs, so ONNX Runtime has nothing to compute",
                     "Re-export it with its outputs (its graph's output list is empty)");
      }
      // Each level of subgraph nests three messages (node, attribute, graph) inside the one above; a
      // value's type inside a graph nests five more (value, type, tensor, shape, dim).
      const int depth = subgraph_depth(file, f.offset, f.offset + f.value, path, 0);
      const int messages = 2 + 3 * depth + 5;
      if (messages > kProtobufDepthLimit) {
        return Error(fmt::format("the model {} nests subgraphs (the bodies of If, Loop or Scan) {} deep, about {} levels of protobuf "
                                 "messages: more than the {} ONNX Runtime's reader takes, so it says \"Protobuf parsing failed\"",
                                 path, depth, messages, kProtobufDepthLimit),
                     fmt::format("Flatten the nesting to at most {} levels of subgraphs when exporting the model", (kProtobufDepthLimit - 7) / 3));
      }
    }
  } catch (const Error&) {
    // A malformed field: the file's own check names it; here there is no structural reason to give.
  }
  return std::nullopt;
}

namespace {

struct DeclaredDim {
  std::string input;
  size_t index = 0;
  int64_t value = 0;
};

/// The dims the graph's inputs declare with a negative dim_value (ONNX Runtime reports every one of
/// them as -1, dynamic). Walks the graph's own fields (its nodes are skipped, not read).
std::vector<DeclaredDim> negative_declared_dims(const std::string& path) {
  std::vector<DeclaredDim> out;
  FileReader file(path);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec || !file.ok()) return out;
  ProtoCursor model(file, 0, size);
  auto each = [&](ProtoCursor& outer, uint64_t number, const std::function<void(ProtoCursor&)>& inside) {
    each_message(file, outer, number, path, inside);
  };
  each(model, 7, [&](ProtoCursor& graph) {
    while (!graph.done()) {
      const auto g = graph.next(path);
      if (g.number != 11 || g.wire != 2) continue;  // ValueInfoProto: name 1, type 2 -> tensor_type 1 -> shape 2 -> dim 1
      ProtoCursor info(file, g.offset, g.offset + g.value);
      std::string name;
      std::vector<std::pair<size_t, int64_t>> negative;
      while (!info.done()) {
        const auto v = info.next(path);
        if (v.number == 1 && v.wire == 2) name = info.string_of(v);
        if (v.number != 2 || v.wire != 2) continue;
        ProtoCursor type(file, v.offset, v.offset + v.value);
        each(type, 1, [&](ProtoCursor& tensor) {
          each(tensor, 2, [&](ProtoCursor& shape) {
            size_t index = 0;
            each(shape, 1, [&](ProtoCursor& dim) {
              while (!dim.done()) {
                const auto d = dim.next(path);
                if (d.number == 1 && d.wire == 0 && static_cast<int64_t>(d.value) < 0) negative.emplace_back(index, static_cast<int64_t>(d.value));
              }
              ++index;
            });
          });
        });
      }
      for (const auto& [index, value] : negative) out.push_back({name, index, value});
    }
  });
  return out;
}

}  // namespace

void check_model_interface(const std::string& path, const std::vector<TensorSpec>& inputs, const std::vector<TensorSpec>& outputs) {
  if (outputs.empty()) {
    throw model_structure_problem(path).value_or(Error("the model " + path + " declares no outputs, so ONNX Runtime has nothing to compute",
                                                       "Re-export it with its outputs (its graph's output list is empty)"));
  }
  // ONNX Runtime reports a dim declared negative as -1, as it does a dim with no size: only the file
  // tells them apart, read where an input has such a dim.
  const bool unnamed_dynamic = std::any_of(inputs.begin(), inputs.end(), [](const TensorSpec& input) {
    for (size_t i = 0; i < input.shape.size(); ++i) {
      if (input.shape[i] < 0 && (i >= input.dim_names.size() || input.dim_names[i].empty())) return true;
    }
    return false;
  });
  if (!unnamed_dynamic) return;
  static std::mutex mutex;
  static std::set<std::string> warned;
  for (const auto& dim : negative_declared_dims(path)) {
    if (dim.value < -1) {
      throw Error(fmt::format("the model {} declares dim {} of input '{}' as {}: a dim is a size of 0 or more, or a name", path, dim.index,
                              dim.input, dim.value),
                  "Fix the model's input shape: a number for a fixed dim, a name (dim_param) for a dynamic one");
    }
    // -1, which older exporters wrote for "any size": it runs, so it is said (once per model), not refused.
    const std::lock_guard lock(mutex);
    if (!warned.insert(path + "|" + dim.input + "|" + std::to_string(dim.index)).second) continue;
    spdlog::warn("the model {} declares dim {} of input '{}' as -1: ONNX allows no negative dims, so ONNX Runtime and ortfleet read it "
                 "as dynamic (give it a name, dim_param, to say so)", path, dim.index, dim.input);
  }
}

}  // namespace ortfleet::detail
