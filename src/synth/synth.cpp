// The synthetic model families (ResNet, conv zoo, transformer, segmenter, node-heavy graph, MLP,
// identity), each put together with GraphBuilder (graph_builder.hpp), which writes it.
#include "ortfleet/synth/synth.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <map>
#include <tuple>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/private_dir.hpp"
#include "synth/graph_builder.hpp"
#include "synth/onnx_writer.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::synth {
namespace fs = std::filesystem;
using detail::throw_write_error;
using onnx::Attribute;
using onnx::DataType;
using onnx::Dim;

namespace {

Dim batch_dim(int batch, bool dynamic) { return dynamic ? Dim("batch") : Dim(batch); }

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("invalid synth parameters: " + what, "Give a value in that range");
}

// --- ResNet ----------------------------------------------------------------------------------------

struct ResNetBuilder {
  GraphBuilder& g;
  int index = 0;

  std::string conv_bn(const std::string& x, int64_t in_ch, int64_t out_ch, int64_t k, int64_t stride, bool relu) {
    const std::string p = "layer" + std::to_string(index++);
    const std::string w = g.fan_in_weight(p + ".conv.weight", {out_ch, in_ch, k, k}, in_ch * k * k);
    const int64_t pad = k / 2;
    std::string y = g.op("Conv", {x, w},
                         {Attribute::Ints("kernel_shape", {k, k}), Attribute::Ints("strides", {stride, stride}),
                          Attribute::Ints("pads", {pad, pad, pad, pad}), Attribute::Ints("dilations", {1, 1}),
                          Attribute::Int("group", 1)});
    const std::string scale = g.weight(p + ".bn.weight", {out_ch}, 0.5f, 1.0f);
    const std::string bias = g.weight(p + ".bn.bias", {out_ch}, -0.1f, 0.1f);
    const std::string mean = g.weight(p + ".bn.running_mean", {out_ch}, -0.1f, 0.1f);
    const std::string var = g.weight(p + ".bn.running_var", {out_ch}, 0.5f, 1.5f);
    y = g.op("BatchNormalization", {y, scale, bias, mean, var}, {Attribute::Float("epsilon", 1e-5f)});
    return relu ? g.op("Relu", {y}) : y;
  }
};

int64_t scaled(int64_t channels, double width) {
  return std::max<int64_t>(8, static_cast<int64_t>(std::lround(static_cast<double>(channels) * width / 8.0)) * 8);
}

}  // namespace

ModelSummary write_resnet(const std::string& path, const ResNetSpec& spec, const WriteOptions& options) {
  static const std::map<int, std::pair<bool, std::array<int, 4>>> kLayouts = {
      {18, {false, {2, 2, 2, 2}}}, {34, {false, {3, 4, 6, 3}}}, {50, {true, {3, 4, 6, 3}}},
      {101, {true, {3, 4, 23, 3}}}, {152, {true, {3, 8, 36, 3}}}};
  const auto layout = kLayouts.find(spec.depth);
  require(layout != kLayouts.end(), "ResNet depth must be 18, 34, 50, 101 or 152");
  require(spec.width > 0.05 && spec.width <= 8, "width must be in (0.05, 8]");
  require(spec.image_size >= 32 && spec.image_size <= 1024, "image size must be 32..1024");
  require(spec.batch >= 1 && spec.batch <= 4096, "batch must be 1..4096");
  const bool bottleneck = layout->second.first;
  const int expansion = bottleneck ? 4 : 1;

  GraphBuilder g("resnet" + std::to_string(spec.depth), options.seed);
  ResNetBuilder b{g};
  const Dim batch = batch_dim(spec.batch, spec.dynamic_batch);
  g.input("input", DataType::float32, {batch, 3, spec.image_size, spec.image_size});

  int64_t in_ch = scaled(64, spec.width);
  std::string x = b.conv_bn("input", 3, in_ch, 7, 2, true);
  x = g.op("MaxPool", {x}, {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                            Attribute::Ints("pads", {1, 1, 1, 1})});
  const std::array<int64_t, 4> stage_width = {64, 128, 256, 512};
  for (size_t stage = 0; stage < 4; ++stage) {
    const int64_t mid = scaled(stage_width[stage], spec.width);
    const int64_t out_ch = mid * expansion;
    for (int block = 0; block < layout->second.second[stage]; ++block) {
      const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      std::string shortcut = x;
      if (stride != 1 || in_ch != out_ch) shortcut = b.conv_bn(x, in_ch, out_ch, 1, stride, false);
      std::string y;
      if (bottleneck) {
        y = b.conv_bn(x, in_ch, mid, 1, 1, true);
        y = b.conv_bn(y, mid, mid, 3, stride, true);  // stride on the 3x3, as torchvision's ResNet v1.5
        y = b.conv_bn(y, mid, out_ch, 1, 1, false);
      } else {
        y = b.conv_bn(x, in_ch, mid, 3, stride, true);
        y = b.conv_bn(y, mid, out_ch, 3, 1, false);
      }
      x = g.op("Relu", {g.op("Add", {y, shortcut})});
      in_ch = out_ch;
    }
  }
  x = g.op("Flatten", {g.op("GlobalAveragePool", {x})}, {Attribute::Int("axis", 1)});
  const std::string fc_w = g.fan_in_weight("fc.weight", {1000, in_ch}, in_ch);
  const std::string fc_b = g.weight("fc.bias", {1000}, -0.01f, 0.01f);
  const std::string logits = g.op("Gemm", {x, fc_w, fc_b}, {Attribute::Int("transB", 1)});
  g.output(logits, DataType::float32, {batch, 1000});
  return g.write(path, "resnet" + std::to_string(spec.depth), options);
}

