#pragma once

// This process as a PMIx client: who it is in the job (rank, node, local
// rank), and the job-wide key-value exchange used to wire the job up.
// PMIx_Init on Connect, PMIx_Finalize on destruction.
//
// Thread-safety: PMIx client calls are thread-safe; this class adds only
// immutable state after Connect.

#include <pmix.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray::wire {

struct JobLayout {
  std::uint32_t rank = 0;
  std::uint32_t size = 0;
  std::uint32_t local_rank = 0;
  std::uint32_t local_size = 0;
  std::uint32_t node_id = 0;
  std::uint32_t num_nodes = 0;
  std::string hostname;
  std::string namespace_name;
};

enum class Scope {
  kLocal,   // processes on the same node (PMIX_LOCAL)
  kRemote,  // processes on other nodes (PMIX_REMOTE)
  kGlobal,  // everyone (PMIX_GLOBAL)
};

class PmixClient {
 public:
  // Fails with a message saying how to launch when this is not a PMIx client.
  static Result<std::unique_ptr<PmixClient>> Connect();
  // Makes the one change to this process's environment PMIx_Init would
  // make (PMIX_SECURITY_MODE copied to PMIX_MCA_psec unless that is set), so
  // that Connect changes none. Call it on the main thread before starting
  // threads that read the environment while Connect runs: glibc's setenv of
  // a new variable may move the array another thread's getenv is reading.
  static void PrepareEnvironment();
  ~PmixClient();
  PmixClient(const PmixClient&) = delete;
  PmixClient& operator=(const PmixClient&) = delete;

  [[nodiscard]] const JobLayout& layout() const { return layout_; }

  // Asks the launcher to end the whole job with `status`; does not return
  // when the launcher complies.
  Status Abort(int status, const std::string& message);

  Status Put(Scope scope, const std::string& key, std::span<const std::byte> value);
  Status Commit();
  // Blocks until every process of the job has reached the fence, and
  // exchanges every committed value on the way; fails after `timeout`.
  Status Fence(std::chrono::seconds timeout = kDefaultFenceTimeout);

  static constexpr std::chrono::seconds kDefaultFenceTimeout{120};
  // Reads `key` as published by `rank`. `optional`: answer from what is
  // already here instead of asking the server (for probing a local key).
  Result<std::vector<std::byte>> Get(std::uint32_t rank, const std::string& key, bool optional);

 private:
  explicit PmixClient(pmix_proc_t self) : self_(self) {}
  Status LoadLayout();

  pmix_proc_t self_;
  JobLayout layout_;
};

}  // namespace sray::wire
