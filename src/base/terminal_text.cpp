#include "ortfleet/base/terminal_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace ortfleet {
namespace {

/// The length of the well-formed UTF-8 sequence starting at `text[at]` and its code point, or 0 when
/// the bytes there are not one (a stray continuation byte, an overlong form, a surrogate, past
/// U+10FFFF, cut short).
size_t utf8_sequence(std::string_view text, size_t at, uint32_t& code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t value = 0;
  uint32_t lowest = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, value = lead & 0x1Fu, lowest = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, value = lead & 0x0Fu, lowest = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, value = lead & 0x07u, lowest = 0x10000;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i) & 0x3Fu);
  }
  if (value < lowest || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  code_point = value;
  return length;
}

/// Code points that change how a terminal shows what follows them, beyond the C0 bytes: the C1
/// controls (U+0080..U+009F: CSI, OSC, NEL) and the bidirectional embeddings, overrides and isolates.
bool invisible_control(uint32_t c) { return (c >= 0x80 && c <= 0x9F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069); }

}  // namespace

std::string terminal_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {  // C0 controls and DEL
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case 0x1B: out += "\\e"; break;
        case 0x07: out += "\\a"; break;
        default: out += fmt::format("\\x{:02x}", c);
      }
      ++i;
      continue;
    }
    uint32_t code_point = 0;
    const size_t length = utf8_sequence(text, i, code_point);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (invisible_control(code_point)) {
      out += fmt::format("\\u{:04x}", code_point);
      i += length;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

std::string terminal_lines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    out += terminal_text(text.substr(start, end - start));
    if (end == text.size()) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

}  // namespace ortfleet