ModelSummary write_conv_zoo(const std::string& path, const ConvZooSpec& spec, const WriteOptions& options) {
  require(spec.convs >= 1 && spec.convs <= 2000, "convs must be 1..2000");
  require(spec.max_channels >= 8 && spec.max_channels <= 512, "max channels must be 8..512");
  require(spec.max_spatial >= 14 && spec.max_spatial <= 512, "max spatial size must be 14..512");
  require(spec.batch >= 1 && spec.batch <= 1024, "batch must be 1..1024");

  // Every (in, out, kernel, stride, dilation, spatial, depthwise) combination is a distinct cuDNN problem.
  using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;
  std::vector<Shape> shapes;
  const int64_t spatials[] = {spec.max_spatial / 4, spec.max_spatial / 2, spec.max_spatial};
  for (int64_t in : {3, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512}) {
    if (in > spec.max_channels) continue;
    for (int64_t out : {8, 16, 32, 48, 64, 96, 128}) {
      for (int64_t k : {1, 3, 5, 7}) {
        for (int64_t stride : {1, 2}) {
          for (int64_t dilation : {1, 2}) {
            if (k == 1 && dilation > 1) continue;
            for (int64_t s : spatials) {
              shapes.emplace_back(in, out, k, stride, dilation, s, false);
              if (in == out && k == 3) shapes.emplace_back(in, out, k, stride, dilation, s, true);
            }
          }
        }
      }
    }
  }
  require(static_cast<size_t>(spec.convs) <= shapes.size(),
          "at most " + std::to_string(shapes.size()) + " distinct convolutions with these limits");
  SplitMix64 rng{options.seed};
  for (size_t i = shapes.size() - 1; i > 0; --i) std::swap(shapes[i], shapes[rng.next() % (i + 1)]);  // Fisher-Yates
  shapes.resize(static_cast<size_t>(spec.convs));

  // One input per (channels, size) the convolutions need, each conv's output pooled to [N, C] and
  // all of them concatenated: only ops that every execution provider runs (Conv, GlobalAveragePool,
  // Flatten, Concat).
  GraphBuilder g("convzoo", options.seed);
  std::map<std::pair<int64_t, int64_t>, std::string> inputs;
  std::vector<std::string> pooled;
  int64_t out_channels = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [in, out, k, stride, dilation, s, depthwise] = shapes[i];
    auto [it, added] = inputs.emplace(std::make_pair(in, s), "input_c" + std::to_string(in) + "_s" + std::to_string(s));
    if (added) {
      const std::string height = "height_" + it->second;  // each input's size varies on its own
      const std::string width = "width_" + it->second;
      g.input(it->second, DataType::float32,
              {batch_dim(spec.batch, spec.dynamic_batch), in, spec.dynamic_spatial ? Dim(height.c_str()) : Dim(s),
               spec.dynamic_spatial ? Dim(width.c_str()) : Dim(s)});
    }
    const int64_t group = depthwise ? in : 1;
    const std::string w = g.fan_in_weight("conv" + std::to_string(i) + ".weight", {out, in / group, k, k}, in / group * k * k);
    const int64_t pad = dilation * (k - 1) / 2;
    const std::string y = g.op("Conv", {it->second, w},
                               {Attribute::Ints("kernel_shape", {k, k}), Attribute::Ints("strides", {stride, stride}),
                                Attribute::Ints("pads", {pad, pad, pad, pad}), Attribute::Ints("dilations", {dilation, dilation}),
                                Attribute::Int("group", group)});
    pooled.push_back(g.op("Flatten", {g.op("GlobalAveragePool", {y})}, {Attribute::Int("axis", 1)}));
    out_channels += out;
  }
  const std::string all = pooled.size() == 1 ? pooled.front() : g.op("Concat", pooled, {Attribute::Int("axis", 1)});
  g.output(all, DataType::float32, {batch_dim(spec.batch, spec.dynamic_batch), out_channels});
  g.set_distinct_convs(spec.convs);
  return g.write(path, "convzoo", options);
}

