#pragma once
// What the pool's tests compare a worker's outputs against: the same model's session in this process.
#include <string>
#include <vector>

#include "ortfleet/engine/session.hpp"

namespace ortfleet::test {

/// The first output of a run, as floats.
inline std::vector<float> first_output(const std::vector<Tensor>& out) {
  return {out[0].values<float>(), out[0].values<float>() + out[0].element_count()};
}

/// The first output of `model` run on `inputs` by a session in this process.
inline std::vector<float> in_process_output(const std::string& model, const std::vector<Tensor>& inputs) {
  SessionSpec spec;
  spec.model_path = model;
  return first_output(Session(spec).run(inputs));
}

}  // namespace ortfleet::test
