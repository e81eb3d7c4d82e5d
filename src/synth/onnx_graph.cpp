#include "synth/onnx_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <set>
#include <sstream>

#include "base/file_reading.hpp"
#include "ortfleet/base/error.hpp"
#include "synth/onnx_writer.hpp"

namespace ortfleet::onnx {
namespace {

constexpr const char* kNotAModel = "Check that the file is an ONNX model (.onnx)";

/// Sequential reads of the protobuf fields of one message held in memory.
class Reader {
 public:
  Reader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  bool done() const { return pos_ >= bytes_.size(); }
  /// The next varint (also how a packed repeated integer field is read).
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) throw Error(what_ + ": a protobuf field is cut short", kNotAModel);
      const auto b = static_cast<unsigned char>(bytes_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw Error(what_ + ": an overlong protobuf number", kNotAModel);
  }
  struct Raw {
    uint64_t number = 0;
    uint64_t wire = 0;
    uint64_t value = 0;
    std::string_view payload;
  };
  Raw next() {
    Raw f;
    const uint64_t tag = varint();
    f.number = tag >> 3;
    f.wire = tag & 7;
    switch (f.wire) {
      case 0: f.value = varint(); break;
      case 1: f.payload = take(8); break;
      case 5: f.payload = take(4); break;
      case 2: f.payload = take(varint()); break;
      default: throw Error(what_ + ": invalid protobuf encoding", kNotAModel);
    }
    return f;
  }

 private:
  std::string_view take(uint64_t n) {
    if (n > bytes_.size() - pos_) throw Error(what_ + ": a protobuf field runs past its end", kNotAModel);
    const auto out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::string_view bytes_;
  size_t pos_ = 0;
  std::string what_;
};

std::string name_of_message(std::string_view bytes, uint64_t field, const std::string& what) {
  Reader r(bytes, what);
  while (!r.done()) {
    const auto f = r.next();
    if (f.number == field && f.wire == 2) return std::string(f.payload);
  }
  return {};
}

/// Every name the nodes of `graph` (and of their own subgraphs) read that they do not make.
void outer_names(std::string_view graph, std::set<std::string>& out, const std::string& what) {
  std::set<std::string> made;
  std::vector<std::string> read;
  Reader g(graph, what);
  while (!g.done()) {
    const auto f = g.next();
    if (f.wire != 2) continue;
    if (f.number == 5) made.insert(name_of_message(f.payload, 8, what));   // an initializer of the subgraph
    if (f.number == 11) made.insert(name_of_message(f.payload, 1, what));  // a subgraph input
    if (f.number != 1) continue;
    Reader n(f.payload, what);
    while (!n.done()) {
      const auto nf = n.next();
      if (nf.wire != 2) continue;
      if (nf.number == 1) read.emplace_back(nf.payload);
      if (nf.number == 2) made.emplace(nf.payload);
      if (nf.number == 5) {  // an attribute: its subgraphs read from here too
        Reader a(nf.payload, what);
        while (!a.done()) {
          const auto af = a.next();
          if (af.wire == 2 && (af.number == 6 || af.number == 11)) {
            std::set<std::string> inner;
            outer_names(af.payload, inner, what);
            read.insert(read.end(), inner.begin(), inner.end());
          }
        }
      }
    }
  }
  for (const auto& name : read) {
    if (!name.empty() && !made.count(name)) out.insert(name);
  }
}

std::string attribute_text(std::string_view bytes, const std::string& what) {
  std::string name;
  std::string value;
  std::vector<std::string> list;
  Reader a(bytes, what);
  while (!a.done()) {
    const auto f = a.next();
    if (f.number == 1 && f.wire == 2) name = std::string(f.payload);
    else if (f.number == 2 && f.wire == 5) {
      float v = 0;
      std::memcpy(&v, f.payload.data(), sizeof v);
      value = fmt::format("{}", v);
    } else if (f.number == 3 && f.wire == 0) value = std::to_string(static_cast<int64_t>(f.value));
    else if (f.number == 4 && f.wire == 2) value = "\"" + std::string(f.payload.substr(0, 64)) + "\"";
    else if (f.number == 5) value = "<tensor>";
    else if (f.number == 6 || f.number == 11) value = "<graph>";
    else if (f.number == 8 && f.wire == 0) list.push_back(std::to_string(static_cast<int64_t>(f.value)));
    else if (f.number == 8 && f.wire == 2) {  // packed ints
      for (Reader packed(f.payload, what); !packed.done();) list.push_back(std::to_string(static_cast<int64_t>(packed.varint())));
    } else if (f.number == 7) list.push_back("<float>");
  }
  if (!list.empty()) {
    value = "[";
    for (size_t i = 0; i < list.size() && i < 16; ++i) value += (i ? ", " : "") + list[i];
    value += list.size() > 16 ? ", ...]" : "]";
  }
  return name + "=" + value;
}

GraphNode parse_node(std::string_view bytes, const std::string& what) {
  GraphNode node;
  node.bytes = std::string(bytes);
  std::set<std::string> outer;
  Reader n(bytes, what);
  while (!n.done()) {
    const auto f = n.next();
    if (f.wire != 2) continue;
    switch (f.number) {
      case 1: node.inputs.emplace_back(f.payload); break;
      case 2: node.outputs.emplace_back(f.payload); break;
      case 3: node.name = std::string(f.payload); break;
      case 4: node.op_type = std::string(f.payload); break;
      case 7: node.domain = std::string(f.payload); break;
      case 5: {
        node.attributes.push_back(attribute_text(f.payload, what));
        Reader a(f.payload, what);
        while (!a.done()) {
          const auto af = a.next();
          if (af.wire == 2 && (af.number == 6 || af.number == 11)) outer_names(af.payload, outer, what);
        }
        break;
      }
      default: break;
    }
  }
  node.outer_inputs.assign(outer.begin(), outer.end());
  return node;
}

/// `nodes` ordered so that each comes after the nodes making what it reads (stable: the file's
/// order wherever it allows).
std::vector<GraphNode> topological(std::vector<GraphNode> nodes) {
  std::map<std::string, size_t> maker;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& o : nodes[i].outputs) maker[o] = i;
  }
  std::vector<std::vector<size_t>> readers(nodes.size());
  std::vector<size_t> waiting(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> from;
    for (const auto* list : {&nodes[i].inputs, &nodes[i].outer_inputs}) {
      for (const auto& name : *list) {
        const auto m = maker.find(name);
        if (m != maker.end() && m->second != i) from.insert(m->second);
      }
    }
    waiting[i] = from.size();
    for (const size_t f : from) readers[f].push_back(i);
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (waiting[i] == 0) ready.insert(i);
  }
  std::vector<GraphNode> out;
  while (!ready.empty()) {
    const size_t i = *ready.begin();
    ready.erase(ready.begin());
    for (const size_t r : readers[i]) {
      if (--waiting[r] == 0) ready.insert(r);
    }
    out.push_back(std::move(nodes[i]));
  }
  if (out.size() != nodes.size()) throw Error("the model's graph has a cycle", kNotAModel);
  return out;
}

