// Wire-up through srun (wire/rendezvous_*): the codec, and a real server on a
// loopback port with real clients, one thread per rank.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/random_bytes.h"
#include "wire/rendezvous_client.h"
#include "wire/rendezvous_codec.h"
#include "wire/rendezvous_invitation.h"
#include "wire/rendezvous_server.h"

namespace sray::wire::rendezvous {
namespace {

Bytes BytesOf(std::string_view text) {
  Bytes bytes;
  for (const char letter : text) bytes.push_back(static_cast<std::byte>(letter));
  return bytes;
}

Token TokenOf(unsigned char fill) {
  Token token;
  token.fill(static_cast<std::byte>(fill));
  return token;
}

Values ValuesOf(std::uint32_t rank) {
  return {{"sray.location", BytesOf("node " + std::to_string(rank))},
          {"sray.ucx.address.full", Bytes(100 + rank, static_cast<std::byte>(rank))}};
}

ExchangeRequest RequestFor(const RendezvousServer& server, const Token& token, std::uint32_t rank,
                           std::uint32_t size) {
  return {.host = "127.0.0.1",
          .invitation = {.step = "7.0", .port = server.port(), .token = token},
          .rank = rank,
          .size = size,
          .values = EncodeValues(ValuesOf(rank)),
          .timeout = std::chrono::seconds(20),
          .connect_timeout = std::chrono::seconds(5)};
}

void ExpectWholeTable(const Result<std::vector<Bytes>>& answer, std::uint32_t size) {
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  ASSERT_EQ(answer->size(), size);
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    auto values = DecodeValues((*answer)[rank]);
    ASSERT_TRUE(values.ok()) << values.status().message();
    EXPECT_EQ(*values, ValuesOf(rank)) << "rank " << rank;
  }
}

// Waits until the server holds `count` contributions (at most 10 s).
bool AwaitContributions(const RendezvousServer& server, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.contributed() < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A raw connection to the server, for input no sray client sends.
int ConnectRaw(std::uint16_t port) {
  const int descriptor = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(descriptor, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  return descriptor;
}

// What the server sends before it closes (within 10 s).
std::string ReadToEnd(int descriptor) {
  timeval wait{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t got = ::recv(descriptor, buffer, sizeof buffer, 0);
    if (got <= 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

TEST(RendezvousCodec, AContributionDecodesToWhatWasEncodedAndNotBeforeItsLastByte) {
  const Contribution sent{
      .token = TokenOf(3), .rank = 2, .size = 5, .values = EncodeValues(ValuesOf(2))};
  const Bytes encoded = EncodeContribution(sent);
  for (std::size_t length = 0; length < encoded.size(); ++length) {
    auto partial = DecodeContribution(std::span(encoded).first(length));
    ASSERT_TRUE(partial.ok()) << length;
    EXPECT_FALSE(partial->has_value()) << length;
  }
  auto decoded = DecodeContribution(encoded);
  ASSERT_TRUE(decoded.ok() && decoded->has_value());
  EXPECT_EQ((*decoded)->token, sent.token);
  EXPECT_EQ((*decoded)->rank, 2U);
  EXPECT_EQ((*decoded)->size, 5U);
  EXPECT_EQ((*decoded)->values, sent.values);
}

TEST(RendezvousCodec, ContributionsThatCannotBeRightAreRefusedBeforeTheirValuesArrive) {
  Bytes wrong_magic = EncodeContribution({.token = TokenOf(1), .rank = 0, .size = 1, .values = {}});
  wrong_magic[0] = std::byte{'X'};
  EXPECT_FALSE(DecodeContribution(wrong_magic).ok());

  const auto header_of = [](std::uint32_t rank, std::uint32_t size, std::size_t claimed) {
    Bytes encoded =
        EncodeContribution({.token = TokenOf(1), .rank = rank, .size = size, .values = {}});
    encoded.resize(kContributionHeaderSize);
    for (std::size_t index = 0; index < 4; ++index) {
      encoded[kContributionHeaderSize - 4 + index] =
          static_cast<std::byte>((claimed >> (8 * index)) & 0xFF);
    }
    return encoded;
  };
  auto empty_job = DecodeContribution(header_of(0, 0, 0));
  ASSERT_FALSE(empty_job.ok());
  EXPECT_NE(empty_job.status().message().find("a job of 0 ranks"), std::string::npos);
  EXPECT_FALSE(DecodeContribution(header_of(3, 3, 0)).ok());
  EXPECT_FALSE(DecodeContribution(header_of(0, kMostRanks + 1, 0)).ok());
  auto huge = DecodeContribution(header_of(0, 2, kMostValueBytes + 1));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("at most"), std::string::npos);

  Bytes trailing = EncodeContribution({.token = TokenOf(1), .rank = 0, .size = 1, .values = {}});
  trailing.push_back(std::byte{0});
  EXPECT_FALSE(DecodeContribution(trailing).ok());
}

TEST(RendezvousCodec, ATableHoldsEveryRankInOrderAndMustHoldTheJobsSize) {
  const std::vector<Bytes> values = {BytesOf("zero"), {}, BytesOf("two")};
  const Bytes encoded = EncodeTable(values);
  auto answer = DecodeAnswer(encoded, 3);
  ASSERT_TRUE(answer.ok() && answer->has_value());
  EXPECT_FALSE((*answer)->refusal);
  EXPECT_EQ((*answer)->values, values);
  EXPECT_FALSE(DecodeAnswer(encoded, 4).ok());
  auto partial = DecodeAnswer(std::span(encoded).first(encoded.size() - 1), 3);
  ASSERT_TRUE(partial.ok());
  EXPECT_FALSE(partial->has_value());
}

TEST(RendezvousCodec, ARefusalCarriesItsReason) {
  auto answer = DecodeAnswer(EncodeRefusal("the token does not match"), 4);
  ASSERT_TRUE(answer.ok() && answer->has_value());
  EXPECT_EQ((*answer)->refusal, "the token does not match");
}

TEST(RendezvousCodec, ValuesRoundTripAndMalformedOnesFail) {
  const Values values = ValuesOf(4);
  const Bytes encoded = EncodeValues(values);
  auto decoded = DecodeValues(encoded);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, values);
  EXPECT_FALSE(DecodeValues(std::span(encoded).first(encoded.size() - 1)).ok());
  Bytes longer = encoded;
  longer.push_back(std::byte{1});
  EXPECT_FALSE(DecodeValues(longer).ok());
  // A count of a billion entries in four bytes is read as far as the bytes
  // go, not reserved.
  EXPECT_FALSE(
      DecodeValues(Bytes{std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF}, std::byte{0x3F}}).ok());
}

TEST(RendezvousCodec, ValuesBeyondTheLimitsAreCaughtBeforeTheyAreSent) {
  EXPECT_TRUE(ValuesFit(ValuesOf(1)).ok());
  auto long_key = ValuesFit({{std::string(kMostKeyBytes + 1, 'k'), {}}});
  ASSERT_FALSE(long_key.ok());
  EXPECT_NE(long_key.message().find("is longer than 256 bytes"), std::string::npos)
      << long_key.message();
  auto too_much = ValuesFit({{"sray.location", Bytes(kMostValueBytes, std::byte{1})}});
  ASSERT_FALSE(too_much.ok());
  EXPECT_NE(too_much.message().find("more than the 1048576 one rank may"), std::string::npos)
      << too_much.message();
}

// Found by the fuzzer: keys out of order decoded, then encoded to other bytes.
TEST(RendezvousCodec, ValuesOutOfOrderOrWithARepeatedKeyAreRefused) {
  const auto entry = [](std::string_view key) {
    Bytes bytes{static_cast<std::byte>(key.size()), std::byte{0}};
    for (const char letter : key) bytes.push_back(static_cast<std::byte>(letter));
    for (int index = 0; index < 4; ++index) bytes.push_back(std::byte{0});
    return bytes;
  };
  const auto two = [&](std::string_view first, std::string_view second) {
    Bytes bytes{std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}};
    for (const Bytes& part : {entry(first), entry(second)})
      bytes.insert(bytes.end(), part.begin(), part.end());
    return bytes;
  };
  ASSERT_TRUE(DecodeValues(two("a", "b")).ok());
  auto reversed = DecodeValues(two("\x8d", "s"));
  ASSERT_FALSE(reversed.ok());
  EXPECT_NE(reversed.status().message().find("out of order or name one key twice"),
            std::string::npos);
  EXPECT_FALSE(DecodeValues(two("a", "a")).ok());
}

TEST(RendezvousCodec, AnInvitationReadsBackAndAMalformedOneSaysWhoSetsIt) {
  const Invitation invitation{.step = "123.4", .port = 40001, .token = TokenOf(0xAB)};
  auto parsed = ParseInvitation(FormatInvitation(invitation));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->step, "123.4");
  EXPECT_EQ(parsed->port, 40001);
  EXPECT_EQ(parsed->token, invitation.token);
  for (const std::string& bad : std::vector<std::string>{
           "", "123.4", "123.4:40001", ":40001:ab", "123.4:0:" + std::string(64, 'a'),
           "123.4:70000:" + std::string(64, 'a'), "123.4:1:" + std::string(62, 'a'),
           "123.4:1:" + std::string(63, 'a') + "g"}) {
    auto refused = ParseInvitation(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("set by sray's SPANK plugin"), std::string::npos);
  }
}

TEST(RendezvousServer, EveryRankGetsEveryRanksValuesInRankOrder) {
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok()) << server.status().message();
  constexpr std::uint32_t kSize = 8;
  std::vector<std::future<Result<std::vector<Bytes>>>> answers;
  for (std::uint32_t rank = 0; rank < kSize; ++rank) {
    answers.push_back(std::async(std::launch::async, [&, rank] {
      return ExchangeThroughSrun(RequestFor(**server, token, rank, kSize));
    }));
  }
  for (auto& answer : answers) ExpectWholeTable(answer.get(), kSize);
}

