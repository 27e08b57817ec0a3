#include "launcher/output_relay.h"

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

namespace sray::launcher {
namespace {

using namespace std::chrono_literals;

std::string RelayTestLines(char tag, std::size_t bytes) {
  std::string text;
  const std::string line = std::string(63, tag) + "\n";
  while (text.size() < bytes) text += line;
  return text;
}

std::string ReadRelayedUntilEnd(int descriptor) {
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t got = ::read(descriptor, buffer, sizeof(buffer));
    if (got <= 0) return text;
    text.append(buffer, static_cast<std::size_t>(got));
  }
}

// SIGPIPE blocked in this thread for the test's length, as `sray run` has
// it; one raised meanwhile is taken before the mask is restored.
class SigpipeBlockedForRelayTest {
 public:
  SigpipeBlockedForRelayTest() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &before_);
  }
  ~SigpipeBlockedForRelayTest() {
    const timespec now{};
    while (sigtimedwait(&pipe_, nullptr, &now) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &before_, nullptr);
  }

 private:
  sigset_t pipe_{};
  sigset_t before_{};
};

// `sray run ... | less` left at its first page: the launcher blocked in
// write(2) and handled neither Ctrl-C nor its ranks' ends.
TEST(OutputRelay, AReaderThatStopsReadingNeverBlocksTheWriterAndNothingIsLost) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  const std::string text = RelayTestLines('a', 3 * OutputRelay::kFullBytes);
  std::optional<OutputRelay> relay(std::in_place);
  // Far more than the pipe holds, and no one reads yet: returns at once.
  auto writing = std::async(std::launch::async, [&] {
    relay->Write(pipe_ends[1], text);
    return relay->Full() && relay->WaitingDescriptors().size() == 1;
  });
  EXPECT_EQ(writing.wait_for(10s), std::future_status::ready) << "the write blocked";
  auto reader = std::async(std::launch::async, [&] { return ReadRelayedUntilEnd(pipe_ends[0]); });
  EXPECT_TRUE(writing.get()) << "the relay did not keep what the pipe could not take";
  EXPECT_EQ(relay->Drain(std::nullopt, -1), OutputRelay::DrainEnd::kWritten);
  EXPECT_TRUE(relay->Empty());
  EXPECT_TRUE(relay->WaitingDescriptors().empty());
  EXPECT_EQ(relay->DroppedBytes(), 0u);
  relay.reset();  // its own description of the pipe goes with it
  ::close(pipe_ends[1]);
  const std::string got = reader.get();
  EXPECT_EQ(got.size(), text.size());
  EXPECT_TRUE(got == text);
  ::close(pipe_ends[0]);
}

// The blocking flag of the shell's description is shared with every process
// that has it: the relay must leave it as it found it.
TEST(OutputRelay, TheSharedDescriptionStaysBlocking) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  std::optional<OutputRelay> relay(std::in_place);
  relay->Write(pipe_ends[1], RelayTestLines('b', 200 * 1024));
  EXPECT_EQ(::fcntl(pipe_ends[1], F_GETFL) & O_NONBLOCK, 0);
  auto reader = std::async(std::launch::async, [&] { return ReadRelayedUntilEnd(pipe_ends[0]); });
  EXPECT_EQ(relay->Drain(std::nullopt, -1), OutputRelay::DrainEnd::kWritten);
  relay.reset();
  ::close(pipe_ends[1]);
  EXPECT_EQ(reader.get().size(), RelayTestLines('b', 200 * 1024).size());
  ::close(pipe_ends[0]);
}

// A terminal whose reader stopped (a terminal emulator's Ctrl-S, a pty no
// one reads): a blocking write there never returns.
TEST(OutputRelay, ATerminalThatIsNotReadDoesNotBlockTheWriter) {
  int terminal = -1;
  int device = -1;
  ASSERT_EQ(::openpty(&terminal, &device, nullptr, nullptr, nullptr), 0);
  termios settings{};
  ASSERT_EQ(::tcgetattr(device, &settings), 0);
  ::cfmakeraw(&settings);
  ASSERT_EQ(::tcsetattr(device, TCSANOW, &settings), 0);
  OutputRelay relay;
  auto writing = std::async(std::launch::async, [&] {
    relay.Write(device, RelayTestLines('c', 2 * OutputRelay::kFullBytes));
    return relay.Drain(std::chrono::steady_clock::now() + 200ms, -1);
  });
  if (writing.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "writing to a terminal no one reads blocked";
    char buffer[65536];  // reads until the blocked write is done, so the test can end
    while (writing.wait_for(0s) != std::future_status::ready) {
      if (::read(terminal, buffer, sizeof(buffer)) <= 0) break;
    }
  }
  EXPECT_EQ(writing.get(), OutputRelay::DrainEnd::kDeadline);
  EXPECT_GT(relay.DroppedBytes(), 0u);
  EXPECT_TRUE(relay.Empty());
  ::close(device);
  ::close(terminal);
}

