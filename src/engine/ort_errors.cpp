#include "engine/ort_errors.hpp"

#include <array>
#include <string_view>

#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
namespace {

struct KnownFailure {
  std::array<std::string_view, 2> needles;  // all must occur (an empty needle matches anything)
  std::string_view hint;
};

constexpr std::array kKnownFailures = {
    KnownFailure{{"libcudnn", "cannot open"},
                 "cuDNN 9 is missing: install it (e.g. pip install nvidia-cudnn-cu13) and add its lib folder to "
                 "LD_LIBRARY_PATH; 'ortfleet doctor' shows which CUDA libraries resolve"},
    KnownFailure{{"libcu", "cannot open shared object"},
                 "a CUDA 13 runtime library is missing: install the CUDA 13 runtime (cudart, cuBLAS, cuRAND, cuFFT) and "
                 "add its lib folder to LD_LIBRARY_PATH; 'ortfleet doctor' shows which resolve"},
    KnownFailure{{"libcuda.so", ""},
                 "the NVIDIA driver (libcuda.so.1) is not installed or not visible; run 'ortfleet doctor'"},
    KnownFailure{{"out of memory", ""},
                 "the GPU ran out of memory: free memory on it, lower cuda.gpu_mem_limit, or run fewer sessions per GPU"},
    KnownFailure{{"Failed to allocate memory", ""},
                 "out of memory: free memory on the device, lower cuda.gpu_mem_limit, or run fewer sessions per device"},
    KnownFailure{{"invalid device ordinal", ""},
                 "that GPU does not exist; 'ortfleet doctor' lists the GPUs (CUDA_VISIBLE_DEVICES may hide some)"},
    KnownFailure{{"Protobuf parsing failed", ""},
                 "the file is not a valid ONNX model (corrupt, truncated or another format); re-export it"},
    KnownFailure{{"No such file or directory", ""}, "check the model path"},
    KnownFailure{{"external data", ""},
                 "the model's external-data file is missing or unreadable: keep it next to the .onnx file"},
    KnownFailure{{"is not enabled in this build", ""},
                 "this ONNX Runtime build lacks that execution provider; point ORTFLEET_CUDA_EP at "
                 "libonnxruntime_providers_cuda.so or use an onnxruntime-gpu build"},
};

}  // namespace

void rethrow_ort_error(const Ort::Exception& e, const std::string& doing, const std::string& where) {
  const std::string_view message = e.what();
  std::string hint;
  for (const auto& known : kKnownFailures) {
    bool all = true;
    for (auto needle : known.needles) all = all && (needle.empty() || message.find(needle) != std::string_view::npos);
    if (all) {
      hint = known.hint;
      break;
    }
  }
  throw Error(doing + " failed: " + std::string(message), hint, where);
}

}  // namespace ortfleet::detail