TEST(RendezvousServer, AWrongTokenIsRefusedAndDoesNotCountForItsRank) {
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok());
  auto impostor = ExchangeThroughSrun(RequestFor(**server, TokenOf(8), 1, 2));
  ASSERT_FALSE(impostor.ok());
  EXPECT_NE(impostor.status().message().find("refused rank 1: the token does not match"),
            std::string::npos)
      << impostor.status().message();
  // Refused on the token alone: srun reads nothing of the values first.
  const int stranger = ConnectRaw((*server)->port());
  Bytes header = EncodeContribution({.token = TokenOf(9), .rank = 0, .size = 2, .values = {}});
  header.resize(kContributionTokenEnd);
  ASSERT_EQ(::send(stranger, header.data(), header.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(header.size()));
  EXPECT_NE(ReadToEnd(stranger).find("the token does not match"), std::string::npos);
  ::close(stranger);
  auto first = std::async(std::launch::async,
                          [&] { return ExchangeThroughSrun(RequestFor(**server, token, 0, 2)); });
  ExpectWholeTable(ExchangeThroughSrun(RequestFor(**server, token, 1, 2)), 2);
  ExpectWholeTable(first.get(), 2);
}

TEST(RendezvousServer, InputThatIsNotSrayIsDroppedAndTheStepStillWiresUp) {
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok());
  const int stranger = ConnectRaw((*server)->port());
  const std::string request = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(::send(stranger, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  EXPECT_EQ(ReadToEnd(stranger), "");
  ::close(stranger);
  // A connection that says nothing at all holds nobody up either.
  const int silent = ConnectRaw((*server)->port());
  auto first = std::async(std::launch::async,
                          [&] { return ExchangeThroughSrun(RequestFor(**server, token, 0, 2)); });
  ExpectWholeTable(ExchangeThroughSrun(RequestFor(**server, token, 1, 2)), 2);
  ExpectWholeTable(first.get(), 2);
  ::close(silent);
}

// With rank 0 of a 2-rank step waiting, `bad` (made for the server) is
// refused saying `reason`, and the step still wires up after it.
void ExpectRefusedWhileRankZeroWaits(
    const std::function<ExchangeRequest(const RendezvousServer&)>& bad, std::string_view reason) {
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok());
  auto first = std::async(std::launch::async,
                          [&] { return ExchangeThroughSrun(RequestFor(**server, token, 0, 2)); });
  ASSERT_TRUE(AwaitContributions(**server, 1));
  auto refused = ExchangeThroughSrun(bad(**server));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(reason), std::string::npos)
      << refused.status().message();
  ExpectWholeTable(ExchangeThroughSrun(RequestFor(**server, token, 1, 2)), 2);
  ExpectWholeTable(first.get(), 2);
}

