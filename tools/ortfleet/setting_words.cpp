#include "setting_words.hpp"

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <iostream>
#include <streambuf>

#include "ortfleet/base/settings.hpp"
#include "ortfleet/base/terminal_text.hpp"

namespace ortfleet::cli {

std::string in_flags(const std::string& text) {
  return render_settings(text, [](Setting s, const std::optional<std::string>& value) -> std::optional<std::string> {
    const char* flag = setting_row(s).flag;  // the settings table's
    const std::string said = flag != nullptr ? flag : setting_name(s);
    return value ? said + " " + *value : said;
  });
}

namespace {
/// Passes each record on to `inner` with its text in the command line's words.
class InFlagsSink : public spdlog::sinks::sink {
 public:
  explicit InFlagsSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    const std::string said = in_flags(terminal_text(std::string_view(msg.payload.data(), msg.payload.size())));  // one line, names escaped
    spdlog::details::log_msg copy = msg;
    copy.payload = said;
    inner_->log(copy);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override { inner_->set_formatter(std::move(formatter)); }

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
};
}  // namespace

namespace {
/// A stream's output, a line at a time, in the command line's words (a setting's name never spans lines).
class InFlagsBuffer : public std::streambuf {
 public:
  explicit InFlagsBuffer(std::streambuf* out) : out_(out) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return sync() == 0 ? traits_type::not_eof(c) : traits_type::eof();
    line_ += traits_type::to_char_type(c);
    if (c == '\n' && !pass_line()) return traits_type::eof();
    return c;
  }
  std::streamsize xsputn(const char* text, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) {
      if (traits_type::eq_int_type(overflow(traits_type::to_int_type(text[i])), traits_type::eof())) return i;
    }
    return n;
  }
  int sync() override { return pass_line() && out_->pubsync() == 0 ? 0 : -1; }

 private:
  bool pass_line() {
    const std::string said = in_flags(terminal_lines(line_));  // no name printed anywhere drives the terminal
    line_.clear();
    return out_->sputn(said.data(), static_cast<std::streamsize>(said.size())) == static_cast<std::streamsize>(said.size());
  }
  std::streambuf* out_;
  std::string line_;
};
}  // namespace

void say_settings_as_flags() {
  // Never destroyed: the streams are flushed through them at exit, after static objects are gone.
  static auto* out = new InFlagsBuffer(std::cout.rdbuf());
  static auto* err = new InFlagsBuffer(std::cerr.rdbuf());
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
}

std::shared_ptr<spdlog::logger> logger_in_flags(const std::string& name) {
  auto logger = spdlog::stderr_color_mt(name);
  for (auto& sink : logger->sinks()) sink = std::make_shared<InFlagsSink>(sink);
  return logger;
}

}  // namespace ortfleet::cli
