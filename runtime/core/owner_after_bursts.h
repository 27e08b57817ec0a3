#pragma once

// Hands back the memory an owner keeps for the next burst once a burst of
// messages has ended (transport/burst_end_watch.h, Owner::ReleaseKeptMemory),
// for as long as it lives.
//
// Ownership: `transport` and `owner` must outlive this object; the
// destructor unregisters, waiting out a call in progress, so destroy it
// before the owner and while the transport lives.
// Thread-safety: made and destroyed by one thread; the handler runs on the
// transport's progress thread (Owner::ReleaseKeptMemory is thread-safe).

#include "core/owner.h"
#include "transport/transport.h"

namespace sray::core {

class OwnerAfterBursts {
 public:
  OwnerAfterBursts(transport::Transport& transport, Owner& owner) : transport_(transport) {
    transport_.SetBurstEndHandler([&owner] { owner.ReleaseKeptMemory(); });
  }
  ~OwnerAfterBursts() { transport_.SetBurstEndHandler({}); }
  OwnerAfterBursts(const OwnerAfterBursts&) = delete;
  OwnerAfterBursts& operator=(const OwnerAfterBursts&) = delete;

 private:
  transport::Transport& transport_;
};

}  // namespace sray::core
