// The transport's parts that need no UCX connection: calls awaiting replies,
// posted messages becoming frames, and receive buffers.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "transport/message_batch.h"
#include "transport/outbox.h"
#include "transport/pending_calls.h"
#include "transport/receive_buffers.h"

namespace sray::transport {
namespace {

struct Outcomes {
  std::vector<std::pair<std::uint64_t, std::string>> finished;  // id, value or error text
};

std::shared_ptr<PendingCall> CallTo(std::uint32_t rank, std::uint64_t id, Outcomes& outcomes) {
  return std::make_shared<PendingCall>(
      id, rank, EncodedFrameHeader{}, [&outcomes, id](Result<Bytes> result) {
        outcomes.finished.emplace_back(
            id, result.ok() ? std::string(TextOf(*result)) : "error: " + result.status().message());
      });
}

TEST(PendingCall, FinishesOnlyOnceBothTheSendAndTheReplyAreOver) {
  Outcomes outcomes;
  auto call = CallTo(1, 10, outcomes);
  call->Complete(BytesOf("reply"));
  EXPECT_TRUE(outcomes.finished.empty()) << "finished while UCX may still read the payload";
  call->MarkSent(Status::Ok());
  ASSERT_EQ(outcomes.finished.size(), 1u);
  EXPECT_EQ(outcomes.finished[0].second, "reply");
  call->Complete(BytesOf("late"));
  call->MarkSent(Status::Ok());
  EXPECT_EQ(outcomes.finished.size(), 1u);
}

TEST(PendingCall, AFailedSendIsTheOutcomeUnlessAReplyCameFirst) {
  Outcomes outcomes;
  auto failed = CallTo(1, 1, outcomes);
  failed->MarkSent(Status::Unavailable("peer gone"));
  ASSERT_EQ(outcomes.finished.size(), 1u);
  EXPECT_EQ(outcomes.finished[0].second, "error: peer gone");

  auto replied = CallTo(1, 2, outcomes);
  replied->Complete(BytesOf("answer"));
  replied->MarkSent(Status::Unavailable("send reported late"));
  ASSERT_EQ(outcomes.finished.size(), 2u);
  EXPECT_EQ(outcomes.finished[1].second, "answer");
}

// A call that timed out before its send's request was recorded (a call the
// progress thread sends) could not be cancelled by its caller: recording the
// request says so, for the sender to cancel it.
TEST(PendingCall, RecordingTheRequestOfACallThatEndedAlreadySaysSo) {
  Outcomes outcomes;
  auto call = CallTo(1, 1, outcomes);
  call->Complete(Status::Unavailable("timed out"));
  EXPECT_TRUE(call->has_outcome());
  int request = 0;
  EXPECT_TRUE(call->SetSendRequest(&request));
  EXPECT_TRUE(outcomes.finished.empty());  // the send is not over yet

  // A reply that overtook the recording of its send leaves it to finish.
  auto answered = CallTo(1, 2, outcomes);
  answered->Complete(BytesOf("reply"));
  EXPECT_FALSE(answered->SetSendRequest(&request));
}

TEST(PendingCall, CancelSendSeesTheRequestOnlyWhileTheSendIsInFlight) {
  Outcomes outcomes;
  auto call = CallTo(1, 1, outcomes);
  int request = 0;
  EXPECT_FALSE(call->SetSendRequest(&request));  // no outcome yet
  std::vector<void*> cancelled;
  call->CancelSend([&](void* pending) {
    cancelled.push_back(pending);
    call->MarkSent(Status::Unavailable("cancelled"));  // as UCX's callback would, re-entrantly
  });
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0], &request);
  EXPECT_TRUE(call->sent());
  call->CancelSend([&](void* pending) { cancelled.push_back(pending); });
  EXPECT_EQ(cancelled.size(), 1u);
}

