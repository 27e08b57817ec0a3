// Who drives the UCX worker while a caller waits for its reply.

#include "transport/progress_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "transport/completion.h"
#include "transport/ucx_handles.h"

namespace sray::transport {
namespace {

using std::chrono::milliseconds;

class NothingPosted final : public ProgressLoop::Client {
 public:
  bool SendPosted() override { return false; }
  [[nodiscard]] bool HasPosted() const override { return false; }
  void Housekeeping(std::chrono::steady_clock::time_point) override {}
};

bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// A started progress loop on a worker of its own, with nothing to send.
class ProgressLoopReplyWaiters : public ::testing::Test {
 protected:
  void SetUp() override {
    auto context = UcxContext::Create("");
    ASSERT_TRUE(context.ok()) << context.status().message();
    auto worker = UcxWorker::Create(*context);
    ASSERT_TRUE(worker.ok()) << worker.status().message();
    loop_ = std::make_unique<ProgressLoop>(std::move(worker).value(), client_);
    ASSERT_TRUE(loop_->Start().ok());
  }

  NothingPosted client_;
  std::unique_ptr<ProgressLoop> loop_;  // stopped before the client goes
};

// A caller is counted from before its send, so the progress thread stays
// off the worker through the send too; the wait takes the count over, and
// once the reply is in nothing of it is left (a count left behind would keep
// the progress thread parked for good, and nobody would serve the worker).
TEST_F(ProgressLoopReplyWaiters,
       ACallerCountedBeforeItsSendKeepsTheProgressThreadOffAndLeavesNoCount) {
  ProgressLoop& loop = *loop_;
  {
    ProgressLoop::ReplyExpected expected(loop);
    loop.Signal();  // from its sleep on the worker's event descriptor
    EXPECT_TRUE(Eventually([&] { return loop.progress_thread_parked(); }))
        << "the progress thread did not keep off the worker while a caller was sending";
    Completion completion;
    std::thread replier([&] {
      std::this_thread::sleep_for(milliseconds(20));
      completion.Finish(Status::Ok());
    });
    EXPECT_TRUE(loop.WaitFor(completion, milliseconds(5000), &expected));
    replier.join();
    EXPECT_EQ(loop.spinning_waiters(), 0) << "the wait did not take the caller's count over";
  }
  EXPECT_EQ(loop.spinning_waiters(), 0);
  EXPECT_TRUE(Eventually([&] { return !loop.progress_thread_parked(); }));
  loop.Signal();
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(loop.progress_thread_parked()) << "a reply-waiter's count was left behind";
}

// A caller whose send failed before it waited gives its count back.
TEST_F(ProgressLoopReplyWaiters, ACallerThatNeverWaitsGivesItsCountBack) {
  ProgressLoop& loop = *loop_;
  {
    const ProgressLoop::ReplyExpected expected(loop);
    EXPECT_EQ(loop.spinning_waiters(), 1);
    loop.Signal();
    ASSERT_TRUE(Eventually([&] { return loop.progress_thread_parked(); }));
  }
  EXPECT_EQ(loop.spinning_waiters(), 0);
  EXPECT_TRUE(Eventually([&] { return !loop.progress_thread_parked(); }));
  loop.Signal();
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(loop.progress_thread_parked());
}

}  // namespace
}  // namespace sray::transport