// Standard output and error on one pipe (`2>&1`): lines keep the order
// they were written in across the two.
TEST(OutputRelay, WritesToTwoTargetsKeepTheirOrder) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  const int second = ::fcntl(pipe_ends[1], F_DUPFD_CLOEXEC, 0);
  ASSERT_GE(second, 0);
  std::string expected;
  std::optional<OutputRelay> relay(std::in_place);
  for (int round = 0; round < 40; ++round) {
    const std::string out = RelayTestLines('o', 20000) + "out " + std::to_string(round) + "\n";
    const std::string err = "err " + std::to_string(round) + "\n";
    relay->Write(pipe_ends[1], out);
    relay->Write(second, err);
    expected += out + err;
  }
  auto reader = std::async(std::launch::async, [&] { return ReadRelayedUntilEnd(pipe_ends[0]); });
  EXPECT_EQ(relay->Drain(std::nullopt, -1), OutputRelay::DrainEnd::kWritten);
  relay.reset();
  ::close(pipe_ends[1]);
  ::close(second);
  EXPECT_TRUE(reader.get() == expected);
  ::close(pipe_ends[0]);
}

// `sray run ... | less` with standard error on the terminal: the launcher's
// messages ("interrupted by ...", a rank's failure) waited behind the
// stalled standard output, and were dropped with it.
TEST(OutputRelay, AStalledTargetDoesNotHoldBackAnotherFile) {
  int stalled[2];
  int other[2];
  ASSERT_EQ(::pipe2(stalled, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(other, O_CLOEXEC), 0);
  OutputRelay relay;
  relay.Write(stalled[1], RelayTestLines('s', 2 * OutputRelay::kFullBytes));
  relay.Write(other[1], "sray: interrupted\n");
  char buffer[64] = {};
  ASSERT_EQ(::fcntl(other[0], F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(::read(other[0], buffer, sizeof(buffer)), 18) << "the message waited behind the stall";
  EXPECT_EQ(relay.WaitingDescriptors().size(), 1u);
  for (int descriptor : {stalled[0], stalled[1], other[0], other[1]}) ::close(descriptor);
}

// A standard output closed by the caller, its number reused by a pipe's
// read end: reopening that pipe for writing fed the output back into it.
TEST(OutputRelay, ADescriptorOpenOnlyForReadingIsNotWrittenTo) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  OutputRelay relay;
  relay.Write(pipe_ends[0], "lost\n");
  EXPECT_TRUE(relay.Empty());
  EXPECT_EQ(relay.DroppedBytes(), 5u);
  ::close(pipe_ends[1]);
  char buffer[8];
  EXPECT_EQ(::read(pipe_ends[0], buffer, sizeof(buffer)), 0) << "the relay holds a writer of it";
  ::close(pipe_ends[0]);
}

// Something that outlived the ranks (another session, an unkillable process)
// and writes on while the reader is stopped: the launcher's memory is bounded.
TEST(OutputRelay, WhatItHoldsIsBounded) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  OutputRelay relay;
  const std::string chunk = RelayTestLines('m', 64 * 1024);
  for (int round = 0; round < 200; ++round) relay.Write(pipe_ends[1], chunk);  // 12.5 MiB
  EXPECT_GT(relay.DroppedBytes(), 200 * chunk.size() - OutputRelay::kMostHeldBytes - (1 << 20));
  EXPECT_EQ(relay.Drain(std::chrono::steady_clock::now(), -1), OutputRelay::DrainEnd::kDeadline);
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
}

// `sray run ... | head`: what the reader did not take is dropped, later
// writes too, and the process lives on.
TEST(OutputRelay, AReaderThatIsGoneDropsTheOutput) {
  SigpipeBlockedForRelayTest blocked;
  int pipe_ends[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  ::close(pipe_ends[0]);
  OutputRelay relay;
  EXPECT_FALSE(relay.ReaderGone());
  relay.Write(pipe_ends[1], "first\n");
  relay.Write(pipe_ends[1], "second\n");
  EXPECT_TRUE(relay.Empty());
  EXPECT_EQ(relay.DroppedBytes(), 13u);
  EXPECT_TRUE(relay.ReaderGone()) << "what ends the job as SIGPIPE ends a pipeline's writer";
  ::close(pipe_ends[1]);
}

// A second Ctrl-C while the launcher waits for a stopped reader at the end.
TEST(OutputRelay, ADrainEndsWhenItsStopDescriptorIsReadable) {
  int pipe_ends[2];
  int stop[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(stop, O_CLOEXEC), 0);
  OutputRelay relay;
  relay.Write(pipe_ends[1], RelayTestLines('d', OutputRelay::kFullBytes));
  std::thread interrupt([&] {
    std::this_thread::sleep_for(100ms);
    ASSERT_EQ(::write(stop[1], "x", 1), 1);
  });
  EXPECT_EQ(relay.Drain(std::nullopt, stop[0]), OutputRelay::DrainEnd::kStopReadable);
  interrupt.join();
  EXPECT_TRUE(relay.Empty());
  EXPECT_GT(relay.DroppedBytes(), 0u);
  for (int descriptor : {pipe_ends[0], pipe_ends[1], stop[0], stop[1]}) ::close(descriptor);
}

}  // namespace
}  // namespace sray::launcher
