// Text that came from another process (a peer's endpoint, a record) shown in an error message:
// bytes outside printable ASCII as \xNN, at most `max` bytes of it then "...", so that a NUL
// cannot cut the message short (what() is a C string) and a megabyte of garbage is not a
// megabyte of message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace spark::protocol {

inline std::string printable(std::string_view text, std::size_t max = 200) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace spark::protocol
