#pragma once
// `ortfleet synth`: valid ONNX models written without Python, deterministic from a seed, for tests,
// benchmarks and reproducing slow start-ups.
#include <cstdint>
#include <functional>
#include <string>

namespace ortfleet::synth {

/// A ResNet (torchvision v1.5 layout: Conv+BatchNorm+Relu, bottlenecks from depth 50).
struct ResNetSpec {
  int depth = 50;          ///< 18, 34, 50, 101 or 152
  double width = 1.0;      ///< channel multiplier (the "size knob")
  int image_size = 224;
  int batch = 1;
  bool dynamic_batch = false;
};

/// Hundreds of convolutions of distinct shapes side by side: every one is a separate cuDNN
/// algorithm search under cudnn_conv_algo_search=EXHAUSTIVE.
struct ConvZooSpec {
  int convs = 200;
  int batch = 1;
  int max_channels = 64;
  int max_spatial = 56;
  bool dynamic_batch = false;
  bool dynamic_spatial = false;  ///< height and width of every input symbolic (variable-resolution images)
};

/// A BERT-style encoder (embeddings, then layers of attention + GELU feed-forward, LayerNorm).
/// 24 layers x 1024 wide with the default vocabulary weighs about 1.27 GB.
struct TransformerSpec {
  int layers = 24;
  int hidden = 1024;
  int heads = 16;
  int ffn_multiplier = 4;
  int sequence = 128;
  int batch = 1;
  int vocabulary = 16000;
  bool dynamic_batch = false;
  /// The sequence dim symbolic ("sequence"); `sequence` is then the longest (the position table's rows).
  bool dynamic_sequence = false;
  /// An attention_mask input [batch, sequence] (1 = a token, 0 = padding), as BERT exports take.
  bool attention_mask = false;
};

/// A small fully convolutional segmentation net, as text detectors and matting models are: an
/// encoder of strided 3x3 convolutions to an eighth of the image, a decoder back to a quarter
/// (ConvTranspose, a skip connection), one output map [batch, 1, height/4, width/4]. Height and width
/// must be multiples of 8.
struct SegmenterSpec {
  int channels = 32;  ///< of the first stage (doubled at each further stage)
  int depth = 2;      ///< 3x3 convolutions per stage after its strided one
  int height = 640;   ///< when not dynamic
  int width = 640;
  int batch = 1;
  bool dynamic_batch = false;
  bool dynamic_spatial = true;  ///< height and width symbolic
};

/// A 3D U-Net on a volume, as medical-imaging and video models are: an encoder of 3x3x3 convolutions
/// (a strided one halving the volume at each level, channels doubled), a decoder back to full size
/// (nearest Resize, the skip concatenated, 3x3x3 convolutions), one output map [batch, classes, size^3].
/// Each level's convolutions are distinct cuDNN problems on large volumes: with EXHAUSTIVE search their
/// first inference is the start's cost.
struct VolumeSpec {
  int size = 128;     ///< the volume's edge (a multiple of 2^levels)
  int channels = 16;  ///< of the first level (doubled at each further level)
  int levels = 4;
  int classes = 2;
  int batch = 1;
};

/// A small multilayer perceptron: the quickest model that exercises every code path in tests.
struct MlpSpec {
  int layers = 3;
  int width = 64;
  int batch = 1;
  bool dynamic_batch = false;
};

/// Tens of thousands of small nodes, as exporters emit them: a chain of blocks, each a small MatMul
/// and bias, a GELU written out with Erf (ONNX Runtime's GeluFusion folds it back), a residual Add
/// and a LayerNormalization (which keeps activations bounded however deep the chain). Graph size,
/// not arithmetic, dominates its start: the cost of optimisation and partitioning per node.
/// The defaults (24,000 nodes, width 64) weigh about 46 MB.
struct NodeHeavySpec {
  int nodes = 24000;  ///< nodes in the graph, rounded up to whole blocks of kNodeHeavyBlockNodes
  int width = 64;     ///< the features of every activation (each block's weight is width x width)
  int batch = 1;
  bool dynamic_batch = false;
};
inline constexpr int kNodeHeavyBlockNodes = 9;
/// One input copied to one output (Identity): a model that costs nothing to run, so that timing it
/// measures what surrounds a run (a worker's round trip, bindings).
struct IdentitySpec {
  int width = 16;
  bool dynamic_batch = true;
  int batch = 1;  ///< when the batch is fixed
};

enum class ExternalData { automatic, always, never };  ///< automatic: external when over 2 GB

struct WriteOptions {
  uint64_t seed = 1;
  ExternalData external_data = ExternalData::automatic;
  /// Called as weights are written: bytes done, bytes in all.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct ModelSummary {
  std::string path;
  std::string external_data_path;  ///< empty when every weight is inside the .onnx file
  std::string kind;                ///< "resnet50", "convzoo", "transformer", "nodes", "mlp", "identity"
  uint64_t parameters = 0;
  uint64_t weight_bytes = 0;
  uint64_t file_bytes = 0;         ///< .onnx plus external data
  int nodes = 0;
  int conv_nodes = 0;
  int distinct_convs = 0;          ///< distinct convolution problems (conv zoo only; 0 = not counted)
};

ModelSummary write_volume(const std::string& path, const VolumeSpec& spec, const WriteOptions& options = {});
ModelSummary write_resnet(const std::string& path, const ResNetSpec& spec, const WriteOptions& options = {});
ModelSummary write_conv_zoo(const std::string& path, const ConvZooSpec& spec, const WriteOptions& options = {});
ModelSummary write_transformer(const std::string& path, const TransformerSpec& spec, const WriteOptions& options = {});
ModelSummary write_segmenter(const std::string& path, const SegmenterSpec& spec, const WriteOptions& options = {});
ModelSummary write_node_heavy(const std::string& path, const NodeHeavySpec& spec, const WriteOptions& options = {});
ModelSummary write_mlp(const std::string& path, const MlpSpec& spec, const WriteOptions& options = {});
ModelSummary write_identity(const std::string& path, const IdentitySpec& spec, const WriteOptions& options = {});

/// The built-in default model (ResNet-50, seed 1), written once into `cache_dir` and reused.
std::string default_model(const std::string& cache_dir);

}  // namespace ortfleet::synth
