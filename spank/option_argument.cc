#include "option_argument.h"

#include <string_view>

namespace sray::spank {

std::string OptionListFromArgument(const char* argument) {
  if (argument == nullptr) return {};
  const std::string_view text(argument);
  if (text == "(null)") return {};
  return std::string(text);
}

}  // namespace sray::spank
