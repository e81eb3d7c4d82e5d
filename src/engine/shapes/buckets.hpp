#pragma once
// Buckets: dynamic dims padded up to the next of a few declared sizes, so that a stream of many
// shapes runs on a few sessions made and warmed up at start-up. Outputs are cropped back along the
// dims that follow a padded input dim; which ones do is learned at warm-up from two shapes, and an
// output none of whose dims follows (pooled, reduced over the padded dim) refuses the buckets, since
// padding would change its values.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// One padded dim: the input dims it covers (those sharing a symbolic name are padded together) and
/// the sizes they are padded up to.
struct BucketDim {
  std::string name;  ///< "x.2", or "batch" for pad_batch
  std::vector<std::pair<std::string, size_t>> members;  ///< (input, dim)
  std::vector<int64_t> sizes;                           ///< ascending
  bool batch = false;  ///< pad_batch's: the first dim of every input whose first dim is dynamic
};

/// A call that shows whether padding keeps a model's outputs: `real` padded to the bucket shape
/// `bucket` in padded dim `dim` alone, its outputs cropped back, against `real` run unpadded.
struct PaddingProbe {
  size_t dim = 0;  ///< index into BucketPlan::dims()
  InputShapes real;
  InputShapes bucket;
};

/// The value `input` is padded with: its `shapes.pad_values` entry, else 0.
double pad_value_of(const std::string& input, const std::map<std::string, double>& pad_values);

/// Generated inputs all on one side of the value they are padded with. Inputs on both sides of it
/// (made-up ones in [-1, 1] padded with 0) hide an output that reads the padded positions only through
/// a min or a max over them (min-max normalisation, x - max over a sequence): the pad value is never
/// the min nor the max. Real inputs of one sign (an image in [0, 255], log-probabilities) then get
/// other outputs; a probe with every real-valued input above its pad value, and one with every one
/// below it, shows that dependence whatever the inputs' sign.
struct OneSidedInputs {
  bool above = true;
  /// Per real-valued input with such a side: the half of its range beyond its pad value, away from it
  /// ([0.5, 1] above 0 in [-1, 1]; [127.5, 255] above 0 in an image's [0, 255]).
  std::map<std::string, ValueRange> ranges;
  /// "every real-valued input above what it is padded with ('x' in [0.5, 1], padded with 0)"
  std::string text(const std::map<std::string, double>& pad_values) const;
};

/// The one-sided probes for `inputs` whose generated values lie in `ranges` ([-1, 1] where none is
/// given) and which are padded with `pad_values` (0 where none is given): "above" where some
/// real-valued input's range reaches above its pad value from it or from below (lo <= pad < hi),
/// "below" likewise; none where every range lies wholly on one side already (the plain probe is
/// one-sided then) or no input is real-valued (token ids keep their own values: a shifted id would be
/// out of the vocabulary).
std::vector<OneSidedInputs> one_sided_inputs(const std::vector<TensorSpec>& inputs, const std::map<std::string, ValueRange>& ranges,
                                             const std::map<std::string, double>& pad_values);

/// How an output dim follows a padded dim: size = slope * padded dim's size + offset.
struct FollowingDim {
  size_t output_dim = 0;
  size_t bucket = 0;  ///< index into BucketPlan::dims()
  double slope = 0;
  double offset = 0;
};

class BucketPlan {
 public:
  BucketPlan() = default;  ///< no buckets
  /// The options' buckets resolved against the model's inputs; with pad_batch, the first dim of every
  /// input whose first dim is dynamic, padded to `batches`. Throws ortfleet::Error naming an unknown
  /// input, a dim out of range or fixed by the model.
  BucketPlan(const std::vector<TensorSpec>& inputs, const ShapeOptions& options, const std::vector<int64_t>& batches);

  bool empty() const { return dims_.empty(); }
  const std::vector<BucketDim>& dims() const { return dims_; }

  /// Every bucket shape (the cross product of the sizes), other dynamic dims as complete_shapes makes
  /// them from `dynamic_dim`; none for padded batches alone (the declared batches are their shapes).
  /// Throws ortfleet::Error when there are more than `most`.
  std::vector<InputShapes> shapes(const std::vector<TensorSpec>& inputs, int64_t dynamic_dim, size_t most) const;

