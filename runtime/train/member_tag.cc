#include "train/member_tag.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace sray::train::internal {

MemberTag TagFor(const std::string& group_secret, int from_rank, int to_rank) {
  const std::string message = std::to_string(from_rank) + "->" + std::to_string(to_rank);
  MemberTag tag{};
  std::size_t length = 0;
  const unsigned char* written =
      EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, group_secret.data(), group_secret.size(),
                reinterpret_cast<const unsigned char*>(message.data()), message.size(), tag.data(),
                tag.size(), &length);
  if (written == nullptr || length != tag.size()) {
    throw std::runtime_error("sray: cannot compute the training group's member tags (OpenSSL HMAC-SHA256 failed)");
  }
  return tag;
}

}  // namespace sray::train::internal
