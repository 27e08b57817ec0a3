#pragma once

// What proves a training group's connections join its own workers: each
// rank sends every peer HMAC-SHA256(group secret, "from->to") and checks
// what it receives the same way (Collectives::VerifyMembers). The secret
// travels only over sray's authenticated transport, and the tag of one
// direction tells nothing of the other's, so a process that took over one of
// Gloo's (unauthenticated) TCP connections can neither answer nor replay,
// and the group stops before any parameter or gradient crosses it. Free of
// LibTorch.
//
// Thread-safety: pure functions.

#include <array>
#include <cstdint>
#include <string>

namespace sray::train::internal {

using MemberTag = std::array<std::uint8_t, 32>;

// Throws std::runtime_error when OpenSSL cannot compute the MAC.
MemberTag TagFor(const std::string& group_secret, int from_rank, int to_rank);

}  // namespace sray::train::internal
