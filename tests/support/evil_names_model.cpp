// Writes a model whose names drive a terminal, as issue 58's audit wrote one: its input, output, node
// names and a symbolic dim hold ESC sequences (colour, window title, clear screen), BEL, CR and a
// newline followed by FAKEROW (a row a table would show). x [batch, 16] -> Relu -> Add -> Sigmoid.
// Usage: ortfleet_test_evil_names_model OUT.onnx
#include <fstream>
#include <iostream>
#include <string>

#include "synth/onnx_writer.hpp"

int main(int argc, char** argv) {
  namespace onnx = ortfleet::onnx;
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT.onnx\n";
    return 2;
  }
  const std::string evil = "\033[31m\033]0;TITLE\007\033[2J\r\nFAKEROW";
  const std::string input = "in" + evil;
  const std::string output = "out" + evil;
  const std::string batch = "batch" + evil;
  onnx::GraphParts g;
  g.name = "evil" + evil;
  g.inputs.push_back(onnx::value_info(input, onnx::DataType::float32, {batch.c_str(), 16}));
  g.initializers.push_back(onnx::float_scalar_tensor("half" + evil, 0.5f));
  g.nodes.push_back(onnx::node("Relu", "relu" + evil, {input}, {"r" + evil}));
  g.nodes.push_back(onnx::node("Add", "add" + evil, {"r" + evil, "half" + evil}, {"a" + evil}));
  g.nodes.push_back(onnx::node("Sigmoid", "sigmoid" + evil, {"a" + evil}, {output}));
  g.outputs.push_back(onnx::value_info(output, onnx::DataType::float32, {batch.c_str(), 16}));
  std::ofstream file(argv[1], std::ios::binary | std::ios::trunc);
  onnx::model(std::move(g), 17, {}).write(file);
  return file ? 0 : 1;
}
