#pragma once
// What nlohmann::json's exceptions say, for a person: their text without the library's own prefix
// ("[json.exception.parse_error.101] parse error at line 1, column 2: ..." says "parse error at line 1,
// column 2: ..."), so that a C++ library's name reaches no user's error line.
#include <exception>
#include <string>

namespace ortfleet::detail {

inline std::string json_error_text(const std::exception& e) {
  std::string text = e.what();
  if (text.rfind("[json.exception.", 0) == 0) {
    if (const auto end = text.find("] "); end != std::string::npos) text.erase(0, end + 2);
  }
  return text;
}

}  // namespace ortfleet::detail
