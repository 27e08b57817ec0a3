#include "launcher/job_api.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  EXPECT_EQ(read({"7", "8", "9"}, {"7 NODE_FAIL", "8 COMPLETED", "9 CANCELLED"}, 0, ""),
            (States{{"7", kEnded}, {"8", kEnded}, {"9", kEnded}}))
      << "asked by id, squeue lists ended jobs until the controller forgets them";
  EXPECT_EQ(read({"7"}, {"7 COMPLETED", "7 RUNNING"}, 0, ""), (States{{"7", kRuns}}))
      << "several lines of one id: running if any runs";
}

TEST(SlurmJobState, OnlySlurmJobIdsAreAskedAbout) {
  using States = std::map<std::string, SlurmJobState>;
  EXPECT_EQ(AskSlurmAbout({"local123-4f00ba11", "", "12; rm -rf /"}),
            (States{{"local123-4f00ba11", SlurmJobState::kUnknown},
                    {"", SlurmJobState::kUnknown},
                    {"12; rm -rf /", SlurmJobState::kUnknown}}));
}

// The tools' choice of jobs on other hosts, with squeue and scontrol
// standing in on PATH (the real ones need a cluster: slurm.dashboard_under_srun).
class JobsOnOtherHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("sray-jobs-elsewhere-" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_ / "bin");
    std::filesystem::create_directories(root_ / "home" / ".sray" / "jobs");
    std::filesystem::permissions(root_ / "home" / ".sray", std::filesystem::perms::owner_all);
    std::filesystem::permissions(root_ / "home" / ".sray" / "jobs",
                                 std::filesystem::perms::owner_all);
    // squeue prints what the test says and notes each call; scontrol names
    // this cluster "here".
    Script("squeue", "echo \"$*\" >>'" + (root_ / "squeue.calls").string() + "'\ncat '" +
                         (root_ / "squeue.answer").string() + "'\nexit $(cat '" +
                         (root_ / "squeue.status").string() + "')\n");
    Script("scontrol", "echo call >>'" + (root_ / "scontrol.calls").string() +
                           "'\necho 'ClusterName             = here'\n");
    Answer("", 0);
    old_path_ = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin";
    old_home_ = std::getenv("HOME") != nullptr ? std::getenv("HOME") : "";
    ::setenv("PATH", ((root_ / "bin").string() + ":" + old_path_).c_str(), 1);
    ::setenv("HOME", (root_ / "home").c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    ::setenv("HOME", old_home_.c_str(), 1);
    std::filesystem::remove_all(root_);
  }
  void Script(const std::string& name, const std::string& body) {
    std::ofstream(root_ / "bin" / name) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(root_ / "bin" / name, std::filesystem::perms::owner_all);
  }
  void Answer(const std::string& lines, int status) {
    std::ofstream(root_ / "squeue.answer") << lines;
    std::ofstream(root_ / "squeue.status") << status << "\n";
  }
  void JobsFile(const std::string& job, const std::string& step, const std::string& cluster) {
    std::ofstream(root_ / "home" / ".sray" / "jobs" / (job + "." + step + ".json"))
        << R"({"job_id": ")" << job << R"(", "step_id": ")" << step
        << R"(", "url": "http://127.0.0.1:1/", "token": "t", "head_hostname": "other-host",)"
        << R"( "pid": 1, "cluster": ")" << cluster << R"("})";
  }
  bool Kept(const std::string& label) {
    return std::filesystem::exists(root_ / "home" / ".sray" / "jobs" / (label + ".json"));
  }
  std::vector<std::string> Calls(const std::string& program) {
    std::ifstream input(root_ / (program + ".calls"));
    std::vector<std::string> calls;
    for (std::string line; std::getline(input, line);) calls.push_back(line);
    return calls;
  }

  std::filesystem::path root_;
  std::string old_path_;
  std::string old_home_;
};

