#include "ortfleet/engine/ort_log.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/runtime/ort_environment.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {

struct OrtLogCapture::Impl {
  std::ofstream out;
  std::unique_ptr<detail::OrtLogListener> listener;
};

OrtLogCapture::OrtLogCapture(const std::string& path, const std::string& ort_library) : impl_(std::make_unique<Impl>()) {
  load_runtime(ort_library);
  impl_->out.open(path, std::ios::trunc);
  if (!impl_->out) throw Error("cannot write the ONNX Runtime log to " + path, "Check that the folder exists and is writable");
  impl_->listener = std::make_unique<detail::OrtLogListener>(
      [impl = impl_.get()](const detail::OrtLogRecord& r) {
        impl->out << nlohmann::json{{"t", r.time_ns}, {"severity", r.severity}, {"message", r.message}}.dump() << "\n";
      },
      ORT_LOGGING_LEVEL_VERBOSE);
}

OrtLogCapture::~OrtLogCapture() {
  if (impl_) impl_->listener.reset();  // no message may arrive while the file closes
}

void hold_ort_warnings() { detail::set_ort_warning_mode(detail::OrtWarningMode::at_the_end); }

void print_ort_warnings() { detail::print_ort_warnings(); }

}  // namespace ortfleet
