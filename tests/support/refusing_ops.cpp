// A custom-op library whole on disk (the check before any work passes it) whose registration fails:
// each session that loads it fails, and says so (the Python test that a config reaches the timed
// child starts of bench, profile and tune).
#include <onnxruntime_c_api.h>

extern "C" __attribute__((visibility("default"))) OrtStatus* RegisterCustomOps(OrtSessionOptions*, const OrtApiBase* api_base) {
  return api_base->GetApi(ORT_API_VERSION)->CreateStatus(ORT_FAIL, "this library registers no operators (a test's)");
}
