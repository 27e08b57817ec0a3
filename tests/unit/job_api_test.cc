#include "launcher/job_api.h"

#include <gtest/gtest.h>

#include "common/host_name.h"
#include "dashboard/dashboard_server.h"
#include "launcher/slurm_job_state.h"

namespace sray::launcher {
namespace {

dashboard::JobsFileContent JobAt(const std::string& url, const std::string& head) {
  return {.job_id = "7",
          .step_id = "0",
          .url = url,
          .token = "t",
          .head_hostname = head,
          .pid = 1,
          .cluster = ""};
}

// dashboard=0.0.0.0:P: the jobs file said http://0.0.0.0:P/, which on a
// login node is the login node itself: the tools sent the job's token to
// whoever listened on that port there.
TEST(JobApi, AWildcardAddressIsReachedAtTheHeadNotThisMachine) {
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://0.0.0.0:8265/", "head-n7")), "http://head-n7:8265");
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://[::]:8265/", "head-n7")), "http://head-n7:8265");
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://:::8265/", "head-n7")), "http://head-n7:8265");
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://0.0.0.0:8265/", HostName())), "http://127.0.0.1:8265");
}

TEST(JobApi, OtherAddressesAreUsedAsTheyAreWithoutCuttingThePort) {
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://127.0.0.1:5/", "n1")), "http://127.0.0.1:5");
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://n3:8265/", "n3")), "http://n3:8265");
  // Hand-edited, without the slash: the last character was cut (a port digit).
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://127.0.0.1:8265", "n1")), "http://127.0.0.1:8265");
}

// What the driver writes in the jobs file and prints: a wildcard address
// names the machine, an IPv6 one is bracketed.
TEST(JobApi, TheDriverNamesTheMachineForADashboardOnEveryInterface) {
  EXPECT_EQ(dashboard::DashboardUrl("0.0.0.0", 8265, "n1"), "http://n1:8265/");
  EXPECT_EQ(dashboard::DashboardUrl("::", 8265, "n1"), "http://n1:8265/");
  EXPECT_EQ(dashboard::DashboardUrl("::1", 8265, "n1"), "http://[::1]:8265/");
  EXPECT_EQ(dashboard::DashboardUrl("127.0.0.1", 8265, "n1"), "http://127.0.0.1:8265/");
}

// A jobs file outlives its job when the head node crashed; only Slurm's
// answer may remove it, and only a sure one.
TEST(SlurmJobState, SqueueAnswersTellARunningJobFromAnEndedOne) {
  EXPECT_EQ(ReadSqueueAnswer({"RUNNING"}, 0, ""), SlurmJobState::kRuns);
  EXPECT_EQ(ReadSqueueAnswer({"PENDING"}, 0, ""), SlurmJobState::kRuns);
  EXPECT_EQ(ReadSqueueAnswer({"COMPLETING"}, 0, ""), SlurmJobState::kRuns);
  EXPECT_EQ(ReadSqueueAnswer({}, 0, ""), SlurmJobState::kEnded) << "finished: no longer listed";
  EXPECT_EQ(ReadSqueueAnswer({}, 1, "slurm_load_jobs error: Invalid job id specified\n"),
            SlurmJobState::kEnded)
      << "forgotten after MinJobAge";
  EXPECT_EQ(ReadSqueueAnswer({}, 1,
                             "slurm_load_jobs error: Unable to contact slurm controller (connect "
                             "failure)\n"),
            SlurmJobState::kUnknown)
      << "a controller that does not answer says nothing about the job";
}

TEST(SlurmJobState, OnlySlurmJobIdsAreAskedAbout) {
  EXPECT_EQ(AskSlurmAbout("local123-4f00ba11", ""), SlurmJobState::kUnknown);
  EXPECT_EQ(AskSlurmAbout("", ""), SlurmJobState::kUnknown);
  EXPECT_EQ(AskSlurmAbout("12; rm -rf /", ""), SlurmJobState::kUnknown);
}

}  // namespace
}  // namespace sray::launcher
