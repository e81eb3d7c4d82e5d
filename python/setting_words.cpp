#include "setting_words.hpp"

#include "ortfleet/base/settings.hpp"

namespace ortfleet::python {

std::string in_keywords(const std::string& text) {
  return render_settings(text, [](Setting s, const std::optional<std::string>& value) -> std::optional<std::string> {
    const char* keyword = setting_row(s).keyword;  // the settings table's
    if (keyword == nullptr) return value ? std::string(setting_name(s)) + "=" + *value : std::string(setting_name(s));
    return std::string(keyword) + "=" + value.value_or("");
  });
}

}  // namespace ortfleet::python