// Before: a reply completed whichever call had its request id, whoever sent
// it; any process of the job could answer a call made to another rank.
TEST(PendingCalls, AReplyCompletesOnlyACallMadeToItsSender) {
  Outcomes outcomes;
  PendingCalls calls;
  auto call = CallTo(2, 7, outcomes);
  call->MarkSent(Status::Ok());
  calls.Add(call);
  EXPECT_FALSE(calls.CompleteReplyFrom(5, 7, BytesOf("forged")));
  EXPECT_TRUE(outcomes.finished.empty());
  EXPECT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls.CompleteReplyFrom(2, 8, BytesOf("no such call")));
  EXPECT_TRUE(calls.CompleteReplyFrom(2, 7, BytesOf("answer")));
  ASSERT_EQ(outcomes.finished.size(), 1u);
  EXPECT_EQ(outcomes.finished.back(), std::make_pair(std::uint64_t{7}, std::string("answer")));
  EXPECT_FALSE(calls.CompleteReplyFrom(2, 7, BytesOf("again")));
  EXPECT_EQ(calls.size(), 0u);
}

TEST(PendingCalls, FailingAPeerFailsOnlyItsCalls) {
  Outcomes outcomes;
  PendingCalls calls;
  for (std::uint64_t id = 1; id <= 6; ++id) {
    auto call = CallTo(static_cast<std::uint32_t>(id % 2), id, outcomes);
    call->MarkSent(Status::Ok());
    calls.Add(call);
  }
  EXPECT_EQ(calls.size(), 6u);
  auto ranks = calls.AwaitedRanks();
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<std::uint32_t>{0, 1}));

  calls.FailCallsTo(1, Status::Unavailable("rank 1 died"));
  ASSERT_EQ(outcomes.finished.size(), 3u);
  for (const auto& [id, text] : outcomes.finished) {
    EXPECT_EQ(id % 2, 1u);
    EXPECT_EQ(text, "error: rank 1 died");
  }
  EXPECT_EQ(calls.AwaitedRanks(), (std::vector<std::uint32_t>{0}));
  calls.Complete(3, BytesOf("too late"));  // already failed: ignored
  calls.Complete(4, BytesOf("four"));
  EXPECT_EQ(outcomes.finished.back(), std::make_pair(std::uint64_t{4}, std::string("four")));
  EXPECT_EQ(calls.Take(4), nullptr);
  EXPECT_EQ(calls.TakeAll().size(), 2u);
  EXPECT_EQ(calls.size(), 0u);
  EXPECT_TRUE(calls.AwaitedRanks().empty());
}

// Records what SendAsFrames sends, decoding batches into their messages.
class RecordingSink final : public FrameSink {
 public:
  std::vector<std::string> frames;

  void TransmitReply(std::uint32_t /*rank*/, ucp_ep_h /*reply_endpoint*/,
                     OwnedFrame reply) override {
    frames.push_back("reply " + std::string(TextOf(reply.payload)));
  }
  void TransmitLateReply(std::uint32_t rank, ucp_ep_h /*request_endpoint*/,
                         OwnedFrame reply) override {
    frames.push_back("late reply to " + std::to_string(rank) + " " +
                     std::string(TextOf(reply.payload)));
  }
  void TransmitOneWay(std::uint32_t rank, std::uint32_t method, Bytes payload) override {
    frames.push_back("to " + std::to_string(rank) + ": " + Describe(method, payload));
  }
  void TransmitBatch(std::uint32_t rank, Bytes batch) override {
    std::string text = "to " + std::to_string(rank) + ": batch";
    const Status status =
        ForEachBatchedMessage(batch, [&](std::uint32_t method, std::span<const std::byte> message) {
          text += " " + Describe(method, message);
        });
    EXPECT_TRUE(status.ok()) << status.message();
    frames.push_back(text);
  }

 private:
  static std::string Describe(std::uint32_t method, std::span<const std::byte> payload) {
    const std::string text(TextOf(payload));
    return std::to_string(method) + "/" +
           (text.size() > 16 ? std::to_string(text.size()) + "B" : text);
  }
};

PostedMessage OneWay(std::uint32_t rank, std::uint32_t method, const std::string& text) {
  return {.kind = PostedMessage::Kind::kOneWay,
          .rank = rank,
          .method = method,
          .payload = BytesOf(text),
          .reply_endpoint = nullptr,
          .reply = {},
          .call = nullptr,
          .call_payload = {}};
}

TEST(SendAsFrames, ALoneMessageGoesAsItIs) {
  RecordingSink sink;
  std::vector<PostedMessage> messages;
  messages.push_back(OneWay(2, 7, "a"));
  SendAsFrames(std::move(messages), sink);
  EXPECT_EQ(sink.frames, (std::vector<std::string>{"to 2: 7/a"}));
}

