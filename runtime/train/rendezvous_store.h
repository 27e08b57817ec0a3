#pragma once

// The run's rendezvous, as an actor: one per attempt, created by the
// trainer before its workers and killed with them, holding a
// RendezvousTable. Workers reach it through ActorRendezvous, over sray's
// authenticated transport: the group's addresses never pass through an open
// port. Registered with SRAY_REMOTE in libsray_train. Free of LibTorch.
//
// Thread-safety: the actor serves one call at a time; ActorRendezvous may be
// used from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "sray/actor.h"
#include "train/rendezvous_table.h"

namespace sray::train::internal {

struct RendezvousValues {
  bool found = false;  // false: some key is missing
  std::vector<std::string> values;
  MSGPACK_DEFINE(found, values)
};

class RendezvousStore {
 public:
  static RendezvousStore* Create();
  bool Set(const std::string& key, const std::string& value);
  RendezvousValues GetAll(const std::vector<std::string>& keys);
  std::int64_t Add(const std::string& key, std::int64_t delta);
  std::string CompareSet(const std::string& key, const std::string& expected, const std::string& desired);
  bool Delete(const std::string& key);
  std::int64_t NumKeys();
  bool Check(const std::vector<std::string>& keys);

 private:
  RendezvousTable table_;
};

// The worker's side: each operation is one actor call, waited for at most
// `timeout`; a failed call throws sray::Error naming the rendezvous.
class ActorRendezvous final : public RendezvousBackend {
 public:
  ActorRendezvous(sray::ActorHandle<RendezvousStore> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}
  void Set(const std::string& key, const std::string& value) override;
  std::optional<std::vector<std::string>> GetAll(const std::vector<std::string>& keys) override;
  std::int64_t Add(const std::string& key, std::int64_t delta) override;
  std::string CompareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool Delete(const std::string& key) override;
  std::int64_t NumKeys() override;
  bool Check(const std::vector<std::string>& keys) override;

 private:
  template <typename Result>
  Result Await(const sray::ObjectRef<Result>& answer, const char* operation);
  sray::ActorHandle<RendezvousStore> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace sray::train::internal
