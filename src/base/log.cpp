#include "ortfleet/base/log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <utility>

#include "ortfleet/base/terminal_text.hpp"

namespace ortfleet {
namespace {

LogLevel level_of(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug: return LogLevel::debug;
    case spdlog::level::info: return LogLevel::info;
    case spdlog::level::warn: return LogLevel::warning;
    default: return LogLevel::error;
  }
}

/// spdlog's sink that hands each record to the program's handler.
class HandlerSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit HandlerSink(std::function<void(LogLevel, const std::string&)> handler) : handler_(std::move(handler)) {}

 protected:
  // A record is one line, and the names in it (paths, inputs, nodes) reach the handler as text.
  void sink_it_(const spdlog::details::log_msg& msg) override { handler_(level_of(msg.level), terminal_text(std::string_view(msg.payload.data(), msg.payload.size()))); }
  void flush_() override {}

 private:
  std::function<void(LogLevel, const std::string&)> handler_;
};

}  // namespace

void set_log_handler(std::function<void(LogLevel level, const std::string& text)> handler) {
  auto logger = std::make_shared<spdlog::logger>("ortfleet", std::make_shared<HandlerSink>(std::move(handler)));
  logger->set_level(spdlog::get_level());
  spdlog::set_default_logger(std::move(logger));
}

void set_log_level(LogLevel level) {
  switch (level) {
    case LogLevel::debug: spdlog::set_level(spdlog::level::debug); break;
    case LogLevel::info: spdlog::set_level(spdlog::level::info); break;
    case LogLevel::warning: spdlog::set_level(spdlog::level::warn); break;
    case LogLevel::error: spdlog::set_level(spdlog::level::err); break;
  }
}

}  // namespace ortfleet
