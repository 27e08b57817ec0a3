#include "jobsetup/options.h"

#include <gtest/gtest.h>

namespace sray::jobsetup {
namespace {

TEST(OptionList, EmptyTextMeansNoAssignments) {
  auto parsed = ParseOptionList("", "--ray-cluster");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->empty());
  auto blank = ParseOptionList("  ", "--ray-cluster");
  ASSERT_TRUE(blank.ok());
  EXPECT_TRUE(blank->empty());
}

TEST(OptionList, ParsesPairsInOrderAndTrimsSpaces) {
  auto parsed = ParseOptionList("log_level=debug, tmpdir = /scratch/local/", "--ray-cluster");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 2U);
  EXPECT_EQ((*parsed)[0].key, "log_level");
  EXPECT_EQ((*parsed)[0].value, "debug");
  EXPECT_EQ((*parsed)[1].key, "tmpdir");
  EXPECT_EQ((*parsed)[1].value, "/scratch/local");
  EXPECT_EQ((*parsed)[1].source, "--ray-cluster");
}

TEST(OptionList, UnknownKeyNamesTheKeyAndTheAcceptedOnes) {
  auto parsed = ParseOptionList("log_level=info,colour=blue", "--ray-cluster");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("unknown key 'colour'"), std::string::npos);
  EXPECT_NE(parsed.status().message().find(AcceptedKeys()), std::string::npos);
}

TEST(OptionList, RejectsEntriesWithoutEquals) {
  auto parsed = ParseOptionList("tmpdir", "--ray-cluster");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("'tmpdir' is not key=value"), std::string::npos);
}

TEST(OptionList, RejectsEmptyEntriesFromStrayCommas) {
  for (const char* text :
       {",", "log_level=info,", ",log_level=info", "log_level=info,,tmpdir=/x"}) {
    auto parsed = ParseOptionList(text, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("empty entry"), std::string::npos) << text;
  }
}

TEST(OptionList, RejectsARepeatedKey) {
  auto parsed = ParseOptionList("log_level=info,log_level=debug", "--ray-cluster");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("given twice"), std::string::npos);
}

TEST(OptionList, RejectsEmptyKeyAndEmptyValue) {
  auto no_key = ParseOptionList("=debug", "--ray-cluster");
  ASSERT_FALSE(no_key.ok());
  EXPECT_NE(no_key.status().message().find("unknown key ''"), std::string::npos);
  auto no_value = ParseOptionList("log_level=", "--ray-cluster");
  ASSERT_FALSE(no_value.ok());
  EXPECT_NE(no_value.status().message().find("empty value"), std::string::npos);
}

TEST(OptionValues, ChoiceListsTheAcceptedValues) {
  auto parsed = ParseOptionList("log_level=loud", "--ray-cluster");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("does not accept 'loud'"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("error, warning, info, debug"), std::string::npos);
}

TEST(OptionValues, ChoicesAreCaseSensitive) {
  EXPECT_FALSE(ParseOptionList("log_level=DEBUG", "--ray-cluster").ok());
}

TEST(OptionValues, PathsMustBeAbsoluteAndAreNormalised) {
  auto relative = ParseOptionList("tmpdir=scratch", "--ray-cluster");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("must be an absolute path"), std::string::npos);
  auto messy = ParseOptionList("tmpdir=/scratch//./local/../tmp/", "--ray-cluster");
  ASSERT_TRUE(messy.ok());
  EXPECT_EQ((*messy)[0].value, "/scratch/tmp");
  auto root = ParseOptionList("tmpdir=/", "--ray-cluster");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ((*root)[0].value, "/");
}

TEST(OptionValues, TheDashboardListensOnHostAndPortOrIsOff) {
  for (const std::string good : {"127.0.0.1:0", "0.0.0.0:8265", "off", "n1:65535"}) {
    auto parsed = ParseOptionList("dashboard=" + good, "--ray-cluster");
    ASSERT_TRUE(parsed.ok()) << good << ": " << parsed.status().message();
    EXPECT_EQ((*parsed)[0].value, good);
  }
  for (const std::string bad : {"8265", ":80", "n1:70000", "n1:http", "on"}) {
    auto parsed = ParseOptionList("dashboard=" + bad, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("needs HOST:PORT (port 0 for any free one) or off"),
              std::string::npos)
        << parsed.status().message();
  }
}

TEST(OptionValues, RejectsNulBytes) {
  const std::string text("tmpdir=/tmp\0x", 13);
  EXPECT_FALSE(ParseOptionList(text, "--ray-cluster").ok());
}

TEST(OptionSchema, EveryKeyIsFoundAndExported) {
  for (const auto& spec : OptionSchema()) {
    EXPECT_EQ(FindOption(spec.key), &spec);
    EXPECT_TRUE(spec.environment_variable.starts_with("SRAY_")) << spec.key;
    EXPECT_FALSE(spec.help.empty()) << spec.key;
  }
  EXPECT_EQ(FindOption("nope"), nullptr);
}

}  // namespace
}  // namespace sray::jobsetup

namespace sray::jobsetup {
namespace {

TEST(Options, ObjectStoreMemoryTakesSizesWithSuffixes) {
  auto parsed = ParseOptionList("object_store_memory=512M", "--ray-cluster");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->front().value, "536870912");
  auto bad = ParseOptionList("object_store_memory=lots", "--ray-cluster");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("like 512M or 2G"), std::string::npos);
}

