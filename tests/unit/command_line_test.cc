#include "command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sray::launcher {
namespace {

using Words = std::vector<std::string>;

// `sray run -N2 -- PROGRAM` as srun takes it; before, CLI11 took the `--`
// for its own and refused PROGRAM as an unexpected argument.
TEST(RunSeparator, TheDashesBeforeTheProgramGoAndThoseAfterItStay) {
  EXPECT_EQ(WithoutRunSeparator({"run", "-N2", "--", "prog", "--", "x"}),
            (Words{"run", "-N2", "prog", "--", "x"}));
  EXPECT_EQ(WithoutRunSeparator({"run", "-N", "2", "-l", "--ray-cluster", "a=b", "--", "prog"}),
            (Words{"run", "-N", "2", "-l", "--ray-cluster", "a=b", "prog"}));
  EXPECT_EQ(WithoutRunSeparator({"run", "--nodes=3", "--", "prog"}),
            (Words{"run", "--nodes=3", "prog"}));
  EXPECT_EQ(WithoutRunSeparator({"run", "prog", "--", "x"}), (Words{"run", "prog", "--", "x"}))
      << "after PROGRAM the dashes are the program's";
  EXPECT_EQ(WithoutRunSeparator({"run", "--ray-cluster", "--", "prog"}),
            (Words{"run", "--ray-cluster", "--", "prog"}))
      << "an option's value, not the separator";
  EXPECT_EQ(WithoutRunSeparator({"status", "--", "x"}), (Words{"status", "--", "x"}));
  EXPECT_EQ(WithoutRunSeparator({"logs", "--actor", "run", "--", "x"}),
            (Words{"logs", "--actor", "run", "--", "x"}))
      << "a word `run` that is not the command";
}

// CLI11's Range said "Value -1 not in range 0.000000 to 1797...(309 digits)".
TEST(WholeNumbers, SayWhatTheyWantInWords) {
  const CLI::Validator nodes = WholeNumberFrom(1, 1024);
  std::string value = "12";
  EXPECT_EQ(nodes(value), "");
  for (const char* bad : {"0", "1025", "-1", "abc", "2.5", "", "99999999999999999999999"}) {
    value = bad;
    EXPECT_NE(nodes(value).find("not a whole number from 1 to 1024"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace sray::launcher
