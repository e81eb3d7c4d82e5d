#pragma once
// The measured shape policy: what serves a call of a shape nothing was declared for. ONNX Runtime
// 1.29's CUDA EP rebuilds a convolution's cuDNN plan when a session's input shape changes, so on a
// GPU a shape that keeps coming back may pay for a session of its own; a stream of ever-new shapes
// never does (each new shape pays cuDNN's search in any session, and a new session on top). The
// rule is rent-or-buy: a shape gets its own session once the switches it caused in the shared
// session have cost what a new session costs. Both are priced when they first matter, never at
// start-up: a switch at the first shape that comes back after another (run again to see its steady
// time), a new session from the start's own creation and first run; kept beside the cache entry. A stream that brings more new shapes than the cap is told, once, which
// buckets would serve it.
#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// What shapes cost one model's sessions on one device.
struct ShapeCosts {
  double steady_ms = 0;       ///< a call of the shape the session ran last
  double switch_ms = 0;       ///< what a call of a known shape costs more after a call of another shape
  double new_session_ms = 0;  ///< making a session and its first call, beyond a steady call
  /// Whether a session of its own can pay for a shape at all: switching costs more than noise.
  bool switching_costs() const { return switch_ms > std::max(0.5, 0.25 * steady_ms); }
};

/// ENTRY.shape-costs.json beside the cache entry ENTRY, measured under `conditions` (the CUDA EP's
/// options, which the entry's key leaves out: cuDNN's search changes what a switch costs). nullopt
/// when absent, unreadable, or measured under other conditions.
std::optional<ShapeCosts> read_shape_costs(const std::string& entry, const std::string& conditions);
/// Writes it (best effort: the costs are measured again at a later start when this fails).
void write_shape_costs(const std::string& entry, const std::string& conditions, const ShapeCosts& costs);

/// The shapes of calls nothing was declared for, and what they paid in the shared session.
class ShapeTraffic {
 public:
  /// A call of `shapes` runs in the shared session, `switched` when that session ran another shape
  /// last. A shape that comes back after another pays `costs`' switch (its first call pays cuDNN's
  /// search in any session, its own too, so only returns count). True when the shape has now paid
  /// for a session of its own (`costs` known and switching costs something).
  bool pays_for_session(const std::string& signature, bool switched, const std::optional<ShapeCosts>& costs);
  /// Records a call's shapes, whose signature is to_string(shapes) (distinct shapes and the range
  /// of each dim).
  void note(const std::string& signature, const InputShapes& shapes);
  /// Whether a call of `signature` was noted before (within the shapes remembered).
  bool seen(const std::string& signature) const;
  /// The one message for a stream that brought more distinct shapes than `cap`: what it sees and the
  /// buckets that would serve it, or, where padding was found to change the model's outputs
  /// (`padding_changes_outputs`: why), that none would. nullopt before that, and after it was said once.
  std::optional<std::string> advice_once(size_t cap, const std::optional<std::string>& padding_changes_outputs = std::nullopt);
  /// The buckets that would serve the shapes noted: suggested_buckets() of every dim that varied.
  std::vector<DimBuckets> buckets() const;

 private:
  struct DimRange {
    int64_t lo = 0;
    int64_t hi = 0;
    int64_t common = 0;  // the greatest common divisor of the sizes seen
  };
  std::vector<DimBuckets> buckets_locked() const;

  mutable std::mutex mutex_;
  std::map<std::string, double> paid_;  // by signature; present once the shape was seen
  std::set<std::string> seen_;
  std::map<std::pair<std::string, size_t>, DimRange> ranges_;
  bool said_ = false;
};

/// What a shape nothing was made for costs a session on `device`, and what to do about inputs whose
/// dims vary, in one sentence: the one shape advice of every diagnostic (doctor, profile, tune, a stream
/// of new shapes), so that none contradicts another. On a CUDA GPU a call whose shape differs from the
/// session's last rebuilds each convolution's cuDNN plan: declare the shapes served, or pad a varying dim
/// to a few sizes. On the CPU there is no plan to build: one session serves every shape.
std::string shape_advice(const Device& device);
/// Whether a call of a new shape costs a session on `device` much more than a steady call (CUDA's plan
/// rebuilds): where it does not, a stream of new shapes needs no warning and no buckets.
bool new_shapes_cost(const Device& device);

/// Buckets for a dim seen from lo to hi, all sizes multiples of `common`: four sizes or fewer,
/// aligned to `common`, the largest hi ("x.2=320,512,736,960").
DimBuckets suggested_buckets(const std::string& input, size_t dim, int64_t lo, int64_t hi, int64_t common);

}  // namespace ortfleet::detail
