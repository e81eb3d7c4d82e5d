#pragma once
// Errors: every failure ortfleet reports says what failed, where (a device, a file) and what to do.
#include <stdexcept>
#include <string>

namespace ortfleet {

class Error : public std::runtime_error {
 public:
  /// what_failed: "could not load ONNX Runtime from /x/libonnxruntime.so: <reason>"
  /// hint: the fix, e.g. "pass --ort-lib PATH or run scripts/fetch-onnxruntime.sh"
  /// where: a device ("cuda:1") or an empty string
  /// what() is the three in one line, as a terminal may show it: line breaks as spaces, any other
  /// control character of a name in them escaped (terminal_text); the parts stay as given.
  explicit Error(std::string what_failed, std::string hint = {}, std::string where = {});

  const std::string& what_failed() const noexcept { return what_failed_; }
  const std::string& hint() const noexcept { return hint_; }
  const std::string& where() const noexcept { return where_; }

  /// `e` as an ortfleet::Error: itself when it is one, else its text as what failed.
  static Error from(const std::exception& e);

  /// The same error, attributed to a device or file.
  Error at(std::string where) const { return Error(what_failed_, hint_, std::move(where)); }

 private:
  std::string what_failed_;
  std::string hint_;
  std::string where_;
};

}  // namespace ortfleet
