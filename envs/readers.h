#pragma once

// Reads the descriptions of a conda environment that conda and its tools
// write: an installed prefix (conda-meta/*.json records and pip's
// *.dist-info directories), `conda env export` YAML (with or without builds,
// --from-history, a pip section, variables), `conda list --explicit --md5`
// files, conda-lock.yml (version 1) and sray's own lock (envs/lock.h).
// Every malformed input is an error naming the file and what is wrong;
// nothing is guessed.
//
// Thread-safety: pure functions of the files they read.

#include <filesystem>

#include "common/status.h"
#include "envs/package.h"

namespace sray::envs {

Result<PackageList> ReadPrefix(const std::filesystem::path& prefix);
Result<PackageList> ReadEnvironmentYaml(const std::filesystem::path& file);
Result<PackageList> ReadExplicitFile(const std::filesystem::path& file);
Result<PackageList> ReadCondaLock(const std::filesystem::path& file,
                                  std::string_view platform = "linux-64");

// The bytes of `file`; fails naming it.
Result<std::string> ReadWholeFile(const std::filesystem::path& file);

enum class SpecFormat { kPrefix, kSrayLock, kExplicit, kCondaLock, kEnvironmentYaml };

// Which of the above `path` is, told apart by content as ReadSpec describes.
Result<SpecFormat> DetectSpecFormat(const std::filesystem::path& path);

// Any of the above, told apart by content: a directory is a prefix; a file
// with an @EXPLICIT line an explicit file; sray's lock by its first line; a
// YAML document with `package:` and `metadata:` a conda-lock file; other
// YAML an environment.yml.
Result<PackageList> ReadSpec(const std::filesystem::path& path);

}  // namespace sray::envs