TEST(SendAsFrames, SmallMessagesToOnePeerShareABatchInOrder) {
  RecordingSink sink;
  std::vector<PostedMessage> messages;
  messages.push_back(OneWay(1, 7, "a"));
  messages.push_back(OneWay(2, 7, "x"));
  messages.push_back(OneWay(1, 8, "b"));
  messages.push_back(OneWay(1, 9, "c"));
  SendAsFrames(std::move(messages), sink);
  EXPECT_EQ(sink.frames, (std::vector<std::string>{"to 1: batch 7/a 8/b 9/c", "to 2: 7/x"}));
}

TEST(SendAsFrames, ALargeMessageGoesAloneAfterWhatWasPostedBeforeIt) {
  RecordingSink sink;
  std::vector<PostedMessage> messages;
  messages.push_back(OneWay(1, 7, "a"));
  messages.push_back(OneWay(1, 7, "b"));
  messages.push_back(OneWay(1, 8, std::string(kBatchableMessageLimit + 1, 'L')));
  messages.push_back(OneWay(1, 9, "c"));
  SendAsFrames(std::move(messages), sink);
  EXPECT_EQ(sink.frames,
            (std::vector<std::string>{"to 1: batch 7/a 7/b",
                                      "to 1: 8/" + std::to_string(kBatchableMessageLimit + 1) + "B",
                                      "to 1: 9/c"}));
}

TEST(SendAsFrames, ABatchIsSentOnceItReachesItsSizeLimit) {
  RecordingSink sink;
  std::vector<PostedMessage> messages;
  const std::string chunk(kBatchableMessageLimit, 'x');
  const std::size_t per_batch = kBatchBytesLimit / (chunk.size() + kBatchEntryHeaderSize) + 1;
  for (std::size_t index = 0; index < per_batch + 1; ++index)
    messages.push_back(OneWay(1, 7, chunk));
  SendAsFrames(std::move(messages), sink);
  ASSERT_EQ(sink.frames.size(), 2u);
  EXPECT_EQ(sink.frames[1], "to 1: 7/" + std::to_string(chunk.size()) + "B");
}

TEST(SendAsFrames, RepliesGoOutAtOnce) {
  RecordingSink sink;
  std::vector<PostedMessage> messages;
  messages.push_back(OneWay(1, 7, "a"));
  PostedMessage reply;
  reply.kind = PostedMessage::Kind::kReply;
  reply.reply.payload = BytesOf("r");
  messages.push_back(std::move(reply));
  messages.push_back(OneWay(1, 7, "b"));
  PostedMessage late;
  late.kind = PostedMessage::Kind::kLateReply;
  late.rank = 2;
  late.reply.payload = BytesOf("l");
  messages.push_back(std::move(late));
  SendAsFrames(std::move(messages), sink);
  EXPECT_EQ(sink.frames,
            (std::vector<std::string>{"reply r", "late reply to 2 l", "to 1: batch 7/a 7/b"}));
}

// A late reply goes on the endpoint this process's messages to that rank
// take: after what was posted to it before.
TEST(SendAsFrames, ALateReplyGoesAfterWhatWasPostedToItsRankBefore) {
  RecordingSink sink;
  std::vector<PostedMessage> messages;
  messages.push_back(OneWay(1, 7, "a"));
  PostedMessage late;
  late.kind = PostedMessage::Kind::kLateReply;
  late.rank = 1;
  late.reply.payload = BytesOf("l");
  messages.push_back(std::move(late));
  messages.push_back(OneWay(1, 7, "b"));
  SendAsFrames(std::move(messages), sink);
  EXPECT_EQ(sink.frames, (std::vector<std::string>{"to 1: 7/a", "late reply to 1 l", "to 1: 7/b"}));
}

TEST(Outbox, TakeAllEmptiesItAndClearsTheFlag) {
  Outbox outbox;
  EXPECT_FALSE(outbox.HasMessages());
  EXPECT_TRUE(outbox.TakeAll().empty());
  outbox.Push(OneWay(1, 7, "a"));
  outbox.Push(OneWay(1, 7, "b"));
  EXPECT_TRUE(outbox.HasMessages());
  EXPECT_EQ(outbox.TakeAll().size(), 2u);
  EXPECT_FALSE(outbox.HasMessages());
  EXPECT_TRUE(outbox.TakeAll().empty());
}