ModelSummary write_transformer(const std::string& path, const TransformerSpec& spec, const WriteOptions& options) {
  require(spec.layers >= 1 && spec.layers <= 256, "layers must be 1..256");
  require(spec.hidden >= 16 && spec.hidden <= 16384, "hidden width must be 16..16384");
  require(spec.heads >= 1 && spec.hidden % spec.heads == 0, "hidden width must be a multiple of heads");
  require(spec.sequence >= 1 && spec.sequence <= 65536, "sequence must be 1..65536");
  require(spec.vocabulary >= 2, "vocabulary must be at least 2");
  require(spec.ffn_multiplier >= 1 && spec.ffn_multiplier <= 16, "ffn multiplier must be 1..16");
  require(spec.batch >= 1 && spec.batch <= 4096, "batch must be 1..4096");

  const int64_t h = spec.hidden;
  const int64_t n = spec.heads;
  const int64_t d = h / n;
  const int64_t ffn = h * spec.ffn_multiplier;
  GraphBuilder g("transformer", options.seed);
  const Dim batch = batch_dim(spec.batch, spec.dynamic_batch);
  const Dim sequence = spec.dynamic_sequence ? Dim("sequence") : Dim(spec.sequence);
  g.input("input_ids", DataType::int64, {batch, sequence});
  if (spec.attention_mask) g.input("attention_mask", DataType::int64, {batch, sequence});

  auto linear = [&](const std::string& x, const std::string& name, int64_t in, int64_t out) {
    const std::string w = g.fan_in_weight(name + ".weight", {in, out}, in);
    const std::string b = g.weight(name + ".bias", {out}, -0.02f, 0.02f);
    return g.op("Add", {g.op("MatMul", {x, w}), b});
  };
  auto layer_norm = [&](const std::string& x, const std::string& name) {
    const std::string gamma = g.weight(name + ".weight", {h}, 0.9f, 1.1f);
    const std::string beta = g.weight(name + ".bias", {h}, -0.02f, 0.02f);
    return g.op("LayerNormalization", {x, gamma, beta},
                {Attribute::Int("axis", -1), Attribute::Float("epsilon", 1e-5f)});
  };

  const std::string table = g.weight("embeddings.word", {spec.vocabulary, h}, -0.05f, 0.05f);
  std::string positions = g.weight("embeddings.position", {spec.sequence, h}, -0.05f, 0.05f);
  if (spec.dynamic_sequence) {  // the first rows of the table: as many as the call's tokens
    const std::string length = g.op("Slice", {g.op("Shape", {"input_ids"}), g.int64s("one_i", {1}), g.int64s("two_i", {2})});
    positions = g.op("Slice", {positions, g.int64s("zero_i", {0}), length, g.int64s("zero_i", {0})});
  }
  std::string x = g.op("Add", {g.op("Gather", {table, "input_ids"}, {Attribute::Int("axis", 0)}), positions});
  // Padding tokens (mask 0) get -10000 added to their attention scores: softmax gives them nothing.
  std::string mask_bias;
  if (spec.attention_mask) {
    const std::string mask = g.op("Cast", {"attention_mask"}, {Attribute::Int("to", 1)});
    const std::string bias = g.op("Mul", {g.op("Sub", {g.scalar("one", 1.0f), mask}), g.scalar("masked", -10000.0f)});
    mask_bias = g.op("Unsqueeze", {bias, g.int64s("axes_heads_queries", {1, 2})});
  }
  x = layer_norm(x, "embeddings.norm");

  const std::string heads_shape = g.int64s("shape_heads", {0, 0, n, d});
  const std::string hidden_shape = g.int64s("shape_hidden", {0, 0, h});
  const std::string scale = g.scalar("attention_scale", std::sqrt(static_cast<float>(d)));
  for (int l = 0; l < spec.layers; ++l) {
    const std::string p = "layer" + std::to_string(l);
    auto split_heads = [&](const std::string& t, std::vector<int64_t> perm) {
      return g.op("Transpose", {g.op("Reshape", {t, heads_shape})}, {Attribute::Ints("perm", std::move(perm))});
    };
    const std::string q = split_heads(linear(x, p + ".attention.query", h, h), {0, 2, 1, 3});
    const std::string k = split_heads(linear(x, p + ".attention.key", h, h), {0, 2, 3, 1});
    const std::string v = split_heads(linear(x, p + ".attention.value", h, h), {0, 2, 1, 3});
    std::string scores = g.op("Div", {g.op("MatMul", {q, k}), scale});
    if (!mask_bias.empty()) scores = g.op("Add", {scores, mask_bias});
    const std::string probs = g.op("Softmax", {scores}, {Attribute::Int("axis", -1)});
    std::string context = g.op("Transpose", {g.op("MatMul", {probs, v})}, {Attribute::Ints("perm", {0, 2, 1, 3})});
    context = g.op("Reshape", {context, hidden_shape});
    const std::string attention = linear(context, p + ".attention.output", h, h);
    x = layer_norm(g.op("Add", {attention, x}), p + ".attention.norm");

    // GELU written out with Erf, as exporters emit it (ONNX Runtime fuses it back into one kernel).
    const std::string up = linear(x, p + ".ffn.up", h, ffn);
    const std::string erf = g.op("Erf", {g.op("Div", {up, g.scalar("sqrt2", std::sqrt(2.0f))})});
    const std::string gelu = g.op("Mul", {g.op("Mul", {up, g.op("Add", {erf, g.scalar("one", 1.0f)})}),
                                          g.scalar("half", 0.5f)});
    const std::string down = linear(gelu, p + ".ffn.down", ffn, h);
    x = layer_norm(g.op("Add", {down, x}), p + ".ffn.norm");
  }
  g.output(x, DataType::float32, {batch, sequence, h});
  return g.write(path, "transformer", options,
                 {{"ortfleet.input_range.input_ids", "0," + std::to_string(spec.vocabulary - 1)}});
}

