// The checks of options that no single field's type makes: ONNX Runtime's session config entries
// (values it would read as something else), and shape options that contradict each other.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

std::string session_config_entry_problem(const std::string& key, const std::string& value) {
  // From onnxruntime_session_options_config_keys.h (1.29): the entries ONNX Runtime compares with "1".
  static const std::set<std::string> kOnOff = {
      "session.disable_prepacking", "session.use_env_allocators", "session.set_denormal_as_zero", "session.disable_quant_qdq",
      "session.disable_qdq_constant_folding", "session.disable_double_qdq_remover", "session.enable_quant_qdq_cleanup",
      "optimization.enable_gelu_approximation", "optimization.enable_cast_chain_elimination", "session.disable_aot_function_inlining",
      "session.use_device_allocator_for_initializers", "session.inter_op.allow_spinning", "session.intra_op.allow_spinning",
      "session.use_ort_model_bytes_directly", "session.use_ort_model_bytes_for_initializers", "session.use_memory_mapped_ort_model",
      "session.qdqisint8allowed", "session.force_spinning_stop", "session.strict_shape_type_inference",
      "session.allow_released_opsets_only", "session.debug_layout_transformation", "session.disable_cpu_ep_fallback",
      "session.save_external_prepacked_constant_initializers", "ep.context_enable", "ep.context_embed_mode", "ep.share_ep_contexts",
      "ep.stop_share_ep_contexts", "session.compile_only", "mlas.enable_gemm_fastmath_arm64_bfloat16", "mlas.use_lut_gemm",
      "mlas.disable_kleidiai", "session.enable_dq_matmulnbits_fusion", "session.disable_model_compile",
      "session.fail_on_suboptimal_compiled_model"};
  // ... and those it reads as a whole number.
  static const std::set<std::string> kCounts = {
      "session.intra_op.spin_duration_us", "session.inter_op.spin_duration_us", "session.intra_op.spin_backoff_max",
      "session.inter_op.spin_backoff_max", "session.dynamic_block_base", "session.graph_optimizations_loop_level",
      "optimization.constant_folding_max_output_size_in_bytes", "session.qdq_matmulnbits_accuracy_level",
      "session.qdq_matmulnbits_block_size", "mlas.kleidiai.conv_igemm_max_work"};
  if (kOnOff.count(key) != 0 && value != "0" && value != "1") {
    return "must be \"0\" or \"1\" (got \"" + value + "\"): ONNX Runtime reads any other value as \"0\"";
  }
  if (kCounts.count(key) != 0 && (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos)) {
    return "must be a whole number of 0 or more (got \"" + value + "\")";
  }
  return {};
}

void ShapeOptions::validate() const {
  checked_number(Setting::max_shape_sessions, max_sessions);
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i].sizes.empty() || buckets[i].sizes.front() <= 0 || !std::is_sorted(buckets[i].sizes.begin(), buckets[i].sizes.end())) {
      throw Error("the buckets " + to_string(buckets[i]) + " need ascending positive sizes", "Write them as x.2=480,640,960");
    }
    for (size_t j = 0; j < i; ++j) {
      if (buckets[j].input == buckets[i].input && buckets[j].dim == buckets[i].dim) {
        throw Error("buckets for " + buckets[i].input + "." + std::to_string(buckets[i].dim) + " were declared twice", "Declare each dim once");
      }
    }
  }
  for (const auto& [input, value] : pad_values) {
    if (!std::isfinite(value)) throw Error("the pad value of '" + input + "' must be a finite number", "Write it as input_ids=0");
  }
  if (pad_batch && batches.empty() && declared.empty()) {
    throw Error("pad_batch needs declared batches to pad to", "Declare them: " + named(Setting::batches, "1,2,4,8"));
  }
}

}  // namespace ortfleet
