#include "transport/long_operations.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>

namespace sray::transport {
namespace {

using std::chrono::microseconds;
using std::chrono::seconds;

TEST(LongOperations, AWaiterReturnsAtOnceWhenNoneRuns) {
  LongOperations operations;
  EXPECT_FALSE(operations.any());
  EXPECT_TRUE(operations.WaitUntilNone(seconds(10)));
}

TEST(LongOperations, AWaiterWaitsForTheLastOperationAndNoLonger) {
  LongOperations operations;
  std::optional<LongOperations::Scope> first(std::in_place, operations);
  std::optional<LongOperations::Scope> second(std::in_place, operations);
  EXPECT_TRUE(operations.any());
  EXPECT_FALSE(operations.WaitUntilNone(microseconds(1000))) << "gives up at its limit";

  const auto started = std::chrono::steady_clock::now();
  auto waited = std::async(std::launch::async, [&] {
    return operations.WaitUntilNone(std::chrono::duration_cast<microseconds>(seconds(30)));
  });
  first.reset();
  EXPECT_EQ(waited.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "one operation still runs";
  second.reset();
  EXPECT_TRUE(waited.get());
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(10))
      << "woken by the end, not by its limit";
  EXPECT_FALSE(operations.any());
}

}  // namespace
}  // namespace sray::transport