ModelSummary write_segmenter(const std::string& path, const SegmenterSpec& spec, const WriteOptions& options) {
  require(spec.channels >= 1 && spec.channels <= 1024, "channels must be 1..1024");
  require(spec.depth >= 0 && spec.depth <= 64, "depth must be 0..64");
  require(spec.height >= 8 && spec.height % 8 == 0 && spec.width >= 8 && spec.width % 8 == 0, "height and width must be multiples of 8");
  require(spec.batch >= 1 && spec.batch <= 4096, "batch must be 1..4096");
  GraphBuilder g("segmenter", options.seed);
  const Dim batch = batch_dim(spec.batch, spec.dynamic_batch);
  g.input("image", DataType::float32,
          {batch, 3, spec.dynamic_spatial ? Dim("height") : Dim(spec.height), spec.dynamic_spatial ? Dim("width") : Dim(spec.width)});
  int convs = 0;
  auto conv = [&](const std::string& x, int64_t in, int64_t out, int64_t k, int64_t stride) {
    const std::string name = "conv" + std::to_string(convs++);
    const std::string w = g.fan_in_weight(name + ".weight", {out, in, k, k}, in * k * k);
    const std::string b = g.weight(name + ".bias", {out}, -0.02f, 0.02f);
    return g.op("Conv", {x, w, b},
                {Attribute::Ints("kernel_shape", {k, k}), Attribute::Ints("strides", {stride, stride}),
                 Attribute::Ints("pads", {k / 2, k / 2, k / 2, k / 2})});
  };
  auto stage = [&](const std::string& x, int64_t in, int64_t out) {
    std::string y = g.op("Relu", {conv(x, in, out, 3, 2)});
    for (int i = 0; i < spec.depth; ++i) y = g.op("Relu", {conv(y, out, out, 3, 1)});
    return y;
  };
  const int64_t c = spec.channels;
  const std::string half = stage("image", 3, c);      // 1/2
  const std::string quarter = stage(half, c, 2 * c);  // 1/4
  const std::string eighth = stage(quarter, 2 * c, 4 * c);
  const std::string up_weight = g.fan_in_weight("up.weight", {4 * c, 2 * c, 2, 2}, 4 * c);
  const std::string up = g.op("Relu", {g.op("ConvTranspose", {eighth, up_weight},
                                            {Attribute::Ints("kernel_shape", {2, 2}), Attribute::Ints("strides", {2, 2})})});
  const std::string merged = g.op("Relu", {conv(g.op("Add", {up, quarter}), 2 * c, 2 * c, 3, 1)});
  const std::string map = g.op("Sigmoid", {conv(merged, 2 * c, 1, 1, 1)});
  g.output(map, DataType::float32,
           {batch, 1, spec.dynamic_spatial ? Dim("height_4") : Dim(spec.height / 4), spec.dynamic_spatial ? Dim("width_4") : Dim(spec.width / 4)});
  return g.write(path, "segmenter", options);
}