// Before: accepted here, then every rank aborted as it sized its store.
TEST(Options, ObjectStoreMemoryBelowTheStoresMinimumIsRefused) {
  for (const char* size : {"1", "15M"}) {
    auto parsed = ParseOptionList(std::string("object_store_memory=") + size, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << size;
    EXPECT_NE(parsed.status().message().find("below the object store's minimum of 16 MiB"),
              std::string::npos)
        << parsed.status().message();
  }
  EXPECT_TRUE(ParseOptionList("object_store_memory=16M", "--ray-cluster").ok());
}

// Before: 17179869185G wrapped to 1 GiB and was accepted; 16777216T to 0.
TEST(Options, ASizeBeyondSixtyFourBitsIsRefusedRatherThanWrapped) {
  // And a number of more digits than 64 bits hold, which read as "not a
  // positive size".
  for (const char* size :
       {"17179869185G", "16777216T", "18446744073709551615K", "99999999999999999999999"}) {
    auto parsed = ParseOptionList(std::string("object_store_memory=") + size, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << size << " became " << parsed->front().value;
    EXPECT_NE(parsed.status().message().find("more bytes than a 64-bit size holds"),
              std::string::npos)
        << parsed.status().message();
  }
}

// Before: any 64-bit number passed, and the runtime's clock comparison
// overflowed on it, declaring every node lost at once.
TEST(Options, NodeTimeoutAboveAYearIsRefusedWithItsLargestValue) {
  auto longest = ParseOptionList("node_timeout=31536000", "--ray-cluster");
  ASSERT_TRUE(longest.ok()) << longest.status().message();
  for (const char* seconds : {"31536001", "9999999999", "18446744073709551615"}) {
    auto parsed = ParseOptionList(std::string("node_timeout=") + seconds, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << seconds;
    EXPECT_NE(parsed.status().message().find("above its largest value 31536000"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(Options, MaxTasksInFlightIsAWholeNumberAndZeroMeansNoLimit) {
  for (const auto& [text, canonical] : {std::pair{"0", "0"}, std::pair{"250000", "250000"}}) {
    auto parsed = ParseOptionList(std::string("max_tasks_in_flight=") + text, "--ray-cluster");
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->front().value, canonical);
  }
  for (const char* text : {"-1", "many", "10k", "1 000", "99999999999999999999999"}) {
    auto parsed = ParseOptionList(std::string("max_tasks_in_flight=") + text, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("needs a whole number (0 for no limit)"),
              std::string::npos)
        << parsed.status().message();
  }
}

TEST(Options, ResourcesCannotSetWhatTheAllocationGives) {
  for (const char* list : {"CPU:0", "GPU:1;CPU:8", "memory:1"}) {
    auto parsed = ParseOptionList(std::string("resources=") + list, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << list;
    EXPECT_NE(parsed.status().message().find("comes from the allocation"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(Options, ResourcesAreCheckedAndCanonical) {
  auto parsed = ParseOptionList("resources= ssd:1 ;GPU:2", "--ray-cluster");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->front().value, "GPU:2;ssd:1");
  EXPECT_FALSE(ParseOptionList("resources=GPU", "--ray-cluster").ok());
}

// Found by tests/fuzz/options_fuzzer: "resources=;" passed, canonical "",
// which no later reader accepts.
TEST(Options, AResourceListNamingNoResourceIsRefused) {
  for (const char* list : {";", " ; ;"}) {
    auto parsed = ParseOptionList(std::string("resources=") + list, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << list;
    EXPECT_NE(parsed.status().message().find("names no resource"), std::string::npos)
        << parsed.status().message();
  }
}

// Found by tests/fuzz/options_fuzzer: "env=/home/x\n/" was accepted as
// "/home/x\n", which the next reader trimmed to another path.
TEST(Options, ControlCharactersInAValueAreRefused) {
  for (const char* list : {"env=/home/x\n/", "log_dir=/tmp/a\tb", "log_level=de\x01bug"}) {
    auto parsed = ParseOptionList(list, "--ray-cluster");
    ASSERT_FALSE(parsed.ok()) << list;
    EXPECT_NE(parsed.status().message().find("contains a control character (byte 0x"),
              std::string::npos)
        << parsed.status().message();
  }
}

// Found by tests/fuzz/options_fuzzer: "///" became "//", and "//" became "/".
TEST(Options, APathOfSlashesOnlyIsTheRoot) {
  for (const char* value : {"/", "//", "///", "////"}) {
    auto parsed = ParseOptionList(std::string("log_dir=") + value, "--ray-cluster");
    ASSERT_TRUE(parsed.ok()) << value;
    EXPECT_EQ(parsed->front().value, "/") << value;
  }
}

// The canonical spelling kept six digits (GPU:0.333333 for GPU:0.3333333333):
// each amount now keeps all of its digits, and reads back as itself.
TEST(Options, ResourceAmountsKeepEveryDigit) {
  auto parsed =
      ParseOptionList("resources=GPU:0.3333333333;ssd:1e-7;disk:12345678.5", "--ray-cluster");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->front().value, "GPU:0.3333333333;disk:12345678.5;ssd:1e-07");
  auto again = ParseOptionList("resources=" + parsed->front().value, "--ray-cluster");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->front().value, parsed->front().value);
}

}  // namespace
}  // namespace sray::jobsetup
