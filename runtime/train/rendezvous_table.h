#pragma once

// The key-value table a training group meets through (c10d's Store
// semantics: set, add, compare-and-set, delete, check), and the interface the
// group's c10d::Store adapter calls it through. The run's RendezvousStore
// actor owns one table; a worker reaches it by actor calls over sray's
// authenticated transport, so no port is opened for the rendezvous and
// nobody outside the job can read or write the group's addresses. Waiting
// for a key is the caller's loop (see collectives.cc): the table answers at
// once, so a waiting worker never holds the actor. Free of LibTorch.
//
// Thread-safety: RendezvousTable may be used from any thread (one mutex).

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace sray::train::internal {

class RendezvousBackend {
 public:
  virtual ~RendezvousBackend() = default;
  virtual void Set(const std::string& key, const std::string& value) = 0;
  // Every key's value, in order; nullopt while any of them is missing.
  virtual std::optional<std::vector<std::string>> GetAll(const std::vector<std::string>& keys) = 0;
  // Adds to the key's counter (created at 0) and returns the new count;
  // stored as its decimal text, as c10d's stores do.
  virtual std::int64_t Add(const std::string& key, std::int64_t delta) = 0;
  // Sets `desired` when the key holds `expected` (or is missing and
  // `expected` is empty); returns the value it holds afterwards.
  virtual std::string CompareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) = 0;
  virtual bool Delete(const std::string& key) = 0;
  virtual std::int64_t NumKeys() = 0;
  virtual bool Check(const std::vector<std::string>& keys) = 0;
};

class RendezvousTable final : public RendezvousBackend {
 public:
  void Set(const std::string& key, const std::string& value) override;
  std::optional<std::vector<std::string>> GetAll(const std::vector<std::string>& keys) override;
  // Throws std::invalid_argument when the key holds something that is not a count.
  std::int64_t Add(const std::string& key, std::int64_t delta) override;
  std::string CompareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool Delete(const std::string& key) override;
  std::int64_t NumKeys() override;
  bool Check(const std::vector<std::string>& keys) override;

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> values_;
};

}  // namespace sray::train::internal
