#include "core/environment_check.h"

#include <gtest/gtest.h>

namespace sray::core {
namespace {

const std::string kReference =
    "# sray environment lock v1\n# sha256 aaa\n"
    "conda numpy 1.26.0 py311h_0 conda-forge linux-64 md5:11\n"
    "conda python 3.11.5 h_0 conda-forge linux-64 md5:22\n"
    "pip requests 2.31.0 - pypi - -\n";

TEST(EnvironmentCheckTest, IdenticalLocksHaveNoDifferences) {
  EXPECT_TRUE(LockDifferences(kReference, 0, kReference, 2).empty());
}

TEST(EnvironmentCheckTest, ChangedMissingAndExtraPackagesAreNamedWithTheirNodes) {
  const std::string other =
      "# sray environment lock v1\n# sha256 bbb\n"
      "conda numpy 1.26.0 py311h_1 conda-forge linux-64 md5:33\n"
      "conda python 3.11.5 h_0 conda-forge linux-64 md5:22\n"
      "conda scipy 1.11.3 h_0 conda-forge linux-64 md5:44\n";
  const auto differences = LockDifferences(kReference, 0, other, 2);
  ASSERT_EQ(differences.size(), 3u);
  EXPECT_EQ(differences[0],
            "conda numpy: 1.26.0 py311h_1 conda-forge linux-64 md5:33 on node 2, 1.26.0 py311h_0 "
            "conda-forge linux-64 md5:11 on node 0");
  EXPECT_EQ(differences[1], "pip requests: missing on node 2, 2.31.0 - pypi - - on node 0");
  EXPECT_EQ(differences[2], "conda scipy: 1.11.3 h_0 conda-forge linux-64 md5:44 on node 2, missing on node 0");
}

}  // namespace
}  // namespace sray::core