TEST_F(JobsOnOtherHosts, OneQuestionToSlurmDropsTheFilesOfEndedJobsOfThisClusterOnly) {
  JobsFile("101", "0", "here");  // running
  JobsFile("102", "0", "here");  // ended: both of its steps' files go
  JobsFile("102", "1", "here");
  JobsFile("103", "0", "elsewhere");  // "ended" here, but of another cluster
  JobsFile("104", "0", "");           // ended, no cluster recorded
  JobsFile("105", "0", "here");       // ended in a crash of its head node
  Answer("101 RUNNING\n105 NODE_FAIL\n", 0);
  int exit_code = 0;
  testing::internal::CaptureStdout();
  (void)ChooseJob("", "status", exit_code, SeveralJobs::kListAsAnswer);
  testing::internal::GetCapturedStdout();
  EXPECT_TRUE(Kept("101.0"));
  EXPECT_FALSE(Kept("102.0"));
  EXPECT_FALSE(Kept("102.1"));
  EXPECT_TRUE(Kept("103.0")) << "another cluster's job of the same number";
  EXPECT_FALSE(Kept("104.0"));
  EXPECT_FALSE(Kept("105.0"));
  const auto calls = Calls("squeue");
  ASSERT_EQ(calls.size(), 1U) << "one squeue for every job";
  // The ids in any order (the files' order), each once.
  const auto start = calls[0].find("--jobs=");
  ASSERT_NE(start, std::string::npos) << calls[0];
  std::istringstream list(calls[0].substr(start + 7, calls[0].find(' ', start) - start - 7));
  std::vector<std::string> asked;
  for (std::string job; std::getline(list, job, ',');) asked.push_back(job);
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<std::string>{"101", "102", "103", "104", "105"})) << calls[0];
  EXPECT_EQ(Calls("scontrol").size(), 1U) << "asked once for the cluster's name";
}

TEST_F(JobsOnOtherHosts, NoAnswerFromSlurmKeepsEveryFile) {
  JobsFile("101", "0", "here");
  JobsFile("102", "0", "");
  Answer("", 1);  // the controller does not answer
  int exit_code = 0;
  testing::internal::CaptureStdout();
  (void)ChooseJob("", "status", exit_code, SeveralJobs::kListAsAnswer);
  testing::internal::GetCapturedStdout();
  EXPECT_TRUE(Kept("101.0"));
  EXPECT_TRUE(Kept("102.0"));
  // An answer cut at its bound says nothing either: jobs past the cut would
  // read as ended.
  std::string many;
  for (int line = 0; line < 300000; ++line) many += "9" + std::to_string(line) + " RUNNING\n";
  Answer(many, 0);
  testing::internal::CaptureStdout();
  (void)ChooseJob("", "status", exit_code, SeveralJobs::kListAsAnswer);
  testing::internal::GetCapturedStdout();
  EXPECT_TRUE(Kept("101.0"));
  EXPECT_TRUE(Kept("102.0"));
}

TEST_F(JobsOnOtherHosts, TheCallersSqueueFiltersDoNotMakeRunningJobsLookEnded) {
  JobsFile("101", "0", "here");
  Answer("101 RUNNING\n", 0);
  // As the real squeue does: SQUEUE_STATES, SQUEUE_USERS and SLURM_CLUSTERS
  // narrow its list, and a running job left out would read as ended.
  Script("squeue", "echo \"$*\" >>'" + (root_ / "squeue.calls").string() +
                       "'\n[ -n \"$SQUEUE_STATES$SQUEUE_USERS$SLURM_CLUSTERS\" ] && exit 0\ncat '" +
                       (root_ / "squeue.answer").string() + "'\n");
  ::setenv("SQUEUE_STATES", "PENDING", 1);
  ::setenv("SQUEUE_USERS", "nobody", 1);
  ::setenv("SLURM_CLUSTERS", "elsewhere", 1);
  int exit_code = 0;
  testing::internal::CaptureStdout();
  (void)ChooseJob("", "status", exit_code, SeveralJobs::kListAsAnswer);
  testing::internal::GetCapturedStdout();
  ::unsetenv("SQUEUE_STATES");
  ::unsetenv("SQUEUE_USERS");
  ::unsetenv("SLURM_CLUSTERS");
  ASSERT_EQ(Calls("squeue").size(), 1U);
  EXPECT_TRUE(Kept("101.0")) << "a running job's file dropped under the caller's squeue filters";
}

TEST_F(JobsOnOtherHosts, ANamedJobIsAskedAboutAloneAndOnce) {
  JobsFile("101", "0", "");
  JobsFile("102", "0", "");
  Answer("", 1);
  std::ofstream(root_ / "squeue.answer") << "";
  // Asked alone, a job the controller forgot is "Invalid job id".
  Script("squeue", "echo \"$*\" >>'" + (root_ / "squeue.calls").string() +
                       "'\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n");
  int exit_code = 0;
  testing::internal::CaptureStderr();
  const auto chosen = ChooseJob("102", "status", exit_code, SeveralJobs::kListAsAnswer);
  testing::internal::GetCapturedStderr();
  EXPECT_FALSE(chosen.has_value());
  EXPECT_FALSE(Kept("102.0"));
  const auto calls = Calls("squeue");
  ASSERT_GE(calls.size(), 1U);
  EXPECT_NE(calls[0].find("--jobs=102 "), std::string::npos) << calls[0];
  for (std::size_t call = 1; call < calls.size(); ++call) {
    EXPECT_EQ(calls[call].find("102"), std::string::npos)
        << "the named job asked about again: " << calls[call];
  }
}

}  // namespace
}  // namespace sray::launcher
