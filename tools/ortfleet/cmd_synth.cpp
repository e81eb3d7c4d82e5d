// ortfleet synth: deterministic test models, written without Python.
#include <fmt/format.h>

#include <iostream>
#include <limits>
#include <memory>

#include "command.hpp"
#include "flag_checks.hpp"
#include "output.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/synth/synth.hpp"

namespace ortfleet::cli {

namespace {

constexpr double kMaxInt = std::numeric_limits<int>::max();

struct SynthFlags {
  std::string output;
  uint64_t seed = 1;
  std::string external = "auto";
  synth::ResNetSpec resnet;
  synth::ConvZooSpec zoo;
  synth::VolumeSpec volume;
  synth::TransformerSpec transformer;
  synth::SegmenterSpec segmenter;
  synth::MlpSpec mlp;
  synth::NodeHeavySpec nodes;
  synth::IdentitySpec identity;
};

synth::WriteOptions write_options(const SynthFlags& f, ProgressLine& progress) {
  synth::WriteOptions o;
  o.seed = f.seed;
  o.external_data = f.external == "always" ? synth::ExternalData::always
                    : f.external == "never" ? synth::ExternalData::never
                                            : synth::ExternalData::automatic;
  o.progress = [&progress](uint64_t done, uint64_t total) {
    if (total < (64u << 20)) return;  // small models are written in a blink
    progress.update(fmt::format("writing weights {} / {} ({:.0f}%)", bytes_text(done), bytes_text(total),
                                100.0 * static_cast<double>(done) / static_cast<double>(total)));
  };
  return o;
}

int report(const synth::ModelSummary& s, const Globals& g) {
  if (g.json) {
    print_json({{"path", s.path}, {"external_data", s.external_data_path}, {"kind", s.kind}, {"parameters", s.parameters},
                {"weight_bytes", s.weight_bytes}, {"file_bytes", s.file_bytes}, {"nodes", s.nodes},
                {"conv_nodes", s.conv_nodes}, {"distinct_convs", s.distinct_convs}});
    return 0;
  }
  std::cout << fmt::format("wrote {} ({}): {} parameters, {} on disk, {}", s.path, s.kind, magnitude_text(s.parameters),
                           bytes_text(s.file_bytes), count_text(s.nodes, "node"));
  if (s.distinct_convs > 0) std::cout << fmt::format(", {} distinct conv shapes", s.distinct_convs);
  else if (s.conv_nodes > 0) std::cout << fmt::format(", {} convolutions", s.conv_nodes);
  if (!s.external_data_path.empty()) std::cout << ", weights in " << s.external_data_path;
  std::cout << "\n";
  return 0;
}

CLI::App* model_command(CLI::App* synth, const char* name, const char* help, SynthFlags& f) {
  auto* c = synth->add_subcommand(name, help);
  add_output_option(c, "output", f.output, "Where to write the .onnx file")->required();
  in_range(c->add_option("--seed", f.seed, "Seed of the random weights (same seed, same bytes)"), {.lo = 0, .hi = 1e18});
  c->add_option("--external-data", f.external, "Keep weights in a side file: auto (over 2 GB), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  return c;
}

}  // namespace

void register_synth(CLI::App& app, Globals& globals, Action& action) {
  auto* synth = app.add_subcommand("synth", "Write a synthetic ONNX model (deterministic from a seed)");
  synth->require_subcommand(1);
  auto f = std::make_shared<SynthFlags>();

  auto* resnet = model_command(synth, "resnet", "A ResNet (18/34/50/101/152; ResNet-50 by default)", *f);
  resnet->add_option("--depth", f->resnet.depth, "18, 34, 50, 101 or 152")->check(CLI::IsMember({18, 34, 50, 101, 152}));
  in_range(resnet->add_option("--width", f->resnet.width, "Channel multiplier (size knob)"), {.lo = 0.05, .hi = 8, .whole = false, .above_lo = true});
  in_range(resnet->add_option("--image-size", f->resnet.image_size, "Input height and width"), {.lo = 32, .hi = 1024});
  in_range(resnet->add_option("--batch", f->resnet.batch, "Batch size"), {.lo = 1, .hi = 4096});
  resnet->add_flag("--dynamic-batch", f->resnet.dynamic_batch, "Make the batch dimension symbolic");

  auto* zoo = model_command(synth, "convzoo", "Hundreds of convolutions of distinct shapes (cuDNN algorithm search)", *f);
  in_range(zoo->add_option("--convs", f->zoo.convs, "Number of distinct convolutions"), {.lo = 1, .hi = 2000});
  in_range(zoo->add_option("--max-channels", f->zoo.max_channels, "Largest input channel count"), {.lo = 8, .hi = 512});
  in_range(zoo->add_option("--max-spatial", f->zoo.max_spatial, "Largest feature-map size"), {.lo = 14, .hi = 512});
  in_range(zoo->add_option("--batch", f->zoo.batch, "Batch size"), {.lo = 1, .hi = 1024});
  zoo->add_flag("--dynamic-batch", f->zoo.dynamic_batch, "Make the batch dimension symbolic");
  zoo->add_flag("--dynamic-spatial", f->zoo.dynamic_spatial, "Make every input's height and width symbolic");

  auto* volume = model_command(synth, "volume", "A 3D U-Net on a volume (3x3x3 convolutions on large volumes: cuDNN's slowest first inference)", *f);
  in_range(volume->add_option("--size", f->volume.size, "The volume's edge (a multiple of 2^levels)"), {.lo = 2, .hi = 1024});
  in_range(volume->add_option("--channels", f->volume.channels, "Channels of the first level (doubled at each further level)"), {.lo = 1, .hi = 512});
  in_range(volume->add_option("--levels", f->volume.levels, "Levels of the U"), {.lo = 1, .hi = 8});
  in_range(volume->add_option("--classes", f->volume.classes, "Channels of the output map"), {.lo = 1, .hi = 1024});
  in_range(volume->add_option("--batch", f->volume.batch, "Batch size"), {.lo = 1, .hi = 1024});

  auto* tf = model_command(synth, "transformer", "A BERT-style encoder; 24 x 1024 weighs about 1.27 GB", *f);
  in_range(tf->add_option("--layers", f->transformer.layers, "Encoder layers"), {.lo = 1, .hi = 256});
  in_range(tf->add_option("--hidden", f->transformer.hidden, "Hidden width"), {.lo = 16, .hi = 16384});
  in_range(tf->add_option("--heads", f->transformer.heads, "Attention heads"), {.lo = 1, .hi = 16384});
  in_range(tf->add_option("--ffn-multiplier", f->transformer.ffn_multiplier, "Feed-forward width / hidden width"), {.lo = 1, .hi = 16});
  in_range(tf->add_option("--sequence", f->transformer.sequence, "Sequence length"), {.lo = 1, .hi = 65536});
  in_range(tf->add_option("--vocabulary", f->transformer.vocabulary, "Vocabulary size"), {.lo = 2, .hi = kMaxInt});
  in_range(tf->add_option("--batch", f->transformer.batch, "Batch size"), {.lo = 1, .hi = 4096});
  tf->add_flag("--dynamic-batch", f->transformer.dynamic_batch, "Make the batch dimension symbolic");
  tf->add_flag("--dynamic-sequence", f->transformer.dynamic_sequence, "Make the sequence dimension symbolic (--sequence is then the longest)");
  tf->add_flag("--attention-mask", f->transformer.attention_mask, "Add an attention_mask input (1 = token, 0 = padding)");

  auto* seg = model_command(synth, "segmenter",
                            "A fully convolutional segmentation net (strided encoder, decoder to a quarter of the image), dynamic height and width",
                            *f);
  in_range(seg->add_option("--channels", f->segmenter.channels, "Channels of the first stage (doubled at each further stage)"), {.lo = 1, .hi = 1024});
  in_range(seg->add_option("--depth", f->segmenter.depth, "3x3 convolutions per stage after its strided one"), {.lo = 0, .hi = 64});
  in_range(seg->add_option("--height", f->segmenter.height, "Image height, when fixed (a multiple of 8)"), {.lo = 8, .hi = 65536});
  in_range(seg->add_option("--width", f->segmenter.width, "Image width, when fixed (a multiple of 8)"), {.lo = 8, .hi = 65536});
  in_range(seg->add_option("--batch", f->segmenter.batch, "Batch size"), {.lo = 1, .hi = 4096});
  seg->add_flag("--dynamic-batch", f->segmenter.dynamic_batch, "Make the batch dimension symbolic");
  seg->add_flag("!--fixed-spatial", f->segmenter.dynamic_spatial, "Make height and width fixed (default: symbolic)");

  auto* nodes = model_command(synth, "nodes", "Tens of thousands of small nodes (start-up cost per node)", *f);
  in_range(nodes->add_option("--nodes", f->nodes.nodes, "Nodes in the graph (rounded up to whole blocks of 9)"), {.lo = 9, .hi = 2000000});
  in_range(nodes->add_option("--width", f->nodes.width, "Features per activation (weights: width x width per block)"), {.lo = 1, .hi = 4096});
  in_range(nodes->add_option("--batch", f->nodes.batch, "Batch size"), {.lo = 1, .hi = 4096});
  nodes->add_flag("--dynamic-batch", f->nodes.dynamic_batch, "Make the batch dimension symbolic");

  auto* mlp = model_command(synth, "mlp", "A small multilayer perceptron (fast tests)", *f);
  in_range(mlp->add_option("--layers", f->mlp.layers, "Layers"), {.lo = 1, .hi = 1000});
  in_range(mlp->add_option("--width", f->mlp.width, "Width"), {.lo = 1, .hi = 65536});
  in_range(mlp->add_option("--batch", f->mlp.batch, "Batch size"), {.lo = 1, .hi = kMaxInt});
  mlp->add_flag("--dynamic-batch", f->mlp.dynamic_batch, "Make the batch dimension symbolic");

  auto* identity = model_command(synth, "identity", "One input copied to its output (round-trip timing)", *f);
  in_range(identity->add_option("--width", f->identity.width, "Elements per batch row"), {.lo = 1, .hi = 1 << 30});
  in_range(identity->add_option("--batch", f->identity.batch, "Batch size, when fixed (--fixed-batch)"), {.lo = 1, .hi = kMaxInt});
  identity->add_flag("!--fixed-batch", f->identity.dynamic_batch, "Make the batch dimension fixed (default: symbolic)");

  auto bind = [&globals, &action, f](CLI::App* cmd, auto writer) {
    cmd->callback([cmd, &globals, &action, f, writer] {
      // A size the model does not fix does nothing: refused before the model is written.
      const FlagChecks flags(*cmd);
      flags.excludes("--batch", "--dynamic-batch", "a dynamic batch has no size");
      if (cmd->get_name() == "identity") flags.needs("--batch", "--fixed-batch");
      if (cmd->get_name() == "segmenter") {
        for (const char* size : {"--height", "--width"}) flags.needs(size, "--fixed-spatial");
      }
      action = [&globals, f, writer] {
        ProgressLine progress(!globals.quiet);
        const auto summary = writer(*f, write_options(*f, progress));
        progress.clear();
        return report(summary, globals);
      };
    });
  };
  bind(resnet, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_resnet(s.output, s.resnet, o); });
  bind(zoo, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_conv_zoo(s.output, s.zoo, o); });
  bind(volume, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_volume(s.output, s.volume, o); });
  bind(tf, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_transformer(s.output, s.transformer, o); });
  bind(seg, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_segmenter(s.output, s.segmenter, o); });
  bind(nodes, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_node_heavy(s.output, s.nodes, o); });
  bind(mlp, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_mlp(s.output, s.mlp, o); });
  bind(identity, [](const SynthFlags& s, const synth::WriteOptions& o) { return synth::write_identity(s.output, s.identity, o); });
}

}  // namespace ortfleet::cli
