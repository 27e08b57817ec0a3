#include <cstddef>
#include <vector>

#include "common/hex.h"
#include "common/random_bytes.h"
#include "dashboard/dashboard_server.h"

namespace sray::dashboard {

Result<std::string> RandomSecret(std::size_t bytes) {
  std::vector<std::byte> secret(bytes);
  const Status filled = FillRandom(secret, "the dashboard's token");
  if (!filled.ok()) return filled;
  return HexOf(secret);
}

}  // namespace sray::dashboard