TEST(ReceiveBufferPool, CapacityIsThePowerOfTwoAtOrAboveTheLengthFromFourKiB) {
  EXPECT_EQ(ReceiveBufferPool::CapacityFor(0), kSmallestReceiveBuffer);
  EXPECT_EQ(ReceiveBufferPool::CapacityFor(100), kSmallestReceiveBuffer);
  EXPECT_EQ(ReceiveBufferPool::CapacityFor(16384), 16384u);
  EXPECT_EQ(ReceiveBufferPool::CapacityFor(16385), 32768u);
  EXPECT_EQ(ReceiveBufferPool::CapacityFor((std::size_t{64} << 20) + 1), std::size_t{128} << 20);
}

// Streams of 16 and 32 KiB messages ran at 0.2 GB/s when buffers under
// 64 KiB were allocated and freed per message.
TEST(ReceiveBufferPool, BuffersOfEverySizeClassAreReusedNewestFirst) {
  ReceiveBufferPool pool;
  ReceiveBuffer first = pool.Acquire(20000);
  ReceiveBuffer second = pool.Acquire(30000);
  EXPECT_EQ(second.capacity(), 32768u);
  std::byte* const newest = second.data();
  pool.Release(std::move(first));
  pool.Release(std::move(second));
  EXPECT_EQ(pool.pooled_bytes(), 2 * 32768u);
  EXPECT_EQ(pool.Acquire(16385).data(), newest);
  EXPECT_EQ(pool.pooled_bytes(), 32768u);
}

TEST(ReceiveBufferPool, ASmallMessageDoesNotTakeALargeBuffer) {
  ReceiveBufferPool pool;
  pool.Release(pool.Acquire(std::size_t{64} << 20));
  ReceiveBuffer small = pool.Acquire(16384);
  EXPECT_EQ(small.capacity(), 16384u);
  EXPECT_EQ(pool.pooled_bytes(), std::size_t{64} << 20);
}

TEST(ReceiveBufferPool, KeepsAtMostItsLimitGivingBackTheOldestFirst) {
  ReceiveBufferPool pool;
  const std::size_t size = kPooledBytesKept / 4;
  std::vector<ReceiveBuffer> buffers;
  buffers.reserve(5);
  for (int index = 0; index < 5; ++index) buffers.push_back(pool.Acquire(size));
  std::byte* const oldest = buffers[0].data();
  for (auto& buffer : buffers) pool.Release(std::move(buffer));
  EXPECT_EQ(pool.pooled_bytes(), kPooledBytesKept);
  for (int index = 0; index < 4; ++index) EXPECT_NE(pool.Acquire(size).data(), oldest);
}

TEST(ReceiveBufferPool, TheOldestIsGivenBackWhateverItsSizeClass) {
  ReceiveBufferPool pool;
  const std::size_t large = kPooledBytesKept / 4;
  const std::size_t small = kPooledBytesKept / 16;
  pool.Release(pool.Acquire(large));
  std::vector<ReceiveBuffer> buffers;
  for (int index = 0; index < 13; ++index) buffers.push_back(pool.Acquire(small));
  for (auto& buffer : buffers) pool.Release(std::move(buffer));
  // Four sixteenths of the limit, then thirteen: over it, so the large one, the
  // oldest, went.
  EXPECT_EQ(pool.pooled_bytes(), 13 * small);
  (void)pool.Acquire(large);
  EXPECT_EQ(pool.pooled_bytes(), 13 * small);
}

TEST(ReceiveBufferPool, BuffersNotReusedForTwoSecondsAreGivenBack) {
  ReceiveBufferPool pool;
  pool.Release(pool.Acquire(std::size_t{16} << 20));
  const auto now = std::chrono::steady_clock::now();
  pool.DropIdle(now);
  EXPECT_EQ(pool.pooled_bytes(), std::size_t{16} << 20);
  pool.Release(pool.Acquire(16384));
  pool.DropIdle(now + std::chrono::hours(1));
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

TEST(ReceiveBufferPool, ABufferLargerThanTheLimitIsNotKeptNorRoundedUp) {
  ReceiveBufferPool pool;
  EXPECT_EQ(ReceiveBufferPool::CapacityFor(kPooledBytesKept + 1), kPooledBytesKept + 1);
  pool.Release(pool.Acquire(kPooledBytesKept + 1));
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

}  // namespace
}  // namespace sray::transport
