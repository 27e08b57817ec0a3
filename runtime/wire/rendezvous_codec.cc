#include "wire/rendezvous_codec.h"

#include <algorithm>
#include <cstring>

#include "common/hex.h"
#include "common/whole_number.h"
#include "transport/little_endian.h"

namespace sray::wire::rendezvous {
namespace {

constexpr std::array<char, 8> kContributionMagic = {'S', 'R', 'A', 'Y', 'R', 'V', '1', 'C'};
constexpr std::array<char, 8> kAnswerMagic = {'S', 'R', 'A', 'Y', 'R', 'V', '1', 'A'};
constexpr std::uint8_t kTable = 0;
constexpr std::uint8_t kRefusal = 1;
constexpr std::size_t kMostRefusalBytes = 4096;
constexpr std::size_t kAnswerHeaderSize = 8 + 1 + 8;

void AppendMagic(Bytes& out, const std::array<char, 8>& magic) {
  for (const char letter : magic) out.push_back(static_cast<std::byte>(letter));
}
void AppendBytes(Bytes& out, std::span<const std::byte> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

// Reads fields from the front of a buffer; every read says whether the
// buffer still held enough.
class Reader : public transport::ByteReader {
 public:
  using ByteReader::ByteReader;
  bool Magic(const std::array<char, 8>& magic, bool& matches) {
    std::span<const std::byte> read;
    if (!Take(magic.size(), read)) return false;
    matches = std::memcmp(read.data(), magic.data(), magic.size()) == 0;
    return true;
  }
};

}  // namespace

Bytes EncodeContribution(const Contribution& contribution) {
  Bytes out;
  out.reserve(kContributionHeaderSize + contribution.values.size());
  AppendMagic(out, kContributionMagic);
  AppendBytes(out, contribution.token);
  transport::AppendLittleEndian<std::uint32_t>(out, contribution.rank);
  transport::AppendLittleEndian<std::uint32_t>(out, contribution.size);
  transport::AppendLittleEndian<std::uint32_t>(
      out, static_cast<std::uint32_t>(contribution.values.size()));
  AppendBytes(out, contribution.values);
  return out;
}

Result<std::optional<Token>> ContributionToken(std::span<const std::byte> received) {
  Reader reader(received);
  bool matches = false;
  std::span<const std::byte> bytes;
  if (!reader.Magic(kContributionMagic, matches)) return std::optional<Token>();
  if (!matches) return Status::InvalidArgument("not an sray rendezvous contribution (wrong magic)");
  if (!reader.Take(kTokenSize, bytes)) return std::optional<Token>();
  Token token;
  std::copy(bytes.begin(), bytes.end(), token.begin());
  return std::optional<Token>(token);
}

Result<std::optional<Contribution>> DecodeContribution(std::span<const std::byte> received) {
  Reader reader(received);
  bool matches = false;
  if (!reader.Magic(kContributionMagic, matches)) return std::optional<Contribution>();
  if (!matches) return Status::InvalidArgument("not an sray rendezvous contribution (wrong magic)");
  Contribution contribution;
  std::span<const std::byte> token;
  std::uint32_t length = 0;
  if (!reader.Take(kTokenSize, token) || !reader.Read(contribution.rank) ||
      !reader.Read(contribution.size) || !reader.Read(length)) {
    return std::optional<Contribution>();
  }
  std::copy(token.begin(), token.end(), contribution.token.begin());
  if (contribution.size == 0 || contribution.size > kMostRanks) {
    return Status::InvalidArgument("a contribution claims a job of " +
                                   std::to_string(contribution.size) + " ranks (at most " +
                                   std::to_string(kMostRanks) + ")");
  }
  if (contribution.rank >= contribution.size) {
    return Status::InvalidArgument("a contribution claims rank " +
                                   std::to_string(contribution.rank) + " of a job of " +
                                   std::to_string(contribution.size));
  }
  if (length > kMostValueBytes) {
    return Status::InvalidArgument("rank " + std::to_string(contribution.rank) + " contributes " +
                                   std::to_string(length) + " bytes (at most " +
                                   std::to_string(kMostValueBytes) + ")");
  }
  std::span<const std::byte> values;
  if (!reader.Take(length, values)) return std::optional<Contribution>();
  if (reader.left() != 0) {
    return Status::InvalidArgument("rank " + std::to_string(contribution.rank) +
                                   " sent bytes after its contribution");
  }
  contribution.values.assign(values.begin(), values.end());
  return std::optional<Contribution>(std::move(contribution));
}

// An answer: magic, kind, the body's length, then the body (a table: the
// rank count and each rank's values with their length; a refusal: its
// text). The length up front lets a rank wait for the whole answer before it
// decodes anything.
Bytes EncodeTable(std::span<const Bytes> values_by_rank) {
  std::size_t body = 4;
  for (const Bytes& values : values_by_rank) body += 4 + values.size();
  Bytes out;
  out.reserve(kAnswerHeaderSize + body);
  AppendMagic(out, kAnswerMagic);
  out.push_back(static_cast<std::byte>(kTable));
  transport::AppendLittleEndian<std::uint64_t>(out, body);
  transport::AppendLittleEndian<std::uint32_t>(out,
                                               static_cast<std::uint32_t>(values_by_rank.size()));
  for (const Bytes& values : values_by_rank) {
    transport::AppendLittleEndian<std::uint32_t>(out, static_cast<std::uint32_t>(values.size()));
    AppendBytes(out, values);
  }
  return out;
}

Bytes EncodeRefusal(std::string_view why) {
  why = why.substr(0, kMostRefusalBytes);
  Bytes out;
  AppendMagic(out, kAnswerMagic);
  out.push_back(static_cast<std::byte>(kRefusal));
  transport::AppendLittleEndian<std::uint64_t>(out, why.size());
  for (const char letter : why) out.push_back(static_cast<std::byte>(letter));
  return out;
}

Result<std::optional<Answer>> DecodeAnswer(std::span<const std::byte> received,
                                           std::uint32_t size) {
  Reader reader(received);
  bool matches = false;
  std::uint8_t kind = 0;
  std::uint64_t length = 0;
  if (!reader.Magic(kAnswerMagic, matches)) return std::optional<Answer>();
  if (!matches)
    return Status::InvalidArgument("srun's answer is not an sray rendezvous answer (wrong magic)");
  if (!reader.Read(kind) || !reader.Read(length)) return std::optional<Answer>();
  const std::uint64_t most = kind == kRefusal
                                 ? kMostRefusalBytes
                                 : 4 + static_cast<std::uint64_t>(size) * (4 + kMostValueBytes);
  if (kind != kRefusal && kind != kTable) {
    return Status::InvalidArgument("srun's answer has an unknown kind " + std::to_string(kind));
  }
  if (length > most) {
    return Status::InvalidArgument("srun's answer claims " + std::to_string(length) +
                                   " bytes, more than a job of " + std::to_string(size) +
                                   " ranks can have");
  }
  if (reader.left() < length) return std::optional<Answer>();
  if (reader.left() > length)
    return Status::InvalidArgument("srun's answer has bytes after its end");
  Answer answer;
  if (kind == kRefusal) {
    std::span<const std::byte> text;
    reader.Take(static_cast<std::size_t>(length), text);
    answer.refusal = std::string(reinterpret_cast<const char*>(text.data()), text.size());
    return std::optional<Answer>(std::move(answer));
  }
  std::uint32_t count = 0;
  const auto malformed = [&] { return Status::InvalidArgument("srun's table is malformed"); };
  if (!reader.Read(count)) return malformed();
  if (count != size) {
    return Status::InvalidArgument("srun's table holds " + std::to_string(count) +
                                   " ranks, not the job's " + std::to_string(size));
  }
  for (std::uint32_t rank = 0; rank < count; ++rank) {
    std::uint32_t entry = 0;
    std::span<const std::byte> values;
    if (!reader.Read(entry) || entry > kMostValueBytes || !reader.Take(entry, values))
      return malformed();
    answer.values.emplace_back(values.begin(), values.end());
  }
  if (reader.left() != 0) return malformed();
  return std::optional<Answer>(std::move(answer));
}

Status ValuesFit(const Values& values) {
  std::size_t total = 4;
  for (const auto& [key, value] : values) {
    if (key.size() > kMostKeyBytes) {
      return Status::InvalidArgument("the key '" + key.substr(0, 64) + "...' is longer than " +
                                     std::to_string(kMostKeyBytes) + " bytes");
    }
    total += 2 + key.size() + 4 + value.size();
  }
  if (total > kMostValueBytes) {
    return Status::InvalidArgument("this rank publishes " + std::to_string(total) +
                                   " bytes, more than the " + std::to_string(kMostValueBytes) +
                                   " one rank may");
  }
  return Status::Ok();
}

Bytes EncodeValues(const Values& values) {
  Bytes out;
  transport::AppendLittleEndian<std::uint32_t>(out, static_cast<std::uint32_t>(values.size()));
  for (const auto& [key, value] : values) {
    transport::AppendLittleEndian<std::uint16_t>(out, static_cast<std::uint16_t>(key.size()));
    for (const char letter : key) out.push_back(static_cast<std::byte>(letter));
    transport::AppendLittleEndian<std::uint32_t>(out, static_cast<std::uint32_t>(value.size()));
    AppendBytes(out, value);
  }
  return out;
}

Result<Values> DecodeValues(std::span<const std::byte> encoded) {
  Reader reader(encoded);
  std::uint32_t count = 0;
  if (!reader.Read(count)) return Status::InvalidArgument("a rank's values are cut short");
  Values values;
  for (std::uint32_t index = 0; index < count; ++index) {
    std::uint16_t key_length = 0;
    std::uint32_t value_length = 0;
    std::span<const std::byte> key;
    std::span<const std::byte> value;
    if (!reader.Read(key_length) || key_length > kMostKeyBytes || !reader.Take(key_length, key) ||
        !reader.Read(value_length) || !reader.Take(value_length, value)) {
      return Status::InvalidArgument("a rank's values are malformed at entry " +
                                     std::to_string(index));
    }
    std::string name(reinterpret_cast<const char*>(key.data()), key.size());
    // EncodeValues writes keys in increasing order: only that one spelling
    // is read, so that equal values always travel as equal bytes.
    if (!values.empty() && !(values.rbegin()->first < name)) {
      return Status::InvalidArgument(
          "a rank's values are out of order or name one key twice (at entry " +
          std::to_string(index) + ")");
    }
    values.emplace_hint(values.end(), std::move(name), Bytes(value.begin(), value.end()));
  }
  if (reader.left() != 0)
    return Status::InvalidArgument("a rank's values have bytes after their end");
  return values;
}

std::string FormatInvitation(const Invitation& invitation) {
  return invitation.step + ":" + std::to_string(invitation.port) + ":" + HexOf(invitation.token);
}

Result<Invitation> ParseInvitation(std::string_view text) {
  const auto malformed = [&] {
    return Status::InvalidArgument(std::string(kRendezvousVariable) +
                                   " is not JOB.STEP:PORT:TOKEN: it is set by sray's SPANK plugin "
                                   "in srun; unset it and let srun set it");
  };
  const auto first = text.find(':');
  const auto second = first == std::string_view::npos ? first : text.find(':', first + 1);
  if (second == std::string_view::npos) return malformed();
  Invitation invitation;
  invitation.step = std::string(text.substr(0, first));
  const auto port = WholeNumber<std::uint16_t>(text.substr(first + 1, second - first - 1));
  const auto token = BytesFromHex(text.substr(second + 1));
  if (invitation.step.empty() || !port || *port == 0 || !token || token->size() != kTokenSize)
    return malformed();
  invitation.port = *port;
  std::copy(token->begin(), token->end(), invitation.token.begin());
  return invitation;
}

}  // namespace sray::wire::rendezvous