ProtoMessage untyped_value(const std::string& name) {
  ProtoMessage v;
  v.bytes(1, name);
  return v;
}

ProtoMessage typed_value(const std::string& name, int type, const std::vector<int64_t>& dims) {
  std::vector<Dim> shape(dims.begin(), dims.end());
  return value_info(name, static_cast<DataType>(type), shape);
}

std::string serialised(const ProtoMessage& m) {
  std::ostringstream out;
  m.write(out);
  return out.str();
}

void put_field(ProtoMessage& m, int number, uint64_t wire, uint64_t value, const std::string& payload) {
  if (wire == 0) m.varint(number, value);
  else if (wire == 2) m.bytes(number, payload);
  else if (wire == 5) {
    float f = 0;
    std::memcpy(&f, payload.data(), sizeof f);
    m.float32(number, f);
  }
  // 64-bit fixed fields do not occur in ModelProto or GraphProto.
}

}  // namespace

OnnxGraph OnnxGraph::load(const std::string& path) {
  const std::string bytes = detail::read_whole_file(path, "", "Check the path", size_t{4} << 30);
  OnnxGraph g;
  std::vector<GraphNode> nodes;
  bool saw_graph = false;
  Reader model(bytes, path);
  while (!model.done()) {
    const auto f = model.next();
    if (f.number == 8 && f.wire == 2) {
      std::string domain;
      int64_t version = 0;
      Reader o(f.payload, path);
      while (!o.done()) {
        const auto of = o.next();
        if (of.number == 1 && of.wire == 2) domain = std::string(of.payload);
        if (of.number == 2 && of.wire == 0) version = static_cast<int64_t>(of.value);
      }
      g.opsets_[domain == "ai.onnx" ? "" : domain] = version;
    }
    if (f.number != 7 || f.wire != 2) {
      g.model_fields_.push_back({f.number, f.wire, f.value, std::string(f.payload)});
      continue;
    }
    saw_graph = true;
    Reader graph(f.payload, path);
    while (!graph.done()) {
      const auto gf = graph.next();
      if (gf.number == 1 && gf.wire == 2) {
        nodes.push_back(parse_node(gf.payload, path));
      } else if (gf.number == 5 && gf.wire == 2) {
        g.initializers_[name_of_message(gf.payload, 8, path)] = std::string(gf.payload);
      } else if (gf.number == 11 && gf.wire == 2) {
        const std::string name = name_of_message(gf.payload, 1, path);
        g.input_names_.push_back(name);
        g.inputs_[name] = std::string(gf.payload);
      } else if (gf.number == 12 && gf.wire == 2) {
        g.output_names_.push_back(name_of_message(gf.payload, 1, path));
      } else {
        g.graph_other_fields_.push_back({gf.number, gf.wire, gf.value, std::string(gf.payload)});
      }
    }
  }
  if (!saw_graph) throw Error(path + " has no graph", kNotAModel);
  g.nodes_ = topological(std::move(nodes));
  return g;
}

