#pragma once

// Work that must run as the job user inside a root, multi-threaded slurmstepd.
// Changing the ids of slurmstepd itself would change them for all its threads
// (Linux applies setuid process-wide), so the work runs in a forked child that
// drops to the user, and only its answer comes back, as bytes over a pipe.
//
// Thread-safety: call from one thread at a time; blocks until the child ends.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray::spank {

struct JobUser {
  uid_t uid = 0;
  gid_t gid = 0;
  // The job's supplementary groups, so files shared through a group (an
  // environment pack, a config file) read as they would in the task.
  std::vector<gid_t> groups;
};

// Runs `work` in a child that has become `user` and returns what it returned.
// Fails when the child cannot become the user, throws, or dies, naming which.
// With a deadline, a child still running then is killed (the user can stop
// it, or a path it works on can hang) and the call fails saying so.
Result<std::string> RunAsJobUser(const JobUser& user, const std::function<std::string()>& work,
                                 std::optional<std::chrono::milliseconds> deadline = std::nullopt);

// Work that may tell its caller something before it answers (`tell`): each
// text reaches `heard` on the caller's thread, whole and in order, before
// the call returns, even when the work then fails or passes the deadline
// (`heard` must not throw). A step's node is
// recorded this way as soon as its session directory exists, while its
// environment is still being staged: a slurmstepd that dies meanwhile
// leaves a record for the sweep (spank/crashed_steps).
using TellCaller = std::function<void(const std::string& text)>;
using JobUserWork = std::function<std::string(const TellCaller& tell)>;
Result<std::string> RunAsJobUser(const JobUser& user, const JobUserWork& work,
                                 std::optional<std::chrono::milliseconds> deadline,
                                 const std::function<void(const std::string& text)>& heard);

// Descriptors a job user's process closes first thing: a lock the caller
// holds (an flock goes with every copy of its descriptor, so a child that
// hung in a file system would hold the lock for as long). Up to
// kMostKeptOut at once; any thread (lock-free, since the forked child reads
// the list while another thread may have held any lock at the fork).
inline constexpr int kMostKeptOut = 8;
// False when the list is full: the descriptor then reaches the child.
bool KeepOutOfJobUserProcesses(int descriptor);
void AllowIntoJobUserProcesses(int descriptor);

}  // namespace sray::spank
