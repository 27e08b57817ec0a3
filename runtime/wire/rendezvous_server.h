#pragma once

// The srun side of wire-up through srun: a TCP listener on a free port of the
// host srun runs on, started by the SPANK plugin before the step's tasks are
// launched. Every launched rank sends its wire-up values
// (wire/rendezvous_codec.h); once all ranks of the step have, each one gets
// every rank's values. This replaces the PMIx fence, whose
// collective among Slurm 22.05's step daemons can hang for good (ARCHITECTURE, "Wire-up through
// srun").
//
// Anyone who can reach the port can connect: srun reads no more than a
// contribution's first 40 bytes until they carry the step's token (given to
// the tasks alone, in their environment), input of any shape is refused
// without harm, a connection that has not shown the token within
// kTokenPatience or delivered its contribution within kContributionPatience
// is closed, beyond kMostUnfinishedConnections the oldest that has not shown
// the token makes room, and once every rank has contributed the port closes.
//
// Ownership and thread-safety: the server owns its sockets and one thread
// that serves them; the destructor stops the thread and closes everything.
// The public members may be called from any one thread.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

#include "common/status.h"
#include "wire/rendezvous_codec.h"

namespace sray::wire::rendezvous {

class RendezvousServer {
 public:
  // How long a new connection may take to show the step's token.
  static constexpr std::chrono::seconds kTokenPatience{2};
  // Connections accepted per round of the server's loop.
  static constexpr std::size_t kMostAcceptsAtOnce = 64;
  // Connections still sending their contribution at once.
  static constexpr std::size_t kMostUnfinishedConnections = 1024;

  // Listens on every address of this host (IPv6 and IPv4 where it can), on
  // a port the kernel picks.
  static Result<std::unique_ptr<RendezvousServer>> Start(const Token& token);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  // Ranks whose contribution has arrived (for tests and diagnostics).
  [[nodiscard]] std::size_t contributed() const { return contributed_->load(); }

 private:
  class Loop;
  RendezvousServer(std::unique_ptr<Loop> loop,
                   std::shared_ptr<std::atomic<std::size_t>> contributed, int wake_fd,
                   std::uint16_t port);

  std::unique_ptr<Loop> loop_;
  std::shared_ptr<std::atomic<std::size_t>> contributed_;
  int wake_fd_;
  std::uint16_t port_;
  // The process that started the thread (srun; not a forked copy of it).
  pid_t owner_;
  std::thread thread_;
};

}  // namespace sray::wire::rendezvous
