#include "common/copy_in_pieces.h"

#include <algorithm>
#include <cstring>

namespace sray {

void CopyInPieces(void* to, const void* from, std::size_t length) {
  auto* target = static_cast<std::byte*>(to);
  const auto* source = static_cast<const std::byte*>(from);
  for (std::size_t done = 0; done < length; done += kCopyPieceBytes) {
    std::memcpy(target + done, source + done, std::min(kCopyPieceBytes, length - done));
  }
}

}  // namespace sray
