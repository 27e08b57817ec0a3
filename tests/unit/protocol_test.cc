#include "core/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sray/internal/serialization.h"

namespace sray::core {
namespace {

std::vector<std::byte> BytesOf(std::initializer_list<unsigned> values) {
  std::vector<std::byte> bytes;
  for (const unsigned value : values) bytes.push_back(static_cast<std::byte>(value));
  return bytes;
}

// Found by tests/fuzz/control_message_fuzzer: five bytes claiming a map of
// a billion entries made msgpack reserve 32 GiB before it read any entry.
TEST(ControlMessages, AMapOrArrayLargerThanItsBytesIsRefusedBeforeAnythingIsReserved) {
  auto map = Decode<ActorKill>(BytesOf({0xdf, 0x3f, 0x3f, 0x3f, 0x3f}), "actor kill");
  ASSERT_FALSE(map.ok());
  EXPECT_NE(map.status().message().find("malformed actor kill message: map size overflow"),
            std::string::npos)
      << map.status().message();
  auto array = Decode<TaskSpec>(BytesOf({0xdd, 0xff, 0xff, 0xff, 0xff}), "task");
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("array size overflow"), std::string::npos)
      << array.status().message();
  // A string is copied only once all its bytes are there.
  auto text = Decode<WorkerLogsRequest>(BytesOf({0xdb, 0x7f, 0xff, 0xff, 0xff}), "logs request");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("malformed logs request message"), std::string::npos)
      << text.status().message();
}

TEST(ControlMessages, NestingDeeperThanAnyMessageIsRefused) {
  std::vector<std::byte> nested(40, std::byte{0x91});  // [[[[...]]]]
  nested.push_back(std::byte{0x00});
  auto decoded = Decode<ActorKill>(nested, "actor kill");
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("depth size overflow"), std::string::npos)
      << decoded.status().message();
}

TEST(ControlMessages, RealMessagesStillDecode) {
  TaskSpec spec;
  spec.function = "square";
  spec.resources = {{"CPU", 1.0}};
  spec.arguments.resize(3);
  auto decoded = Decode<TaskSpec>(Encode(spec), "task");
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->function, "square");
  EXPECT_EQ(decoded->arguments.size(), 3U);
}

TEST(UserValues, AnArrayLargerThanItsBytesIsASerializationError) {
  const std::string bytes("\xdd\xff\xff\xff\xff", 5);
  try {
    (void)internal::Deserialize<std::vector<int>>(bytes, "a result");
    FAIL() << "no error";
  } catch (const SerializationError& error) {
    EXPECT_NE(std::string(error.what()).find("array size overflow"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace sray::core
