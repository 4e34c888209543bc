// Shared wording of configuration refusals (internal to spark_config).
#pragma once

#include <string>
#include <string_view>

#include "spark/config/config.hpp"

namespace spark::config {

/// "milliseconds in 1..3600000, default 10000"
std::string valid_text(const Knob& knob);
/// NAME="VALUE" is refused: REASON; valid: VALID_TEXT
std::string refusal(const Knob& knob, std::string_view value, std::string_view reason);
std::string_view empty_reason(const Knob& knob);
/// The message for a variable of KnobType::refused that is set.
std::string refused_variable_message(const Knob& knob, std::string_view value);

}  // namespace spark::config
