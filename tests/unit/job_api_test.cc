#include "launcher/job_api.h"

#include <gtest/gtest.h>

#include "common/host_name.h"
#include "dashboard/dashboard_address.h"
#include "launcher/slurm_job_state.h"

namespace sray::launcher {
namespace {

dashboard::JobsFileContent JobAt(const std::string& url, const std::string& head,
                                 const std::string& local_url = "") {
  return {.job_id = "7",
          .step_id = "0",
          .url = url,
          .local_url = local_url,
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
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://:8265/", "head-n7")), "http://head-n7:8265")
      << "an empty host is a wildcard too";
}

// One reader for every address the driver writes: the tools' base address,
// the loopback test and the ssh hints read the same way.
TEST(DashboardAddress, ReadsTheHostAsWrittenAndAPortInRange) {
  const auto read = [](const std::string& url) {
    const auto address = dashboard::ParseDashboardUrl(url);
    return address ? address->host + " " + std::to_string(address->port) : std::string("none");
  };
  EXPECT_EQ(read("http://n1:8265/"), "n1 8265");
  EXPECT_EQ(read("http://[::1]:8265/api/nodes"), "[::1] 8265");
  EXPECT_EQ(read("http://:::8265/"), ":: 8265");
  EXPECT_EQ(read("http://:8265"), " 8265");
  EXPECT_EQ(read("http://[::1]/"), "none") << "no port";
  EXPECT_EQ(read("http://n1:/"), "none");
  EXPECT_EQ(read("http://n1:99999/"), "none");
  EXPECT_EQ(read("http://n1:82a5/"), "none");
  EXPECT_EQ(read("https://n1:8265/"), "none");
  EXPECT_EQ(read("n1:8265"), "none");
}

TEST(DashboardAddress, TheSshTunnelEndsAtTheDashboardAsItsHeadReachesIt) {
  EXPECT_EQ(dashboard::SshTunnelCommand("http://127.0.0.1:8265/", "n7"),
            "ssh -L 8265:127.0.0.1:8265 n7");
  EXPECT_EQ(dashboard::SshTunnelCommand(dashboard::DashboardLocalUrl("::", 8265), "n7"),
            "ssh -L 8265:[::1]:8265 n7")
      << "an IPv6 address in brackets, as ssh reads it (it printed 8265:::::8265)";
  EXPECT_EQ(dashboard::SshTunnelCommand("http://0.0.0.0:8265/", "n7"), "");
  EXPECT_EQ(dashboard::SshTunnelCommand("not a url", "n7"), "");
}

TEST(JobApi, OnlyALoopbackDashboardOnAnotherHostIsElsewhere) {
  EXPECT_TRUE(DashboardIsElsewhere(JobAt("http://127.0.0.1:8265/", "head-n7")));
  EXPECT_TRUE(DashboardIsElsewhere(JobAt("http://[::1]:8265/", "head-n7")));
  EXPECT_TRUE(DashboardIsElsewhere(JobAt("http://localhost:8265/", "head-n7")));
  EXPECT_FALSE(DashboardIsElsewhere(JobAt("http://127.0.0.1:8265/", HostName())));
  EXPECT_FALSE(DashboardIsElsewhere(JobAt("http://head-n7:8265/", "head-n7")));
  EXPECT_FALSE(DashboardIsElsewhere(JobAt("http://127.example.org:8265/", "head-n7")))
      << "a name that starts like a loopback address is not one";
}

TEST(JobApi, OtherAddressesAreUsedAsTheyAreWithoutCuttingThePort) {
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://127.0.0.1:5/", "n1")), "http://127.0.0.1:5");
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://n3:8265/", "n3")), "http://n3:8265");
  // Hand-edited, without the slash: the last character was cut (a port digit).
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://127.0.0.1:8265", "n1")), "http://127.0.0.1:8265");
}

// On a head whose own name does not resolve, the tools there failed to
// reach a dashboard on every interface: the url names the machine.
TEST(JobApi, TheHeadReachesItsDashboardAtTheLocalAddressOtherMachinesAtTheUrl) {
  const auto job = [](const std::string& head) {
    return JobAt("http://unresolvable-n7:8265/", head, "http://127.0.0.1:8265/");
  };
  EXPECT_EQ(DashboardBaseUrl(job(HostName())), "http://127.0.0.1:8265");
  EXPECT_EQ(DashboardBaseUrl(job("unresolvable-n7")), "http://unresolvable-n7:8265");
  EXPECT_EQ(DashboardBaseUrl(JobAt("http://n7:8265/", HostName())), "http://n7:8265")
      << "a file without local_url (an older driver's) keeps its url";
}

TEST(JobApi, TheLocalAddressOfAWildcardIsTheLoopbackOfItsFamily) {
  EXPECT_EQ(dashboard::DashboardLocalUrl("0.0.0.0", 8265), "http://127.0.0.1:8265/");
  EXPECT_EQ(dashboard::DashboardLocalUrl("", 8265), "http://127.0.0.1:8265/");
  EXPECT_EQ(dashboard::DashboardLocalUrl("::", 8265), "http://[::1]:8265/");
  EXPECT_EQ(dashboard::DashboardLocalUrl("[::]", 8265), "http://[::1]:8265/");
  EXPECT_EQ(dashboard::DashboardLocalUrl("10.1.2.3", 8265), "http://10.1.2.3:8265/");
  EXPECT_EQ(dashboard::DashboardLocalUrl("fe80::1", 8265), "http://[fe80::1]:8265/");
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
TEST(SlurmJobState, SqueueAnswersTellRunningJobsFromEndedOnes) {
  using enum SlurmJobState;
  const auto read = [](const std::vector<std::string>& asked, const std::vector<std::string>& lines,
                       int status, std::string_view errors) {
    return ReadSqueueAnswer(asked, lines, status, errors);
  };
  using States = std::map<std::string, SlurmJobState>;
  EXPECT_EQ(read({"7"}, {"7 RUNNING"}, 0, ""), (States{{"7", kRuns}}));
  EXPECT_EQ(read({"7", "8", "9"}, {"7 PENDING", "9 COMPLETING"}, 0, ""),
            (States{{"7", kRuns}, {"8", kEnded}, {"9", kRuns}}))
      << "a job not listed has finished; the listed ones run, whatever their state";
  EXPECT_EQ(read({"7"}, {}, 0, ""), (States{{"7", kEnded}}));
  EXPECT_EQ(read({"7"}, {}, 1, "slurm_load_jobs error: Invalid job id specified\n"),
            (States{{"7", kEnded}}))
      << "asked alone, a job forgotten after MinJobAge is an error";
  EXPECT_EQ(read({"7", "8"}, {}, 1, "slurm_load_jobs error: Invalid job id specified\n"),
            (States{{"7", kUnknown}, {"8", kUnknown}}))
      << "asked together, squeue lists what it knows; an error then says nothing of either";
  EXPECT_EQ(read({"7"}, {}, 1,
                 "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"),
            (States{{"7", kUnknown}}))
      << "a controller that does not answer says nothing about the job";
  EXPECT_EQ(read({"7"}, {"77 RUNNING", "garbage"}, 0, ""), (States{{"7", kEnded}}))
      << "only the job's own line counts";
}

TEST(SlurmJobState, OnlySlurmJobIdsAreAskedAbout) {
  using States = std::map<std::string, SlurmJobState>;
  EXPECT_EQ(AskSlurmAbout({"local123-4f00ba11", "", "12; rm -rf /"}),
            (States{{"local123-4f00ba11", SlurmJobState::kUnknown},
                    {"", SlurmJobState::kUnknown},
                    {"12; rm -rf /", SlurmJobState::kUnknown}}));
}

}  // namespace
}  // namespace sray::launcher