ModelSummary write_volume(const std::string& path, const VolumeSpec& spec, const WriteOptions& options) {
  require(spec.levels >= 1 && spec.levels <= 8, "levels must be 1..8");
  require(spec.size >= 2 && spec.size <= 1024 && spec.size % (1 << spec.levels) == 0, "size must be a multiple of 2^levels, at most 1024");
  require(spec.channels >= 1 && spec.channels <= 512, "channels must be 1..512");
  require(spec.classes >= 1 && spec.classes <= 1024, "classes must be 1..1024");
  require(spec.batch >= 1 && spec.batch <= 1024, "batch must be 1..1024");
  GraphBuilder g("volume", options.seed);
  const int64_t n = spec.batch;
  const int64_t s = spec.size;
  g.input("volume", DataType::float32, {n, 1, s, s, s});
  int convs = 0;
  auto conv = [&](const std::string& x, int64_t in, int64_t out, int64_t k, int64_t stride) {
    const std::string name = "conv" + std::to_string(convs++);
    const std::string w = g.fan_in_weight(name + ".weight", {out, in, k, k, k}, in * k * k * k);
    const std::string b = g.weight(name + ".bias", {out}, -0.02f, 0.02f);
    const int64_t p = k / 2;
    return g.op("Relu", {g.op("Conv", {x, w, b},
                              {Attribute::Ints("kernel_shape", {k, k, k}), Attribute::Ints("strides", {stride, stride, stride}),
                               Attribute::Ints("pads", {p, p, p, p, p, p})})});
  };
  std::vector<std::pair<std::string, int64_t>> skips;  // each level's output and its channels
  std::string x = conv(conv("volume", 1, spec.channels, 3, 1), spec.channels, spec.channels, 3, 1);
  int64_t c = spec.channels;
  for (int level = 1; level < spec.levels; ++level) {
    skips.emplace_back(x, c);
    x = conv(conv(x, c, 2 * c, 3, 2), 2 * c, 2 * c, 3, 1);
    c *= 2;
  }
  const std::string scales = g.floats("up.scales", {1.0f, 1.0f, 2.0f, 2.0f, 2.0f});
  for (auto it = skips.rbegin(); it != skips.rend(); ++it) {
    const std::string up = g.op("Resize", {x, "", scales}, {Attribute::String("mode", "nearest")});
    x = conv(conv(g.op("Concat", {up, it->first}, {Attribute::Int("axis", 1)}), c + it->second, it->second, 3, 1), it->second, it->second, 3, 1);
    c = it->second;
  }
  const std::string w = g.fan_in_weight("head.weight", {spec.classes, c, 1, 1, 1}, c);
  const std::string map = g.op("Conv", {x, w}, {Attribute::Ints("kernel_shape", {1, 1, 1})});
  g.output(map, DataType::float32, {n, spec.classes, s, s, s});
  return g.write(path, "volume", options);
}

