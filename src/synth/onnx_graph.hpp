#pragma once
// An ONNX model's graph as parts that can be cut and put back together: what the crash locator needs
// to run a model's first k nodes, or one node alone, in a process of their own. The model is read
// with ortfleet's own protobuf walker: nodes, initializers and inputs keep their bytes as they were;
// only the graph's outputs (and, for one node, its inputs) are written anew.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ortfleet::onnx {

/// One node, with what the locator reports and what ordering needs.
struct GraphNode {
  std::string name;
  std::string op_type;
  std::string domain;  ///< "" for the default domain
  std::vector<std::string> inputs;   ///< "" for an optional input left out
  std::vector<std::string> outputs;
  std::vector<std::string> attributes;  ///< "name=value" (lists shortened, subgraphs as "<graph>")
  /// Names its subgraphs (If, Loop, Scan bodies) read from the enclosing graph.
  std::vector<std::string> outer_inputs;
  std::string bytes;  ///< the NodeProto as it was
};

class OnnxGraph {
 public:
  /// Reads the model at `path` (weights in external data stay where they are: a cut model written
  /// into the same folder still finds them). Throws ortfleet::Error for what is not an ONNX model.
  static OnnxGraph load(const std::string& path);

  /// The nodes in an order where every node comes after the nodes it reads from (the file's order
  /// where it already is one; ISNet's fp16 export, for one, is not).
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  /// The opset version the model imports for `domain` ("" and "ai.onnx" are the default domain).
  int64_t opset(const std::string& domain) const;
  bool is_initializer(const std::string& name) const { return initializers_.count(name) != 0; }
  const std::vector<std::string>& graph_inputs() const { return input_names_; }

  /// The model made of the first `count` nodes: every value those nodes make that none of them
  /// reads (and every graph output among them) becomes an output, so that all of them run.
  std::string prefix_model(size_t count) const;
  /// The model of node `index` alone: its inputs (not initializers) become graph inputs of the
  /// given element types and shapes (ONNX data type numbers), its outputs the graph's outputs.
  std::string single_node_model(size_t index, const std::map<std::string, std::pair<int, std::vector<int64_t>>>& input_types) const;
  /// A model whose outputs are `names` (values the first `count` nodes make, or graph inputs).
  std::string model_with_outputs(size_t count, const std::vector<std::string>& names) const;

 private:
  std::string assemble(const std::vector<const GraphNode*>& nodes, const std::vector<std::string>& input_fields,
                       const std::vector<std::string>& outputs) const;

  struct Field {
    uint64_t number = 0;
    uint64_t wire = 0;
    uint64_t value = 0;   // a varint's value
    std::string payload;  // a length-delimited field's bytes, or a fixed field's
  };
  std::vector<Field> model_fields_;       // every ModelProto field but the graph
  std::vector<Field> graph_other_fields_;  // the graph's name, value_info, ...: kept as they were
  std::vector<GraphNode> nodes_;
  std::map<std::string, std::string> initializers_;  // name -> TensorProto bytes
  std::vector<std::string> input_names_;
  std::map<std::string, std::string> inputs_;          // name -> ValueInfoProto bytes
  std::vector<std::string> output_names_;
  std::map<std::string, int64_t> opsets_;
};

}  // namespace ortfleet::onnx
