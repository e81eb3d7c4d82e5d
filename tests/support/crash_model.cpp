// Writes the crash tests' model: a chain of NODES nodes on a float [1, 16] input (Relu, Add, Mul,
// Sigmoid in turn), whose node number CRASH_AT (0-based) is op "Crash" of domain "ortfleet.test"
// (tests/support/crash_ops.cpp), named "crash_here".
// Usage: ortfleet_test_crash_model OUT.onnx NODES CRASH_AT
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "synth/onnx_writer.hpp"

int main(int argc, char** argv) {
  namespace onnx = ortfleet::onnx;
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " OUT.onnx NODES CRASH_AT\n";
    return 2;
  }
  const int nodes = std::atoi(argv[2]);
  const int crash_at = std::atoi(argv[3]);
  onnx::GraphParts g;
  g.name = "crash_chain";
  g.domains = {{"ortfleet.test", 1}};
  g.inputs.push_back(onnx::value_info("x", onnx::DataType::float32, {1, 16}));
  g.initializers.push_back(onnx::float_scalar_tensor("half", 0.5f));
  std::string previous = "x";
  for (int i = 0; i < nodes; ++i) {
    const std::string out = i + 1 == nodes ? "y" : "t" + std::to_string(i);
    if (i == crash_at) {
      g.nodes.push_back(onnx::node("Crash", "crash_here", {previous}, {out}, {}, "ortfleet.test"));
    } else {
      static const char* ops[] = {"Relu", "Add", "Mul", "Sigmoid"};
      const std::string op = ops[i % 4];
      const bool binary = op == "Add" || op == "Mul";
      g.nodes.push_back(onnx::node(op, op + "_" + std::to_string(i), binary ? std::vector<std::string>{previous, "half"}
                                                                            : std::vector<std::string>{previous},
                                   {out}));
    }
    previous = out;
  }
  g.outputs.push_back(onnx::value_info("y", onnx::DataType::float32, {1, 16}));
  std::ofstream file(argv[1], std::ios::binary | std::ios::trunc);
  onnx::model(std::move(g), 17, {}).write(file);
  return file ? 0 : 1;
}