  /// The bucket shape a call of `given` is padded to: nullopt when a dim is larger than its largest
  /// size (or the dims padded together disagree), so that the call runs as it is.
  std::optional<InputShapes> fit(const InputShapes& given) const;

  /// A call that ran unpadded because a dim passed the largest of its bucket's sizes, in words: what
  /// passed which bucket ("image.2 is 76, past its largest bucket 64") and what to add (the next size
  /// that keeps the factor the bucket's sizes share: 96 for 32,64). Nullopt when no dim did.
  struct Overflow {
    std::string what;
    std::string fix;
  };
  std::optional<Overflow> overflow(const InputShapes& given) const;

  /// Learns which output dims follow each padded dim: `outputs_of(shape)` runs the model on `shape`
  /// (unpadded) and returns its outputs' shapes. For each padded dim, two shapes that differ in it
  /// alone are run: its two smallest sizes, or (one size) a smaller one. Throws ortfleet::Error when an
  /// output has no dim that follows a padded dim (its values would change with padding), naming it.
  void learn(const std::vector<InputShapes>& bucket_shapes, const std::vector<TensorSpec>& outputs,
             const std::function<std::vector<std::vector<int64_t>>(const InputShapes&)>& outputs_of);

  /// One probe per padded dim, from `base` (the first bucket shape, or a declared shape for padded
  /// batches): its smallest size padded to its second; with one size, the smaller size learn() runs
  /// (second_size) padded to it. None for a dim that pads nothing (its one size 1).
  std::vector<PaddingProbe> padding_probes(const InputShapes& base) const;

  /// The shape of each output of a call of `given` that ran padded to `padded`, whose outputs have
  /// `padded_outputs` shapes.
  std::vector<std::vector<int64_t>> cropped_shapes(const InputShapes& given, const InputShapes& padded,
                                                   const std::vector<std::vector<int64_t>>& padded_outputs) const;

  /// The shape of each output of a call of `at`, from those of a call of `ran` (`ran_outputs`), along
  /// the dims learned to follow the buckets: what the outputs of a larger bucket shape will need.
  std::vector<std::vector<int64_t>> output_shapes_at(const InputShapes& at, const InputShapes& ran,
                                                     const std::vector<std::vector<int64_t>>& ran_outputs) const;

  /// The size of bucket `b` in `shapes` (its first member's dim).
  int64_t size_in(size_t b, const InputShapes& shapes) const;

 private:
  /// `ran_outputs` moved along the following dims from `ran` to `given`: cropped (never past
  /// `ran_outputs`), or grown as well.
  std::vector<std::vector<int64_t>> followed(const InputShapes& given, const InputShapes& ran, const std::vector<std::vector<int64_t>>& ran_outputs,
                                             bool grow) const;
  std::vector<BucketDim> dims_;
  std::vector<std::vector<FollowingDim>> following_;  // per output
};

/// "buckets for DIMS refused: ", how every refusal of buckets that only running the model shows
/// begins (ortfleet::refuses_buckets tells it from other failures).
std::string buckets_refused(const std::string& dims);

/// Buckets this process refused because padding changed a model's outputs (Session's check at
/// warm-up), by model path, and why: so that no advice suggests padding a model found to change
/// with it (ShapeTraffic::advice_once, the bench's shape stream).
void remember_padding_refusal(const std::string& model, const std::string& why);
std::optional<std::string> padding_refusal(const std::string& model);

/// A size below `size` that keeps its larger power-of-two factors (960 -> 896, 640 -> 512, 1 -> 2
/// instead): a second shape a convolutional net with strides still takes.
int64_t second_size(int64_t size);

/// The shapes a session makes and warms up at start-up: the declared ones (resolve_shapes) and every
/// bucket shape not among them, with `buckets` planned from `options`. Throws ortfleet::Error for
/// shapes or buckets the inputs cannot take, and for more shapes than kMaxShapeSessions.
/// (Session's declare_shapes does the same with the session's lane named in the error.)
std::vector<InputShapes> declare_shapes(const std::vector<TensorSpec>& inputs, const ShapeOptions& options, int64_t dynamic_dim,
                                        BucketPlan& buckets);

}  // namespace ortfleet::detail
