#include "ortfleet/base/error.hpp"

#include <new>

#include "ortfleet/base/terminal_text.hpp"

namespace ortfleet {
namespace {
std::string one_line(const std::string& what_failed, const std::string& hint, const std::string& where) {
  std::string text = what_failed;
  if (!where.empty()) text += " (on " + where + ")";
  if (!hint.empty()) text += ". " + hint;
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  // A path or a name in it (a model's, an input's, a library's error) reaches a terminal as text.
  return terminal_text(text);
}
}  // namespace

Error::Error(std::string what_failed, std::string hint, std::string where)
    : std::runtime_error(one_line(what_failed, hint, where)),
      what_failed_(std::move(what_failed)),
      hint_(std::move(hint)),
      where_(std::move(where)) {}

Error Error::from(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return *error;
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {  // its own text is "std::bad_alloc"
    return Error("out of memory: an allocation of this process failed",
                 "Give smaller shapes, batches or buckets (warm-up makes inputs of each), or free memory on this machine");
  }
  return Error(e.what());
}

}  // namespace ortfleet
