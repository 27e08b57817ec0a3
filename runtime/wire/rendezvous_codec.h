#pragma once

// The wire format of the srun rendezvous (wire/rendezvous_server.h): the
// exchange of every launched rank's wire-up values through srun instead of a
// PMIx fence, which Slurm 22.05's PMIx plugin can leave hanging
// (ARCHITECTURE, "Wire-up through srun").
//
// A rank sends one contribution: magic, the step's token, its rank, the job
// size, and its values (key -> bytes). srun answers once every rank has
// contributed: the values of all ranks in rank order, or a refusal that says
// why. Integers are little-endian. Decoders accept input of any shape and
// never allocate more than the input holds, because anyone who can reach
// srun's port can send bytes.
//
// Thread-safety: pure functions.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sray::wire::rendezvous {

using Bytes = std::vector<std::byte>;
inline constexpr std::size_t kTokenSize = 32;
using Token = std::array<std::byte, kTokenSize>;

// Limits a contribution must keep: a step of more ranks, or a rank with more
// to publish, is refused rather than read.
inline constexpr std::uint32_t kMostRanks = 1U << 20;
inline constexpr std::size_t kMostValueBytes = 1U << 20;
inline constexpr std::size_t kMostKeyBytes = 256;
// How long srun waits for a contribution on a connection before it closes it.
inline constexpr std::chrono::seconds kContributionPatience{30};

struct Contribution {
  Token token{};
  std::uint32_t rank = 0;
  std::uint32_t size = 0;
  // EncodeValues of the rank's key -> bytes.
  Bytes values;
};

// The bytes of a contribution's fixed part, before its values.
inline constexpr std::size_t kContributionHeaderSize = 8 + kTokenSize + 4 + 4 + 4;
// The bytes up to the end of the token: all srun reads from a peer before
// it knows whether the peer holds the step's token.
inline constexpr std::size_t kContributionTokenEnd = 8 + kTokenSize;

Bytes EncodeContribution(const Contribution& contribution);
// The token of a contribution whose first kContributionTokenEnd bytes are in
// `received` (nullopt before that); an error when they cannot start one.
Result<std::optional<Token>> ContributionToken(std::span<const std::byte> received);
// Nullopt while `received` holds less than a whole contribution; an error
// when what it holds cannot be one (the connection is then dropped).
Result<std::optional<Contribution>> DecodeContribution(std::span<const std::byte> received);

// srun's answer: every rank's values, in rank order, or why not.
struct Answer {
  std::optional<std::string> refusal;
  std::vector<Bytes> values;
};

Bytes EncodeTable(std::span<const Bytes> values_by_rank);
Bytes EncodeRefusal(std::string_view why);
// Nullopt while incomplete. A table must hold `size` entries.
Result<std::optional<Answer>> DecodeAnswer(std::span<const std::byte> received, std::uint32_t size);

using Values = std::map<std::string, Bytes, std::less<>>;
// Whether `values` keep the limits (keys of kMostKeyBytes at most, and
// kMostValueBytes in all once encoded); EncodeValues needs them to.
Status ValuesFit(const Values& values);
Bytes EncodeValues(const Values& values);
Result<Values> DecodeValues(std::span<const std::byte> encoded);

// The SRAY_RENDEZVOUS variable srun's plugin gives every task of the step:
// "JOB.STEP:PORT:TOKEN" (the token in hex). The host is srun's, which Slurm
// gives tasks as SLURM_SRUN_COMM_HOST.
inline constexpr const char* kRendezvousVariable = "SRAY_RENDEZVOUS";
// Its value when srun could not start the rendezvous: the ranks fence
// through PMIx instead.
inline constexpr const char* kThroughPmix = "pmix";
// Its value once a rank has taken its invitation (and wiped the token).
inline constexpr const char* kInvitationTaken = "taken";
struct Invitation {
  std::string step;  // "JOB.STEP": only that step's ranks use it
  std::uint16_t port = 0;
  Token token{};
};
std::string FormatInvitation(const Invitation& invitation);
Result<Invitation> ParseInvitation(std::string_view text);

}  // namespace sray::wire::rendezvous