TEST(RendezvousServer, TwoProcessesClaimingOneRankAreToldSo) {
  ExpectRefusedWhileRankZeroWaits(
      [](const RendezvousServer& server) { return RequestFor(server, TokenOf(7), 0, 2); },
      "rank 0 has contributed already: two processes claim one rank");
}

TEST(RendezvousServer, ThePortClosesOnceEveryRankHasContributed) {
  // A token of its own: should a server of a test running beside this one
  // take the port once it closes, it would refuse this one.
  Token token;
  ASSERT_TRUE(FillRandom(token, "a test token").ok());
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok());
  ExpectWholeTable(ExchangeThroughSrun(RequestFor(**server, token, 0, 1)), 1);
  auto late = ExchangeThroughSrun(RequestFor(**server, token, 0, 1));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("cannot reach srun's rendezvous"), std::string::npos)
      << late.status().message();
}

TEST(RendezvousServer, AContributionThatShowedTheTokenButCannotBeReadIsToldWhy) {
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok());
  const int rank = ConnectRaw((*server)->port());
  // A whole header that claims rank 5 of a job of 2.
  Bytes header = EncodeContribution({.token = token, .rank = 5, .size = 2, .values = {}});
  ASSERT_EQ(::send(rank, header.data(), header.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(header.size()));
  const std::string answer = ReadToEnd(rank);
  ::close(rank);
  EXPECT_NE(answer.find("a contribution claims rank 5 of a job of 2"), std::string::npos) << answer;
  EXPECT_NE(answer.find("check both are the same install"), std::string::npos) << answer;
}

