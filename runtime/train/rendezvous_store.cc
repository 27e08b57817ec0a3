#include "train/rendezvous_store.h"

#include <stdexcept>
#include <utility>

#include "sray/api.h"
#include "sray/errors.h"

namespace sray::train::internal {

RendezvousStore* RendezvousStore::Create() { return new RendezvousStore(); }

bool RendezvousStore::Set(const std::string& key, const std::string& value) {
  table_.Set(key, value);
  return true;
}

RendezvousValues RendezvousStore::GetAll(const std::vector<std::string>& keys) {
  RendezvousValues answer;
  if (auto values = table_.GetAll(keys)) {
    answer.found = true;
    answer.values = std::move(*values);
  }
  return answer;
}

std::int64_t RendezvousStore::Add(const std::string& key, std::int64_t delta) { return table_.Add(key, delta); }

std::string RendezvousStore::CompareSet(const std::string& key, const std::string& expected,
                                        const std::string& desired) {
  return table_.CompareSet(key, expected, desired);
}

bool RendezvousStore::Delete(const std::string& key) { return table_.Delete(key); }

std::int64_t RendezvousStore::NumKeys() { return table_.NumKeys(); }

bool RendezvousStore::Check(const std::vector<std::string>& keys) { return table_.Check(keys); }

template <typename Result>
Result ActorRendezvous::Await(const sray::ObjectRef<Result>& answer, const char* operation) {
  try {
    return sray::Get(answer, timeout_);
  } catch (const sray::Error& error) {
    throw sray::Error(std::string("sray: the training group's rendezvous failed (") + operation +
                      "): " + error.what() + ": the run's rendezvous actor died or did not answer; see its log");
  }
}

void ActorRendezvous::Set(const std::string& key, const std::string& value) {
  Await(store_.Task(&RendezvousStore::Set).Remote(key, value), "set");
}

std::optional<std::vector<std::string>> ActorRendezvous::GetAll(const std::vector<std::string>& keys) {
  RendezvousValues answer = Await(store_.Task(&RendezvousStore::GetAll).Remote(keys), "get");
  if (!answer.found) return std::nullopt;
  return std::move(answer.values);
}

std::int64_t ActorRendezvous::Add(const std::string& key, std::int64_t delta) {
  return Await(store_.Task(&RendezvousStore::Add).Remote(key, delta), "add");
}

std::string ActorRendezvous::CompareSet(const std::string& key, const std::string& expected,
                                        const std::string& desired) {
  return Await(store_.Task(&RendezvousStore::CompareSet).Remote(key, expected, desired), "compare-set");
}

bool ActorRendezvous::Delete(const std::string& key) {
  return Await(store_.Task(&RendezvousStore::Delete).Remote(key), "delete");
}

std::int64_t ActorRendezvous::NumKeys() { return Await(store_.Task(&RendezvousStore::NumKeys).Remote(), "count"); }

bool ActorRendezvous::Check(const std::vector<std::string>& keys) {
  return Await(store_.Task(&RendezvousStore::Check).Remote(keys), "check");
}

}  // namespace sray::train::internal

SRAY_REMOTE(sray::train::internal::RendezvousStore::Create, &sray::train::internal::RendezvousStore::Set,
            &sray::train::internal::RendezvousStore::GetAll, &sray::train::internal::RendezvousStore::Add,
            &sray::train::internal::RendezvousStore::CompareSet, &sray::train::internal::RendezvousStore::Delete,
            &sray::train::internal::RendezvousStore::NumKeys, &sray::train::internal::RendezvousStore::Check);
