// A custom-op library for the crash tests: op "Crash" of domain "ortfleet.test" copies its input to
// its output, or crashes the way ORTFLEET_TEST_CRASH says: "segv" (the default: a write through a
// null pointer, as a faulty kernel does), "abort", or "none" (a working kernel: the bisect's check
// that the rest of the model runs). Loaded with --custom-ops / session.custom_op_libraries.
#include <onnxruntime_cxx_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

struct CrashKernel {
  void Compute(OrtKernelContext* raw) {
    Ort::KernelContext context(raw);
    const auto input = context.GetInput(0);
    const auto shape = input.GetTensorTypeAndShapeInfo().GetShape();
    auto output = context.GetOutput(0, shape);
    const char* how = std::getenv("ORTFLEET_TEST_CRASH");
    const std::string mode = how != nullptr ? how : "segv";
    if (mode == "abort") std::abort();
    if (mode != "none") {
      volatile int* nowhere = nullptr;
      *nowhere = 42;  // NOLINT: the crash this library exists for
    }
    const size_t count = input.GetTensorTypeAndShapeInfo().GetElementCount();
    std::memcpy(output.GetTensorMutableData<float>(), input.GetTensorData<float>(), count * sizeof(float));
  }
};

struct CrashOp : Ort::CustomOpBase<CrashOp, CrashKernel> {
  void* CreateKernel(const OrtApi& /*api*/, const OrtKernelInfo* /*info*/) const { return new CrashKernel(); }
  const char* GetName() const { return "Crash"; }
  const char* GetExecutionProviderType() const { return "CPUExecutionProvider"; }
  size_t GetInputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetInputType(size_t /*index*/) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetOutputType(size_t /*index*/) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) OrtStatus* ORT_API_CALL RegisterCustomOps(OrtSessionOptions* options,
                                                                                             const OrtApiBase* api_base) {
  Ort::InitApi(api_base->GetApi(ORT_API_VERSION));
  static CrashOp op;
  static std::once_flag made;
  static Ort::CustomOpDomain* domain = nullptr;  // lives as long as the process: sessions keep pointers to it
  std::call_once(made, [] {
    domain = new Ort::CustomOpDomain("ortfleet.test");
    domain->Add(&op);
  });
  Ort::UnownedSessionOptions(options).Add(*domain);
  return nullptr;
}
