#pragma once
// The library's settings in the Python module's words: each setting's keyword, from the settings table
// (ortfleet/base/settings.hpp). Every text of the library a Python caller sees goes through in_keywords: errors, log records,
// notes, and the results handed over as JSON.
#include <string>

namespace ortfleet::python {

/// `text` with each setting it names said as its keyword ("`shapes.buckets=x.2=480`" -> "buckets=x.2=480");
/// a setting no keyword gives is said by its library name.
std::string in_keywords(const std::string& text);

}  // namespace ortfleet::python