TEST(RendezvousServer, ARankThatDisagreesOnTheJobsSizeIsRefused) {
  ExpectRefusedWhileRankZeroWaits(
      [](const RendezvousServer& server) { return RequestFor(server, TokenOf(7), 1, 3); },
      "says the step has 3 ranks, an earlier one said 2");
}

// In a child process of its own: a lowered hard limit cannot be raised again.
[[noreturn]] void ExchangeUnderAFileLimitOf(rlim_t files) {
  rlimit limit{.rlim_cur = files, .rlim_max = files};
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) std::_Exit(2);
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  if (!server.ok()) std::_Exit(3);
  auto answer = ExchangeThroughSrun(RequestFor(**server, token, 0, 1000));
  if (answer.ok()) std::_Exit(4);
  std::fprintf(stderr, "%s\n", answer.status().message().c_str());
  std::_Exit(0);
}

// Descriptors this process holds now, which a forked child inherits.
std::size_t OpenDescriptors() {
  std::size_t open = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++open;
  return open;
}

TEST(RendezvousServer, AStepLargerThanSrunsFileLimitIsRefusedWithTheFix) {
  // 200 files, or more when earlier tests of this process left descriptors
  // open (TransportPair's left-behind workers: 450 in a unity build's
  // order): the server's own socket needs room below the limit.
  const rlim_t files = std::max<rlim_t>(200, OpenDescriptors() + 64);
  ASSERT_LT(files, 2080u) << "too many descriptors open for a limit below what 1000 ranks need";
  EXPECT_EXIT(
      ExchangeUnderAFileLimitOf(files), ::testing::ExitedWithCode(0),
      "srun may open at most " + std::to_string(files) +
          " files \\(ulimit -Hn\\), and a step of 1000 ranks needs 2080: raise the limit where "
          "srun runs, or run with --ray-cluster=wireup=pmix");
}

TEST(RendezvousClient, ARankWaitingForOneThatNeverComesFailsAtItsTimeoutSayingWhy) {
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok());
  ExchangeRequest request = RequestFor(**server, token, 0, 2);
  request.timeout = std::chrono::milliseconds(300);
  auto answer = ExchangeThroughSrun(request);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(answer.status().message().find("not every rank of the step reached its wire-up"),
            std::string::npos)
      << answer.status().message();
}

