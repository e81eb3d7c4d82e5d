// The model writers of `ortfleet synth` from Python: test models without onnx or torch.
#include "bindings.hpp"
#include "ortfleet/synth/synth.hpp"

namespace ortfleet::python {

namespace {
/// The write options Python sets: the seed of the weights alone.
synth::WriteOptions seeded(uint64_t seed) {
  synth::WriteOptions o;
  o.seed = seed;
  return o;
}
}  // namespace

void bind_synth(py::module_& m) {
  m.def("synth_mlp", [](const std::string& path, int layers, int width, uint64_t seed) {
    return synth::write_mlp(path, {layers, width, 1}, seeded(seed)).path;
  }, py::arg("path"), py::arg("layers") = 3, py::arg("width") = 64, py::arg("seed") = 1);
  m.def("synth_nodes", [](const std::string& path, int nodes, int width, uint64_t seed) {
    synth::NodeHeavySpec spec;
    spec.nodes = nodes;
    spec.width = width;
    return synth::write_node_heavy(path, spec, seeded(seed)).path;
  }, py::arg("path"), py::arg("nodes") = 24000, py::arg("width") = 64, py::arg("seed") = 1,
     "A graph of tens of thousands of small nodes (`ortfleet synth nodes`)");
  m.def("synth_resnet", [](const std::string& path, int depth, int image_size, uint64_t seed, bool dynamic_batch) {
    synth::ResNetSpec spec;
    spec.depth = depth;
    spec.image_size = image_size;
    spec.dynamic_batch = dynamic_batch;
    return synth::write_resnet(path, spec, seeded(seed)).path;
  }, py::arg("path"), py::arg("depth") = 50, py::arg("image_size") = 224, py::arg("seed") = 1, py::arg("dynamic_batch") = false);

  m.def("synth_segmenter", [](const std::string& path, int channels, int depth, uint64_t seed) {
    synth::SegmenterSpec spec;
    spec.channels = channels;
    spec.depth = depth;
    return synth::write_segmenter(path, spec, seeded(seed)).path;
  }, py::arg("path"), py::arg("channels") = 32, py::arg("depth") = 2, py::arg("seed") = 1,
     "A fully convolutional segmentation net with dynamic height and width (`ortfleet synth segmenter`)");
}

}  // namespace ortfleet::python
