#include "jobsetup/node_setup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <optional>

#include "jobsetup/node_shared_memory.h"
#include "test_files.h"

namespace sray::jobsetup {
namespace {

using sray::testing::ScratchDirectory;

// PrepareNode makes a directory in the real /dev/shm named after the job: a
// job id of this process's own keeps it off a real job's (a numeric id could
// be the test cluster's).
const std::string& TestJobId() {
  static const std::string id = "unit" + std::to_string(getpid());
  return id;
}

NodeSetupRequest RequestFor(const std::filesystem::path& tmpdir, std::uint32_t node_id,
                            const std::string& more_options = "") {
  auto options = ResolveOptions(
      {.admin_config = std::nullopt, .option_list = "tmpdir=" + tmpdir.string() + more_options});
  EXPECT_TRUE(options.ok());
  return {.job_id = TestJobId(),
          .step_id = "0",
          .node_id = node_id,
          .num_nodes = 3,
          .node_cpus = 4,
          .node_memory_bytes = std::uint64_t{8} << 30,
          .head_host = "n1",
          .uid = geteuid(),
          .options = *options,
          .session_directory_per_node = false,
          .nodes_on_this_machine = 1,
          .task_variable = {},
          .progress = {},
          .interrupted = {},
          .created = {}};
}

std::function<const char*(const char*)> LookupIn(const EnvironmentVariables& variables,
                                                 std::map<std::string, std::string>& storage) {
  for (const auto& [name, value] : variables) storage[name] = value;
  return [&storage](const char* name) -> const char* {
    const auto found = storage.find(name);
    return found == storage.end() ? nullptr : found->second.c_str();
  };
}

TEST(NodeSetup, NodeZeroIsTheHeadAndOthersAreWorkers) {
  EXPECT_EQ(RoleForNode(0), "head");
  EXPECT_EQ(RoleForNode(1), "worker");
  EXPECT_EQ(RoleForNode(2), "worker");
}

TEST(NodeSetup, PreparesSessionDirectoryAndEnvironment) {
  ScratchDirectory scratch;
  auto setup = PrepareNode(RequestFor(scratch.path(), 1));
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  EXPECT_TRUE(std::filesystem::is_directory(setup->session_directory));
  EXPECT_EQ(setup->session_directory.parent_path(), scratch.path());
  EXPECT_EQ(setup->environment.role, "worker");

  std::map<std::string, std::string> storage;
  const auto lookup = LookupIn(ToEnvironmentVariables(setup->environment), storage);
  EXPECT_STREQ(lookup("SRAY_ROLE"), "worker");
  EXPECT_STREQ(lookup("SRAY_NODE_ID"), "1");
  EXPECT_STREQ(lookup("SRAY_NUM_NODES"), "3");
  EXPECT_STREQ(lookup("SRAY_HEAD_HOST"), "n1");
  EXPECT_EQ(lookup("SRAY_JOB_ID"), TestJobId());
  EXPECT_STREQ(lookup("SRAY_STEP_ID"), "0");
  EXPECT_STREQ(lookup("SRAY_NODE_CPUS"), "4");
  EXPECT_EQ(lookup("SRAY_SESSION_DIR"), setup->session_directory.string());
  EXPECT_EQ(lookup("SRAY_TMPDIR"), scratch.path().string());
  EXPECT_STREQ(lookup("SRAY_LOG_LEVEL"), "info");

  ASSERT_TRUE(TeardownNode(*setup).ok());
  EXPECT_FALSE(std::filesystem::exists(setup->session_directory));
  EXPECT_TRUE(TeardownNode(*setup).ok());
}

TEST(NodeSetup, EmulatedNodesGetTheirOwnSessionDirectories) {
  ScratchDirectory scratch;
  auto first = RequestFor(scratch.path(), 0);
  auto second = RequestFor(scratch.path(), 1);
  first.session_directory_per_node = second.session_directory_per_node = true;
  auto head = PrepareNode(first);
  auto worker = PrepareNode(second);
  ASSERT_TRUE(head.ok() && worker.ok());
  EXPECT_NE(head->session_directory, worker->session_directory);
  EXPECT_TRUE(TeardownNode(*head).ok());
  EXPECT_TRUE(TeardownNode(*worker).ok());
}

std::filesystem::path SharedMemoryPath(const std::string& name) {
  return std::filesystem::path(kSharedMemoryDirectory) / name;
}

// UCX's InfiniBand and RDMA-CM modules are left unloaded only where the
// node has no RDMA device for them; a user's own UCX_MODULES wins (the front
// ends export these defaults without overwriting).
TEST(NodeSetup, LeavesUcxRdmaModulesUnloadedOnlyOnANodeWithoutRdmaDevices) {
  ScratchDirectory scratch;
  auto setup = PrepareNode(RequestFor(scratch.path(), 1));
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  const auto modules = [&](const std::filesystem::path& devices) -> std::optional<std::string> {
    for (const auto& [name, value] : TransportEnvironmentDefaults(setup->environment, devices)) {
      if (name == "UCX_MODULES") return value;
    }
    return std::nullopt;
  };
  const auto devices = scratch.path() / "infiniband";
  EXPECT_EQ(modules(devices), "^ib,rdmacm") << "no such directory: no RDMA devices";
  std::filesystem::create_directory(devices);
  EXPECT_EQ(modules(devices), "^ib,rdmacm") << "an empty class directory";
  std::filesystem::create_directory(devices / "mlx5_0");
  EXPECT_EQ(modules(devices), std::nullopt) << "a device: UCX loads every module";
  ASSERT_TRUE(TeardownNode(*setup).ok());
}

TEST(NodeSetup, GivesUcxAPrivateDirectoryInDevShmThatTeardownRemoves) {
  ScratchDirectory scratch;
  auto setup = PrepareNode(RequestFor(scratch.path(), 1));
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  const std::string prefix = NodeSharedMemoryPrefix(TestJobId(), "0", 1);
  const auto ucx = SharedMemoryPath(prefix + ".ucx");
  struct stat info {};
  ASSERT_EQ(::lstat(ucx.c_str(), &info), 0) << ucx;
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_mode & 07777, 0700U);
  std::map<std::string, std::string> storage;
  const auto lookup = LookupIn(TransportEnvironmentDefaults(setup->environment), storage);
  EXPECT_EQ(lookup("UCX_POSIX_DIR"), ucx.string());

