#include "ortfleet/engine/ort_log.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "engine/runtime/ort_environment.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {

struct OrtLogCapture::Impl {
  explicit Impl(const std::string& path) : out(path, named(Setting::ort_log)) {}
  OutputFile out;
  std::unique_ptr<detail::OrtLogListener> listener;
};

OrtLogCapture::OrtLogCapture(const std::string& path) {
  // The runtime is not loaded here: the start loads it in its own phase (runtime.load), where its
  // time shows; the listener is in place before, and the environment logs to it once made.
  impl_ = std::make_unique<Impl>(path);
  impl_->out.fd();  // streamed from the start: a pipe nobody reads is refused now, before any work
  impl_->listener = std::make_unique<detail::OrtLogListener>(
      [impl = impl_.get()](const detail::OrtLogRecord& r) {
        impl->out.stream() << nlohmann::json{{"t", r.time_ns}, {"severity", r.severity}, {"message", r.message}}.dump() << "\n";
      },
      ORT_LOGGING_LEVEL_VERBOSE);
}

OrtLogCapture::~OrtLogCapture() {
  if (!impl_) return;
  impl_->listener.reset();  // no message may arrive while the file is put in place
  try {
    impl_->out.commit();  // also when the start failed: its log says why
  } catch (const std::exception& e) {
    spdlog::warn("the ONNX Runtime log was not written: {}", Error::from(e).what_failed());
  }
}

void hold_ort_warnings() { detail::set_ort_warning_mode(detail::OrtWarningMode::at_the_end); }

void print_ort_warnings() { detail::print_ort_warnings(); }

}  // namespace ortfleet
