// SIGPIPE's disposition in sray's processes: writes to a closed pipe fail,
// and the programs a process starts get the default back.

#include "common/broken_pipe.h"

#include "../runtime/sigpipe_probe.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace sray {
namespace {

using check::ChildIgnoresSigpipe;

int ErrnoOfAWriteToAClosedPipe() {
  int ends[2];
  if (::pipe(ends) != 0) return -1;
  ::close(ends[0]);
  const char byte = 'x';
  const int error = ::write(ends[1], &byte, 1) < 0 ? errno : 0;
  ::close(ends[1]);
  return error;
}

struct sigaction Current() {
  struct sigaction now {};
  (void)::sigaction(SIGPIPE, nullptr, &now);
  return now;
}

// Gives the test process its own disposition back.
class BrokenPipe : public ::testing::Test {
 protected:
  void SetUp() override { (void)::sigaction(SIGPIPE, nullptr, &original_); }
  void TearDown() override { (void)::sigaction(SIGPIPE, &original_, nullptr); }

 private:
  struct sigaction original_ {};
};

TEST_F(BrokenPipe, AWriteToAClosedPipeFailsAndStartedProgramsGetTheDefault) {
  (void)::signal(SIGPIPE, SIG_IGN);  // as a worker inherits it on node 0
  FailWritesToClosedPipes();
  EXPECT_NE(Current().sa_handler, SIG_IGN);
  EXPECT_NE(Current().sa_handler, SIG_DFL);
  EXPECT_EQ(ErrnoOfAWriteToAClosedPipe(), EPIPE);
  EXPECT_EQ(ChildIgnoresSigpipe(), 0);
}

}  // namespace
}  // namespace sray