ModelSummary write_node_heavy(const std::string& path, const NodeHeavySpec& spec, const WriteOptions& options) {
  require(spec.nodes >= kNodeHeavyBlockNodes && spec.nodes <= 2'000'000,
          "nodes must be " + std::to_string(kNodeHeavyBlockNodes) + "..2000000");
  require(spec.width >= 1 && spec.width <= 4096, "width must be 1..4096");
  require(spec.batch >= 1 && spec.batch <= 4096, "batch must be 1..4096");
  const int64_t w = spec.width;
  const int blocks = (spec.nodes + kNodeHeavyBlockNodes - 1) / kNodeHeavyBlockNodes;
  GraphBuilder g("nodes", options.seed);
  const Dim batch = batch_dim(spec.batch, spec.dynamic_batch);
  g.input("input", DataType::float32, {batch, w});
  const std::string sqrt2 = g.scalar("sqrt2", std::sqrt(2.0f));
  const std::string one = g.scalar("one", 1.0f);
  const std::string half = g.scalar("half", 0.5f);
  std::string x = "input";
  for (int b = 0; b < blocks; ++b) {
    const std::string p = "block" + std::to_string(b);
    const std::string weight = g.fan_in_weight(p + ".weight", {w, w}, w);
    const std::string bias = g.weight(p + ".bias", {w}, -0.1f, 0.1f);
    const std::string up = g.op("Add", {g.op("MatMul", {x, weight}), bias});
    const std::string erf = g.op("Erf", {g.op("Div", {up, sqrt2})});
    const std::string gelu = g.op("Mul", {g.op("Mul", {up, g.op("Add", {erf, one})}), half});
    const std::string gamma = g.weight(p + ".norm.weight", {w}, 0.9f, 1.1f);
    const std::string beta = g.weight(p + ".norm.bias", {w}, -0.02f, 0.02f);
    x = g.op("LayerNormalization", {g.op("Add", {gelu, x}), gamma, beta},
             {Attribute::Int("axis", -1), Attribute::Float("epsilon", 1e-5f)});
  }
  g.output(x, DataType::float32, {batch, w});
  return g.write(path, "nodes", options);
}

ModelSummary write_mlp(const std::string& path, const MlpSpec& spec, const WriteOptions& options) {
  require(spec.layers >= 1 && spec.layers <= 1000, "layers must be 1..1000");
  require(spec.width >= 1 && spec.width <= 65536, "width must be 1..65536");
  require(spec.batch >= 1, "batch must be at least 1");
  GraphBuilder g("mlp", options.seed);
  const Dim batch = batch_dim(spec.batch, spec.dynamic_batch);
  g.input("input", DataType::float32, {batch, spec.width});
  std::string x = "input";
  for (int l = 0; l < spec.layers; ++l) {
    const std::string p = "layer" + std::to_string(l);
    const std::string w = g.fan_in_weight(p + ".weight", {spec.width, spec.width}, spec.width);
    const std::string b = g.weight(p + ".bias", {spec.width}, -0.1f, 0.1f);
    x = g.op("Relu", {g.op("Add", {g.op("MatMul", {x, w}), b})});
  }
  g.output(x, DataType::float32, {batch, spec.width});
  return g.write(path, "mlp", options);
}

ModelSummary write_identity(const std::string& path, const IdentitySpec& spec, const WriteOptions& options) {
  require(spec.width >= 1 && spec.width <= (1 << 30), "width must be 1..2^30");
  require(spec.batch >= 1, "batch must be at least 1");
  GraphBuilder g("identity", options.seed);
  const Dim batch = batch_dim(spec.batch, spec.dynamic_batch);
  g.input("input", DataType::float32, {batch, spec.width});
  g.output(g.op("Identity", {"input"}), DataType::float32, {batch, spec.width});
  return g.write(path, "identity", options);
}

std::string default_model(const std::string& cache_dir) {
  // Every `ortfleet start` without a model loads this file: it must come from a folder no other user
  // can put a model of their own in.
  detail::ensure_private_dir(cache_dir, "Set ORTFLEET_CACHE to a folder only you can write (ortfleet makes it with mode 0700)");
  const fs::path path = fs::path(cache_dir) / "resnet50-seed1.onnx";
  std::error_code ec;
  if (fs::exists(path, ec) && fs::file_size(path, ec) > 0) return path.string();
  // Written whole or not at all (OutputFile): a concurrent or interrupted run never leaves a
  // half-written default model behind.
  write_resnet(path.string(), ResNetSpec{});
  return path.string();
}

}  // namespace ortfleet::synth
