#pragma once

// The PMIx server that `sray run` embeds, so the job's processes wire up
// exactly as they do under srun: same client calls, same keys, same fences.
// One server hosts every process of the emulated nodes.
//
// Lifetime: one instance per process (PMIx allows a single server); the
// constructor initialises the library with private temporary directories
// (never Slurm's, even inside an srun step), the destructor deregisters the
// namespace and finalises. PMIx calls the module's callbacks on its own
// thread; they hand their completions to an executor thread, because calling
// back into PMIx from inside an upcall may deadlock.
//
// Thread-safety: public members are called from the launcher's main thread.

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace sray::launcher {

struct EmulatedJobLayout {
  std::string namespace_name;
  std::string job_id;
  std::uint32_t num_nodes = 1;
  std::uint32_t tasks_per_node = 1;
  std::vector<std::string> node_names;  // one per emulated node

  [[nodiscard]] std::uint32_t size() const { return num_nodes * tasks_per_node; }
  [[nodiscard]] std::uint32_t NodeOf(std::uint32_t rank) const { return rank / tasks_per_node; }
  [[nodiscard]] std::uint32_t LocalRankOf(std::uint32_t rank) const {
    return rank % tasks_per_node;
  }
};

// What a client reported through PMIx_Abort.
struct AbortRequest {
  std::uint32_t rank = 0;
  int status = 1;  // what `sray run` exits with: 1 to 255
  std::string message;
};

// The exit status for a rank's PMIx_Abort(status): an abort is a failure,
// and an exit status keeps only the low 8 bits (256 would read as success),
// so a status outside 1 to 255 becomes 1.
inline int ExitStatusOfAbort(int status) {
  return status >= 1 && status <= 255 ? status : 1;
}

class EmbeddedPmixServer {
 public:
  // `temporary_directory` must exist, be private to the user, and be unique
  // to this launch; the server keeps its rendezvous files there.
  static Result<std::unique_ptr<EmbeddedPmixServer>> Start(
      const std::filesystem::path& temporary_directory);
  ~EmbeddedPmixServer();
  EmbeddedPmixServer(const EmbeddedPmixServer&) = delete;
  EmbeddedPmixServer& operator=(const EmbeddedPmixServer&) = delete;

  // Registers the job with its node map, proc map, and per-node and
  // per-process data, then each process as a client.
  Status RegisterJob(const EmulatedJobLayout& layout, uid_t uid, gid_t gid);

  // The variables a process needs to reach this server as `rank`.
  Result<std::vector<std::string>> ClientEnvironment(std::uint32_t rank);

  // Calls `on_abort` (on PMIx's thread) when a client calls PMIx_Abort.
  void OnAbort(std::function<void(const AbortRequest&)> on_abort);

  class Module;  // the C callbacks; defined in the .cc

 private:
  EmbeddedPmixServer() = default;
  void RunExecutor();
  void Execute(std::function<void()> work);

  std::string namespace_name_;
  bool namespace_registered_ = false;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> work_;
  bool stopping_ = false;
  std::thread executor_;
  std::function<void(const AbortRequest&)> on_abort_;
};

}  // namespace sray::launcher
