#include "envs/lock.h"

#include <openssl/evp.h>

#include "common/hex.h"

#include <array>
#include <fstream>
#include <memory>
#include <sstream>

namespace sray::envs {
namespace {

std::string OrDash(const std::string& text) {
  return text.empty() ? std::string("-") : text;
}

std::string FromDash(const std::string& text) {
  return text == "-" ? std::string() : text;
}

std::string Checksum(const Package& package) {
  if (!package.sha256.empty()) return "sha256:" + package.sha256;
  if (!package.md5.empty()) return "md5:" + package.md5;
  return "-";
}

std::string Line(const Package& package) {
  return std::string(ManagerName(package.manager)) + " " + package.name + " " + package.version +
         " " + OrDash(package.build) + " " + OrDash(package.channel) + " " +
         OrDash(package.subdir) + " " + Checksum(package) + "\n";
}

}  // namespace

std::string Sha256Hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(context.get(), bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(context.get(), digest.data(), &length) != 1) {
    return {};
  }
  return HexOf(std::span<const unsigned char>(digest.data(), length));
}

Result<Lock> MakeLock(const PackageList& list) {
  std::string lines;
  for (const auto& package : list.packages) {
    const bool pinned = package.manager == Manager::kPip
                            ? !package.version.empty() && package.version_operator == "=="
                            : !package.version.empty() && !package.build.empty();
    if (!pinned) {
      return Status::InvalidArgument(list.source + ": " +
                                     std::string(ManagerName(package.manager)) + " package '" +
                                     package.name + "' is not pinned to one version" +
                                     (package.manager == Manager::kConda ? " and build" : "") +
                                     ": lock an installed prefix or a complete export (conda env "
                                     "export, conda list --explicit)");
    }
    lines += Line(package);
  }
  Lock lock;
  lock.hash = Sha256Hex(lines);
  lock.text = std::string(kLockHeader) + "\n# sha256 " + lock.hash + "\n" + lines;
  return lock;
}

Result<PackageList> ReadLock(const std::filesystem::path& file) {
  std::ifstream stream(file);
  if (!stream) return Status::FromErrno(errno, "cannot read " + file.string());
  std::string line;
  std::getline(stream, line);
  if (line != kLockHeader) {
    return Status::InvalidArgument(file.string() + ": not a sray lock (its first line is not '" +
                                   std::string(kLockHeader) + "')");
  }
  std::getline(stream, line);
  const std::string hash_prefix = "# sha256 ";
  if (!line.starts_with(hash_prefix)) {
    return Status::InvalidArgument(file.string() + ": the second line must be '# sha256 <hash>'");
  }
  const std::string recorded = line.substr(hash_prefix.size());
  PackageList list;
  list.source = file.string();
  list.complete = true;
  std::string lines;
  int number = 2;
  while (std::getline(stream, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string manager, name, version, build, channel, subdir, checksum, extra;
    fields >> manager >> name >> version >> build >> channel >> subdir >> checksum;
    if (checksum.empty() || (fields >> extra) || (manager != "conda" && manager != "pip")) {
      return Status::InvalidArgument(
          file.string() + ": line " + std::to_string(number) +
          " is not 'MANAGER NAME VERSION BUILD CHANNEL SUBDIR CHECKSUM'");
    }
    Package package;
    package.manager = manager == "pip" ? Manager::kPip : Manager::kConda;
    package.name = name;
    package.version = version;
    package.build = FromDash(build);
    package.channel = FromDash(channel);
    package.subdir = FromDash(subdir);
    if (checksum.starts_with("sha256:")) package.sha256 = checksum.substr(7);
    if (checksum.starts_with("md5:")) package.md5 = checksum.substr(4);
    lines += Line(package);
    list.packages.push_back(std::move(package));
  }
  if (Sha256Hex(lines) != recorded) {
    return Status::InvalidArgument(file.string() +
                                   ": its packages do not match its recorded hash: the file was "
                                   "edited or truncated; lock the environment again");
  }
  return list;
}

}  // namespace sray::envs
