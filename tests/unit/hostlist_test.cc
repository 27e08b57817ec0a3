#include "jobsetup/hostlist.h"

#include <gtest/gtest.h>

namespace sray::jobsetup {
namespace {

std::vector<std::string> Expand(std::string_view text) {
  auto names = ExpandHostlist(text);
  EXPECT_TRUE(names.ok()) << names.status().message();
  return names.ok() ? *names : std::vector<std::string>{};
}

TEST(Hostlist, PlainNamesPassThrough) {
  EXPECT_EQ(Expand("login"), (std::vector<std::string>{"login"}));
  EXPECT_EQ(Expand("a,b,c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Hostlist, ExpandsRangesAndLists) {
  EXPECT_EQ(Expand("n[1-3]"), (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(Expand("n[1,3,5-6]"), (std::vector<std::string>{"n1", "n3", "n5", "n6"}));
  EXPECT_EQ(Expand("n[9-10]"), (std::vector<std::string>{"n9", "n10"}));
}

TEST(Hostlist, KeepsZeroPaddingAndSuffixes) {
  EXPECT_EQ(Expand("gpu[08-10]-ib"),
            (std::vector<std::string>{"gpu08-ib", "gpu09-ib", "gpu10-ib"}));
}

TEST(Hostlist, MixesGroupsAndPlainNamesInOrder) {
  EXPECT_EQ(Expand("head,n[2-3],x[1]"), (std::vector<std::string>{"head", "n2", "n3", "x1"}));
}

TEST(Hostlist, ExpandsSeveralBracketsAsAProduct) {
  EXPECT_EQ(Expand("r[1-2]n[1-2]"), (std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"}));
}

TEST(Hostlist, RejectsMalformedExpressions) {
  for (const char* bad : {"", "n[1-3", "n1-3]", "n[]", "n[a-b]", "n[3-1]", "n[[1]]", "a,,b", ",a",
                          "n[1-]", "n[-2]"}) {
    auto names = ExpandHostlist(bad);
    ASSERT_FALSE(names.ok()) << "accepted '" << bad << "'";
    EXPECT_NE(names.status().message().find("malformed hostlist"), std::string::npos);
  }
}

TEST(Hostlist, RefusesHugeExpansions) {
  auto names = ExpandHostlist("n[1-99999999]");
  ASSERT_FALSE(names.ok());
  EXPECT_NE(names.status().message().find("too large"), std::string::npos);
}

}  // namespace
}  // namespace sray::jobsetup