  // What processes killed mid-step leave: objects, a recycled file, UCX's
  // segments; other nodes' and other jobs' entries must survive.
  for (const auto& name :
       {prefix + ".0a1b", prefix + ".recycled.3", prefix + ".ucx/ucx_shm_posix_1"}) {
    std::ofstream(SharedMemoryPath(name)) << "x";
  }
  const std::string others[] = {NodeSharedMemoryPrefix(TestJobId(), "0", 10) + ".0a1b",
                                NodeSharedMemoryPrefix(TestJobId() + "1", "0", 1) + ".0a1b",
                                NodeSharedMemoryPrefix(TestJobId(), "01", 1) + ".0a1b"};
  for (const auto& name : others) std::ofstream(SharedMemoryPath(name)) << "x";

  ASSERT_TRUE(TeardownNode(*setup).ok());
  for (const auto& entry : std::filesystem::directory_iterator(kSharedMemoryDirectory)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(prefix + "."))
        << entry.path() << " outlived the step";
  }
  for (const auto& name : others) {
    EXPECT_TRUE(std::filesystem::exists(SharedMemoryPath(name))) << name << " was not the step's";
    std::filesystem::remove(SharedMemoryPath(name));
  }
}

TEST(NodeSetup, TeardownLeavesAnotherUsersEntryUnderTheStepsNameAndSucceeds) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to plant a file of another user";
  ScratchDirectory scratch;
  auto setup = PrepareNode(RequestFor(scratch.path(), 1));
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  const auto planted = SharedMemoryPath(NodeSharedMemoryPrefix(TestJobId(), "0", 1) + ".planted");
  std::ofstream(planted) << "x";
  ASSERT_EQ(::chown(planted.c_str(), 65534, 65534), 0);
  const Status torn_down = TeardownNode(*setup);
  const bool kept = std::filesystem::exists(planted);
  std::filesystem::remove(planted);
  EXPECT_TRUE(torn_down.ok()) << torn_down.message();
  EXPECT_TRUE(kept);
}

TEST(NodeSetup, RefusesAUcxDirectoryThatSomeoneElsePlanted) {
  ScratchDirectory scratch;
  const auto ucx = SharedMemoryPath(NodeSharedMemoryPrefix(TestJobId(), "0", 2) + ".ucx");
  ASSERT_TRUE(std::filesystem::create_directory(ucx));
  ::chmod(ucx.c_str(), 0777);
  auto setup = PrepareNode(RequestFor(scratch.path(), 2));
  std::filesystem::remove(ucx);
  ASSERT_FALSE(setup.ok());
  EXPECT_NE(setup.status().message().find("refusing to use it"), std::string::npos)
      << setup.status().message();
  EXPECT_TRUE(std::filesystem::is_empty(scratch.path())) << "the session directory stayed";
}

