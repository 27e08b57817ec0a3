#include "core/worker_launch.h"

#include <string.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "common/hex.h"
#include "common/whole_number.h"

namespace sray::core {
namespace {

constexpr const char* kRankVariable = "SRAY_WORKER_RANK";
constexpr const char* kManagerRankVariable = "SRAY_WORKER_MANAGER_RANK";
constexpr const char* kManagerAddressVariable = "SRAY_WORKER_MANAGER_ADDRESS";
constexpr const char* kHeadRankVariable = "SRAY_WORKER_HEAD_RANK";
constexpr const char* kHeadAddressVariable = "SRAY_WORKER_HEAD_ADDRESS";
constexpr const char* kSecretVariable = "SRAY_WORKER_SECRET";
constexpr const char* kParentVariable = "SRAY_WORKER_PARENT";
constexpr std::string_view kPrefix = "SRAY_WORKER_";

Status Malformed(const char* variable, std::string_view why) {
  return Status::InvalidArgument(std::string(variable) + " " + std::string(why) +
                                 ": workers are started by their node manager, with these "
                                 "variables set; do not start or change them by hand");
}

Result<std::string_view> Text(const std::function<const char*(const char*)>& lookup,
                              const char* variable) {
  const char* value = lookup(variable);
  if (value == nullptr || *value == '\0') return Malformed(variable, "is not set");
  return std::string_view(value);
}

template <typename Number>
Result<Number> ReadNumber(const std::function<const char*(const char*)>& lookup,
                          const char* variable) {
  auto text = Text(lookup, variable);
  if (!text.ok()) return text.status();
  const auto number = WholeNumber<Number>(*text);
  if (!number) return Malformed(variable, "is '" + std::string(*text) + "', not a number");
  return *number;
}

Result<transport::Bytes> ReadHex(const std::function<const char*(const char*)>& lookup,
                                 const char* variable) {
  auto text = Text(lookup, variable);
  if (!text.ok()) return text.status();
  auto bytes = BytesFromHex(*text);
  if (!bytes) return Malformed(variable, "is not an even number of hexadecimal digits");
  return std::move(*bytes);
}

}  // namespace

std::vector<std::string> WorkerEnvironment(const WorkerLaunch& launch,
                                           const std::vector<std::string>& inherited) {
  std::vector<std::string> environment;
  environment.reserve(inherited.size() + 7);
  for (const std::string& entry : inherited) {
    if (!entry.starts_with(kPrefix)) environment.push_back(entry);
  }
  auto set = [&](const char* variable, const std::string& value) {
    environment.push_back(std::string(variable) + "=" + value);
  };
  set(kRankVariable, std::to_string(launch.rank));
  set(kManagerRankVariable, std::to_string(launch.manager_rank));
  set(kManagerAddressVariable, HexOf(launch.manager_address));
  set(kSecretVariable, HexOf(launch.secret));
  set(kParentVariable, std::to_string(launch.parent));
  set(kHeadRankVariable, std::to_string(launch.head_rank));
  set(kHeadAddressVariable, HexOf(launch.head_address));
  return environment;
}

bool IsWorkerLaunch(const std::function<const char*(const char*)>& lookup) {
  return lookup(kRankVariable) != nullptr;
}

Result<WorkerLaunch> ReadWorkerLaunch(const std::function<const char*(const char*)>& lookup) {
  WorkerLaunch launch;
  auto rank = ReadNumber<std::uint32_t>(lookup, kRankVariable);
  if (!rank.ok()) return rank.status();
  launch.rank = *rank;
  auto manager_rank = ReadNumber<std::uint32_t>(lookup, kManagerRankVariable);
  if (!manager_rank.ok()) return manager_rank.status();
  launch.manager_rank = *manager_rank;
  auto manager_address = ReadHex(lookup, kManagerAddressVariable);
  if (!manager_address.ok()) return manager_address.status();
  launch.manager_address = std::move(manager_address).value();
  auto head_rank = ReadNumber<std::uint32_t>(lookup, kHeadRankVariable);
  if (!head_rank.ok()) return head_rank.status();
  launch.head_rank = *head_rank;
  auto head_address = ReadHex(lookup, kHeadAddressVariable);
  if (!head_address.ok()) return head_address.status();
  launch.head_address = std::move(head_address).value();
  auto secret = ReadHex(lookup, kSecretVariable);
  if (!secret.ok()) return secret.status();
  if (secret->size() != launch.secret.size()) {
    return Malformed(kSecretVariable, "has " + std::to_string(secret->size()) + " bytes, not " +
                                          std::to_string(launch.secret.size()));
  }
  std::copy(secret->begin(), secret->end(), launch.secret.begin());
  auto parent = ReadNumber<pid_t>(lookup, kParentVariable);
  if (!parent.ok()) return parent.status();
  if (*parent <= 0) return Malformed(kParentVariable, "is not a process id");
  launch.parent = *parent;
  return launch;
}

void ClearWorkerLaunchVariables() {
  // unsetenv only drops the pointer: the text stays in the block the kernel
  // shows as /proc/PID/environ, readable by the task's code and its
  // children's tools. Overwrite the secret there first.
  if (char* secret = ::getenv(kSecretVariable); secret != nullptr) ::explicit_bzero(secret, std::strlen(secret));
  for (const char* variable :
       {kRankVariable, kManagerRankVariable, kManagerAddressVariable, kHeadRankVariable,
        kHeadAddressVariable, kSecretVariable, kParentVariable}) {
    ::unsetenv(variable);
  }
}

}  // namespace sray::core