int64_t OnnxGraph::opset(const std::string& domain) const {
  const auto it = opsets_.find(domain == "ai.onnx" ? "" : domain);
  return it == opsets_.end() ? 0 : it->second;
}

std::string OnnxGraph::assemble(const std::vector<const GraphNode*>& nodes, const std::vector<std::string>& input_fields,
                                const std::vector<std::string>& outputs) const {
  // Only the initializers the kept nodes read: a one-node model should be small enough to attach
  // to a bug report.
  std::set<std::string> read;
  for (const auto* n : nodes) {
    read.insert(n->inputs.begin(), n->inputs.end());
    read.insert(n->outer_inputs.begin(), n->outer_inputs.end());
  }
  ProtoMessage graph;
  for (const auto* n : nodes) graph.bytes(1, n->bytes);
  for (const auto& f : graph_other_fields_) {
    if (f.number == 13) continue;  // value_info of values that may no longer exist: ONNX Runtime infers them again
    put_field(graph, static_cast<int>(f.number), f.wire, f.value, f.payload);
  }
  for (const auto& [name, tensor] : initializers_) {
    if (read.count(name)) graph.bytes(5, tensor);
  }
  for (const auto& field : input_fields) graph.bytes(11, field);
  for (const auto& name : outputs) graph.message(12, untyped_value(name));
  ProtoMessage model;
  for (const auto& f : model_fields_) put_field(model, static_cast<int>(f.number), f.wire, f.value, f.payload);
  model.message(7, std::move(graph));
  return serialised(model);
}

std::string OnnxGraph::prefix_model(size_t count) const {
  count = std::min(count, nodes_.size());
  std::vector<const GraphNode*> kept;
  std::set<std::string> consumed;
  for (size_t i = 0; i < count; ++i) {
    kept.push_back(&nodes_[i]);
    consumed.insert(nodes_[i].inputs.begin(), nodes_[i].inputs.end());
    consumed.insert(nodes_[i].outer_inputs.begin(), nodes_[i].outer_inputs.end());
  }
  const std::set<std::string> graph_outputs(output_names_.begin(), output_names_.end());
  std::vector<std::string> outputs;
  for (const auto* n : kept) {
    for (const auto& o : n->outputs) {
      if (!o.empty() && (!consumed.count(o) || graph_outputs.count(o))) outputs.push_back(o);
    }
  }
  std::vector<std::string> inputs;
  for (const auto& name : input_names_) inputs.push_back(inputs_.at(name));
  return assemble(kept, inputs, outputs);
}

std::string OnnxGraph::model_with_outputs(size_t count, const std::vector<std::string>& names) const {
  count = std::min(count, nodes_.size());
  std::vector<const GraphNode*> kept;
  for (size_t i = 0; i < count; ++i) kept.push_back(&nodes_[i]);
  std::vector<std::string> inputs;
  for (const auto& name : input_names_) inputs.push_back(inputs_.at(name));
  return assemble(kept, inputs, names);
}

std::string OnnxGraph::single_node_model(size_t index, const std::map<std::string, std::pair<int, std::vector<int64_t>>>& input_types) const {
  const GraphNode& node = nodes_.at(index);
  std::vector<std::string> inputs;
  std::set<std::string> seen;
  for (const auto* list : {&node.inputs, &node.outer_inputs}) {
    for (const auto& name : *list) {
      if (name.empty() || is_initializer(name) || !seen.insert(name).second) continue;
      const auto typed = input_types.find(name);
      if (typed == input_types.end()) throw Error("no type is known for '" + name + "', an input of node " + node.name);
      inputs.push_back(serialised(typed_value(name, typed->second.first, typed->second.second)));
    }
  }
  std::vector<std::string> outputs;
  for (const auto& o : node.outputs) {
    if (!o.empty()) outputs.push_back(o);
  }
  return assemble({&node}, inputs, outputs);
}

}  // namespace ortfleet::onnx
