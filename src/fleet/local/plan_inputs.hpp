#pragma once
// The files a start plan reads, owned by whoever keeps the plan. A plan handed to work that outlives the
// job that made it (a cache entry made in the background, by the job's worker or by the warm pool the job
// left) must not read the job's files: Python's warm-up arrays are a temporary .npz removed with the
// fleet, and a job may delete its own inputs as it ends. Such work reads copies in a private folder of
// its own instead.
#include <optional>

#include "base/private_dir.hpp"
#include "fleet/local/local_start.hpp"

namespace ortfleet::detail {

class OwnedPlanInputs {
 public:
  /// Copies the files `plan` reads besides its model (the warm-up inputs file, the custom-op libraries)
  /// into a fresh private folder (mode 0700, in $TMPDIR), removed with this object, and points `plan`
  /// at the copies. A file that cannot be copied (gone already) stays named as it was: the work then
  /// says what is missing. The model is read where it is (it may be gigabytes; the pool's log says when
  /// it was gone), and folders the plan writes into (the cache) are not inputs.
  explicit OwnedPlanInputs(LocalStartPlan& plan);

 private:
  std::optional<PrivateDir> folder_;
};

}  // namespace ortfleet::detail