TEST(RendezvousClient, AnUnreachableSrunNamesTheOtherWayToWireUp) {
  // A port held by a socket that is bound but does not listen: nothing can
  // connect there, and no other test can take it meanwhile.
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::uint16_t port = ntohs(address.sin_port);
  ExchangeRequest request;
  request.host = "127.0.0.1";
  request.invitation = {.step = "7.0", .port = port, .token = TokenOf(1)};
  request.size = 1;
  auto answer = ExchangeThroughSrun(request);
  ::close(holder);
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.status().message().find("cannot reach srun's rendezvous at 127.0.0.1:" +
                                           std::to_string(port)),
            std::string::npos)
      << answer.status().message();
  EXPECT_NE(answer.status().message().find("--ray-cluster=wireup=pmix"), std::string::npos);
}

// Whether the server closed `descriptor` (end of stream or a reset) within
// `limit`, rather than leaving it open.
bool ClosedWithin(int descriptor, std::chrono::milliseconds limit) {
  pollfd watched{.fd = descriptor, .events = POLLIN, .revents = 0};
  if (::poll(&watched, 1, static_cast<int>(limit.count())) <= 0) return false;
  char byte = 0;
  return ::recv(descriptor, &byte, 1, MSG_DONTWAIT) <= 0;
}

TEST(RendezvousServer, AConnectionThatShowsNoTokenIsClosedAfterTheTokenPatience) {
  auto server = RendezvousServer::Start(TokenOf(7));
  ASSERT_TRUE(server.ok());
  const auto opened = std::chrono::steady_clock::now();
  const int silent = ConnectRaw((*server)->port());
  // Not before the patience: a rank on a loaded node may take a moment.
  EXPECT_FALSE(ClosedWithin(silent, RendezvousServer::kTokenPatience / 2));
  EXPECT_TRUE(ClosedWithin(silent, std::chrono::seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - opened, RendezvousServer::kTokenPatience);
  ::close(silent);
}

// A flood of connections that never show the token takes no more than
// kMostUnfinishedConnections of srun's files: beyond, the oldest make room,
// and a rank that comes after the flood is served at once, long before the
// flood's own connections would time out.
TEST(RendezvousServer, BeyondTheCapTheOldestStrangersMakeRoomForTheStepsRanks) {
  const std::size_t flood = RendezvousServer::kMostUnfinishedConnections + 40;
  // Both ends of every connection live in this process.
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  const rlim_t wanted = 2 * flood + 256;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted) {
    GTEST_SKIP() << "needs " << wanted << " open files (ulimit -Hn is " << limit.rlim_max << ")";
  }
  const rlimit before = limit;
  if (limit.rlim_cur < wanted) {
    limit.rlim_cur = wanted;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  }
  const Token token = TokenOf(7);
  auto server = RendezvousServer::Start(token);
  ASSERT_TRUE(server.ok());
  auto first = std::async(std::launch::async,
                          [&] { return ExchangeThroughSrun(RequestFor(**server, token, 0, 2)); });
  ASSERT_TRUE(AwaitContributions(**server, 1));
  std::vector<int> strangers;
  for (std::size_t index = 0; index < flood; ++index)
    strangers.push_back(ConnectRaw((*server)->port()));
  // From the flood's last connection: its first ones may have waited for a
  // moment by then, where the kernel's backlog is short.
  const auto flood_ended = std::chrono::steady_clock::now();
  ExpectWholeTable(ExchangeThroughSrun(RequestFor(**server, token, 1, 2)), 2);
  ExpectWholeTable(first.get(), 2);
  const auto served_after = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - flood_ended);
  // Without eviction, rank 1 would wait in the backlog until the flood's
  // first connections ran out of patience (2 s; 0.1 s with it, here).
  EXPECT_LT(served_after, RendezvousServer::kTokenPatience)
      << "rank 1 waited for the flood's patience to end: the oldest made no room";
  // The port closed with the table: the connections still open now were
  // neither evicted nor timed out. Most of the flood is among them.
  std::size_t closed = 0;
  for (const int stranger : strangers) {
    if (ClosedWithin(stranger, std::chrono::milliseconds(0))) ++closed;
  }
  EXPECT_GE(closed, flood - RendezvousServer::kMostUnfinishedConnections);
  EXPECT_LT(closed, flood / 2) << "the flood was closed whole, not its oldest";
  for (const int stranger : strangers) ::close(stranger);
  server->reset();
  (void)::setrlimit(RLIMIT_NOFILE, &before);
}

