// terminal_safe (include/nnfleet/error.h): how the front ends print a message that may quote
// names from files.
#include <cstdio>
#include <string>
#include <string_view>

#include "nnfleet/error.h"

namespace nnfleet {
namespace {

// The length of the well-formed UTF-8 sequence at s[i] (2 to 4 bytes; RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  const size_t n = c >= 0xc2 && c <= 0xdf   ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(k) & 0xc0) != 0x80) return 0;
  if ((c == 0xe0 && b(1) < 0xa0) || (c == 0xed && b(1) > 0x9f) || (c == 0xf0 && b(1) < 0x90) ||
      (c == 0xf4 && b(1) > 0x8f))
    return 0;
  return n;
}

}  // namespace

std::string terminal_safe(std::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  char buf[8];
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += s[i];
    } else if (keep_lines && (c == '\n' || c == '\t')) {
      out += s[i];
    } else if (c == 0) {
      out += "\\0";
    } else if (c == '\n' || c == '\t' || c == '\r') {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r";
    } else if (c < 0x80) {  // the other C0 controls and DEL
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (const size_t n = utf8_sequence(s, i); n == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {
      // U+0080..U+009F, the C1 controls (U+009B is a terminal's CSI).
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(s[i + 1]));
      out += buf;
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n - 1;
    }
  }
  return out;
}

}  // namespace nnfleet
