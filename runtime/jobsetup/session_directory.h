#pragma once

// The per-step session directory: node-local, owned by the job user, mode 0700,
// named after job and step (and node, when several emulated nodes share one
// /tmp) so two steps on one node never share anything. Later modules keep
// sockets, spill files and logs inside it; removing it is the file part of
// step cleanup.
//
// Thread-safety: functions are independent; callers own the directory.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/status.h"

namespace sray::jobsetup {

struct SessionIdentity {
  uid_t uid = 0;
  std::string job_id;   // letters, digits, '_' and '-' only
  std::string step_id;  // same alphabet
  // Set by `sray run`, whose emulated nodes share the machine's /tmp.
  std::optional<std::uint32_t> node_id;
};

// <base>/sray-<uid>-<job>.<step>[.node<k>]; fails on ids that could escape base.
Result<std::filesystem::path> SessionDirectoryPath(const std::filesystem::path& base,
                                                   const SessionIdentity& identity);

// Creates `path` with mode 0700 as the calling user. An existing directory is
// accepted only when it is a real directory owned by `owner` with mode 0700
// (the SPANK callbacks may run twice); anything else is refused rather than
// trusted, since another user could have planted it.
Status CreateSessionDirectory(const std::filesystem::path& path, uid_t owner);

// Removes `path` and everything below it without following symbolic links.
// A missing directory is not an error (cleanup is idempotent).
Status RemoveSessionDirectory(const std::filesystem::path& path);

}  // namespace sray::jobsetup