TEST(NodeSetup, AnObjectStoreThatCannotFitFailsBeforeAnyTaskStarts) {
  ScratchDirectory scratch;
  auto too_big = PrepareNode(RequestFor(scratch.path(), 0, ",object_store_memory=1000T"));
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("does not fit in /dev/shm"), std::string::npos)
      << too_big.status().message();
  // A thousand emulated nodes on one machine: each default share is too small.
  auto crowded = RequestFor(scratch.path(), 0);
  crowded.nodes_on_this_machine = 1000000;
  auto shared = PrepareNode(crowded);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("below its minimum"), std::string::npos)
      << shared.status().message();
  EXPECT_TRUE(std::filesystem::is_empty(scratch.path()));
}

TEST(NodeSetup, RejectsOutOfRangeNodesAndMissingHead) {
  ScratchDirectory scratch;
  auto request = RequestFor(scratch.path(), 3);
  EXPECT_FALSE(PrepareNode(request).ok());
  request = RequestFor(scratch.path(), 0);
  request.head_host.clear();
  EXPECT_FALSE(PrepareNode(request).ok());
  request = RequestFor(scratch.path(), 0);
  request.node_cpus = 0;
  EXPECT_FALSE(PrepareNode(request).ok());
  request = RequestFor(scratch.path(), 0);
  request.node_memory_bytes = 0;
  EXPECT_FALSE(PrepareNode(request).ok());
}

TEST(NodeSetup, MissingTmpdirFailsWithAClearMessage) {
  auto request = RequestFor("/nonexistent-sray-tmp", 0);
  auto setup = PrepareNode(request);
  ASSERT_FALSE(setup.ok());
  EXPECT_NE(setup.status().message().find("/nonexistent-sray-tmp"), std::string::npos);
}

// The head of a 2-node step with 2 CPUs per node.
TaskEnvironment SampleHead() {
  return {.role = "head",
          .node_id = 0,
          .num_nodes = 2,
          .head_host = "n1",
          .session_dir = "/tmp/s",
          .job_id = "9",
          .step_id = "1",
          .node_cpus = 2,
          .node_memory_bytes = std::uint64_t{64} << 30,
          .option_variables = {},
          .activation_variables = {},
          .unset_variables = {}};
}

TEST(TaskEnvironment, ReadsBackWhatWasWritten) {
  TaskEnvironment written = SampleHead();
  written.option_variables = {{"SRAY_LOG_LEVEL", "debug"}};
  std::map<std::string, std::string> storage;
  auto read = ReadTaskEnvironment(LookupIn(ToEnvironmentVariables(written), storage));
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->role, "head");
  EXPECT_EQ(read->num_nodes, 2U);
  EXPECT_EQ(read->session_dir, "/tmp/s");
  EXPECT_EQ(read->node_cpus, 2U);
  EXPECT_EQ(read->node_memory_bytes, std::uint64_t{64} << 30);
  EXPECT_EQ(read->option_variables, written.option_variables);
}

TEST(TaskEnvironment, OutsideAStepTheErrorSaysHowToLaunch) {
  auto read = ReadTaskEnvironment([](const char*) -> const char* { return nullptr; });
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("SRAY_ROLE is not set"), std::string::npos);
  EXPECT_NE(read.status().message().find("srun --ray-cluster"), std::string::npos);
}

TEST(TaskEnvironment, RejectsInconsistentValues) {
  const TaskEnvironment base = SampleHead();
  auto with = [&](const char* name, const char* value) {
    std::map<std::string, std::string> storage;
    auto lookup = LookupIn(ToEnvironmentVariables(base), storage);
    storage[name] = value;
    return ReadTaskEnvironment(lookup);
  };
  EXPECT_FALSE(with("SRAY_ROLE", "boss").ok());
  EXPECT_FALSE(with("SRAY_ROLE", "worker").ok()) << "node 0 must be the head";
  EXPECT_FALSE(with("SRAY_NODE_ID", "2").ok()) << "node id must be below the node count";
  EXPECT_FALSE(with("SRAY_NUM_NODES", "two").ok());
  EXPECT_FALSE(with("SRAY_NODE_ID", "-1").ok());
  EXPECT_FALSE(with("SRAY_NODE_CPUS", "").ok());
  EXPECT_FALSE(with("SRAY_NODE_CPUS", "").ok());
}

}  // namespace
}  // namespace sray::jobsetup
