#include "common/mebibytes.h"

#include <cstdio>

namespace sray {

std::string WholeMebibytes(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

std::string Mebibytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace sray