// A contribution with a wrong token and a large body: srun refuses after the
// first 40 bytes while the body is still on its way, and the sender, whose
// send may fail as srun closes, still reads the reason. (srun also drains
// the rest for a moment before it closes; on Linux's loopback the reason
// arrives even without that, so this does not test the draining itself.)
TEST(RendezvousServer, ARefusalReachesARankStillSendingALargeContribution) {
  auto server = RendezvousServer::Start(TokenOf(7));
  ASSERT_TRUE(server.ok());
  ExchangeRequest request = RequestFor(**server, TokenOf(8), 1, 2);
  request.values = EncodeValues({{"sray.bulk", Bytes(kMostValueBytes - 4096, std::byte{1})}});
  auto refused = ExchangeThroughSrun(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("refused rank 1: the token does not match"),
            std::string::npos)
      << refused.status().message();
}

// The environment variables TakeInvitation reads, set for one test and put
// back after it.
class InvitationEnvironment : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {kRendezvousVariable, "SRAY_WIREUP", "SLURM_JOB_ID",
                                           "SLURM_STEP_ID"};
  void SetUp() override {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value == nullptr ? std::optional<std::string>()
                                                 : std::optional<std::string>(value));
      ::unsetenv(name);
    }
    ::setenv("SLURM_JOB_ID", "7", 1);
    ::setenv("SLURM_STEP_ID", "0", 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  static std::string Variable() {
    const char* value = std::getenv(kRendezvousVariable);
    return value == nullptr ? "(unset)" : value;
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(InvitationEnvironment, ThisStepsInvitationIsTakenOnceAndItsTokenLeavesTheEnvironment) {
  const Invitation sent{.step = "7.0", .port = 4242, .token = TokenOf(9)};
  ::setenv(kRendezvousVariable, FormatInvitation(sent).c_str(), 1);
  auto taken = TakeInvitation();
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  ASSERT_TRUE(taken->has_value());
  EXPECT_EQ((*taken)->port, 4242);
  EXPECT_EQ((*taken)->token, sent.token);
  EXPECT_EQ(Variable(), kInvitationTaken);

  // A second sray program in the task (a child of the first) is told why.
  auto again = TakeInvitation();
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("an earlier sray program in this task took srun's "
                                          "invitation"),
            std::string::npos)
      << again.status().message();
  EXPECT_NE(again.status().message().find("run one sray program per task"), std::string::npos);
}

TEST_F(InvitationEnvironment, SrunThatCouldNotServeSendsTheRanksToTheFence) {
  ::setenv(kRendezvousVariable, kThroughPmix, 1);
  ::setenv("SRAY_WIREUP", "srun", 1);
  auto taken = TakeInvitation();
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_FALSE(taken->has_value());
}

TEST_F(InvitationEnvironment, AnInvitationHeldBackByExportIsAnErrorNamingTheFix) {
  ::setenv("SRAY_WIREUP", "srun", 1);
  auto taken = TakeInvitation();
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find("--export=ALL"), std::string::npos)
      << taken.status().message();
  EXPECT_NE(taken.status().message().find("wireup=pmix"), std::string::npos);
}

TEST_F(InvitationEnvironment, AnotherStepsInvitationIsNotUsedAndItsTokenIsWipedToo) {
  // sray run inside an srun step whose launcher did not scrub the variable.
  const Invitation outer{.step = "7.3", .port = 4242, .token = TokenOf(9)};
  ::setenv(kRendezvousVariable, FormatInvitation(outer).c_str(), 1);
  auto taken = TakeInvitation();
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_FALSE(taken->has_value());
  EXPECT_EQ(Variable(), kInvitationTaken);
}

TEST_F(InvitationEnvironment, OutsideSrunThereIsNoInvitationAndNoError) {
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_STEP_ID");
  auto taken = TakeInvitation();
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_FALSE(taken->has_value());
}

}  // namespace
}  // namespace sray::wire::rendezvous
