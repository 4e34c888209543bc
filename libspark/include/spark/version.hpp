#pragma once
namespace spark {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace spark
