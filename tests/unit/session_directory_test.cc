#include "jobsetup/session_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_files.h"

namespace sray::jobsetup {
namespace {

using sray::testing::ScratchDirectory;

TEST(SessionDirectory, PathIsUniquePerUserJobStepAndEmulatedNode) {
  const SessionIdentity slurm{.uid = 1001, .job_id = "42", .step_id = "0", .node_id = {}};
  EXPECT_EQ(SessionDirectoryPath("/tmp", slurm)->string(), "/tmp/sray-1001-42.0");
  SessionIdentity other_step = slurm;
  other_step.step_id = "1";
  EXPECT_NE(*SessionDirectoryPath("/tmp", other_step), *SessionDirectoryPath("/tmp", slurm));
  SessionIdentity emulated = slurm;
  emulated.node_id = 2;
  EXPECT_EQ(SessionDirectoryPath("/tmp", emulated)->string(), "/tmp/sray-1001-42.0.node2");
}

TEST(SessionDirectory, RefusesIdsThatCouldEscapeTheBase) {
  for (const char* id : {"../x", "a/b", "", ".", "x y"}) {
    const SessionIdentity identity{.uid = 1, .job_id = id, .step_id = "0", .node_id = {}};
    EXPECT_FALSE(SessionDirectoryPath("/tmp", identity).ok()) << id;
  }
  const SessionIdentity fine{.uid = 1, .job_id = "1", .step_id = "0", .node_id = {}};
  EXPECT_FALSE(SessionDirectoryPath("relative", fine).ok());
}

TEST(SessionDirectory, IsCreatedPrivateToItsOwner) {
  ScratchDirectory scratch;
  const auto path = scratch.path() / "session";
  const mode_t old_mask = umask(0);
  ASSERT_TRUE(CreateSessionDirectory(path, geteuid()).ok());
  umask(old_mask);
  struct stat info {};
  ASSERT_EQ(lstat(path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_mode & 07777, 0700U);
  EXPECT_EQ(info.st_uid, geteuid());
}

TEST(SessionDirectory, CreatingTwiceIsIdempotent) {
  ScratchDirectory scratch;
  const auto path = scratch.path() / "session";
  ASSERT_TRUE(CreateSessionDirectory(path, geteuid()).ok());
  EXPECT_TRUE(CreateSessionDirectory(path, geteuid()).ok());
}

TEST(SessionDirectory, RefusesAPlantedSymlinkOrLooseDirectory) {
  ScratchDirectory scratch;
  const auto link = scratch.path() / "planted";
  std::filesystem::create_directory_symlink(scratch.path(), link);
  auto status = CreateSessionDirectory(link, geteuid());
  EXPECT_EQ(status.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(status.message().find("refusing to use it"), std::string::npos);

  const auto loose = scratch.path() / "loose";
  std::filesystem::create_directory(loose);
  std::filesystem::permissions(loose, std::filesystem::perms::all);
  EXPECT_FALSE(CreateSessionDirectory(loose, geteuid()).ok());

  const auto owned_by_other = scratch.path() / "other";
  ASSERT_TRUE(CreateSessionDirectory(owned_by_other, geteuid()).ok());
  EXPECT_FALSE(CreateSessionDirectory(owned_by_other, geteuid() + 1).ok());
}

TEST(SessionDirectory, MissingBaseGivesAnErrorThatNamesTmpdir) {
  auto status = CreateSessionDirectory("/nonexistent-base/session", geteuid());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("tmpdir="), std::string::npos);
}

TEST(SessionDirectory, RemovalTakesContentsButDoesNotFollowLinks) {
  ScratchDirectory scratch;
  const auto outside = scratch.path() / "outside";
  std::filesystem::create_directory(outside);
  scratch.Write("outside/keep.txt", "precious");

  const auto session = scratch.path() / "session";
  ASSERT_TRUE(CreateSessionDirectory(session, geteuid()).ok());
  std::filesystem::create_directories(session / "sub" / "deeper");
  scratch.Write("session/sub/deeper/file", "x");
  std::filesystem::create_directory_symlink(outside, session / "link");

  ASSERT_TRUE(RemoveSessionDirectory(session).ok());
  EXPECT_FALSE(std::filesystem::exists(session));
  EXPECT_TRUE(std::filesystem::exists(outside / "keep.txt"));
  EXPECT_TRUE(RemoveSessionDirectory(session).ok()) << "second removal must be harmless";
}

}  // namespace
}  // namespace sray::jobsetup
