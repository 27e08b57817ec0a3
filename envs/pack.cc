#include "envs/pack.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>
#include <vector>

#include "common/file_descriptor.h"
#include "common/whole_number.h"
#include "envs/lock.h"
#include "envs/readers.h"

namespace sray::envs {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'R', 'A', 'Y', 'P', 'K', '0', '1'};
enum class EntryType : std::uint8_t { kEnd = 0, kFile = 1, kDirectory = 2, kSymlink = 3 };
enum class PrefixKind : std::uint8_t { kNone = 0, kText = 1, kBinary = 2 };

// SHA-256 over everything written or read, for the trailer.
class Digest {
 public:
  Digest() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr);
  }
  void Update(const void* data, std::size_t size) { EVP_DigestUpdate(context_.get(), data, size); }
  std::string Finish() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    EVP_DigestFinal_ex(context_.get(), digest.data(), &length);
    return {reinterpret_cast<const char*>(digest.data()), length};
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

class Writer {
 public:
  explicit Writer(std::ofstream& stream) : stream_(stream) {}
  void Bytes(const void* data, std::size_t size) {
    stream_.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    digest_.Update(data, size);
  }
  template <typename Integer>
  void Number(Integer value) {
    Bytes(&value, sizeof(value));
  }
  void Text(const std::string& text) {
    Number(static_cast<std::uint32_t>(text.size()));
    Bytes(text.data(), text.size());
  }
  Digest& digest() { return digest_; }

 private:
  std::ofstream& stream_;
  Digest digest_;
};

class Reader {
 public:
  Reader(std::ifstream& stream, std::string name) : stream_(stream), name_(std::move(name)) {}
  Status Bytes(void* data, std::size_t size) {
    stream_.read(static_cast<char*>(data), static_cast<std::streamsize>(size));
    if (static_cast<std::size_t>(stream_.gcount()) != size) {
      return Status::InvalidArgument(name_ + " is truncated: copy or pack it again");
    }
    digest_.Update(data, size);
    return Status::Ok();
  }
  template <typename Integer>
  Result<Integer> Number() {
    Integer value{};
    if (Status read = Bytes(&value, sizeof(value)); !read.ok()) return read;
    return value;
  }
  // Bytes left to read (0 when the stream cannot tell).
  std::uint64_t Remaining() {
    const auto here = stream_.tellg();
    if (here < 0) return 0;
    stream_.seekg(0, std::ios::end);
    const auto end = stream_.tellg();
    stream_.seekg(here);
    return end > here ? static_cast<std::uint64_t>(end - here) : 0;
  }
  Result<std::string> Text(std::uint32_t limit = 1u << 20) {
    auto size = Number<std::uint32_t>();
    if (!size.ok()) return size.status();
    if (*size > limit) return Status::InvalidArgument(name_ + " is damaged (a name of " + std::to_string(*size) + " bytes)");
    std::string text(*size, '\0');
    if (Status read = Bytes(text.data(), text.size()); !read.ok()) return read;
    return text;
  }
  Digest& digest() { return digest_; }

 private:
  std::ifstream& stream_;
  std::string name_;
  Digest digest_;
};

// Whether `destination`'s parent directory lies inside `tree` once symlinks
// are followed: an entry may make a link that a later name goes through
// (bin/lib -> /etc, then bin/lib/passwd), which the name alone never shows.
bool ParentInsideTree(const fs::path& tree, const fs::path& destination) {
  std::error_code error;
  const fs::path root = fs::weakly_canonical(tree, error);
  if (error) return false;
  const fs::path parent = fs::weakly_canonical(destination.parent_path(), error);
  if (error) return false;
  const auto [root_end, parent_at] = std::mismatch(root.begin(), root.end(), parent.begin(), parent.end());
  return root_end == root.end();
}

PrefixKind KindOf(const std::string& data, const std::string& prefix) {
  if (data.find(prefix) == std::string::npos) return PrefixKind::kNone;
  return data.find('\0') == std::string::npos ? PrefixKind::kText : PrefixKind::kBinary;
}

void ReplaceText(std::string& data, const std::string& from, const std::string& to) {
  std::string result;
  result.reserve(data.size());
  std::size_t start = 0;
  while (true) {
    const auto found = data.find(from, start);
    if (found == std::string::npos) break;
    result.append(data, start, found - start);
    result += to;
    start = found + from.size();
  }
  result.append(data, start, std::string::npos);
  data.swap(result);
}

// Each C string holding `from` is rewritten in place: the new prefix, the
// rest of the string, NULs up to the old length (conda's binary rule).
void ReplaceBinary(std::string& data, const std::string& from, const std::string& to) {
  std::size_t start = 0;
  while (true) {
    const auto found = data.find(from, start);
    if (found == std::string::npos) return;
    auto end = data.find('\0', found);
    if (end == std::string::npos) end = data.size();
    const std::string rest = data.substr(found + from.size(), end - found - from.size());
    std::string replacement = to + rest;
    replacement.resize(end - found, '\0');
    data.replace(found, end - found, replacement);
    start = found + to.size();
  }
}

// The partial files (OUT.partial.PID, and OUT.partial of earlier versions)
// beside `output` that no pack holds: their pack was killed. Each pack
// holds an flock on its file's inode while it works, which, unlike a pid,
// also says "in use" for a pack on another host sharing the file system.
void RemovePartialsNobodyHolds(const fs::path& output) {
  const std::string prefix = output.filename().string() + ".partial";
  const fs::path directory = output.has_parent_path() ? output.parent_path() : fs::path(".");
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    if (!rest.empty() && !(rest.starts_with('.') && WholeNumber<pid_t>(rest.substr(1)))) continue;
    const FileDescriptor file(::open(it->path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (file.get() < 0 || ::flock(file.get(), LOCK_EX | LOCK_NB) != 0) continue;
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
}

// The pack being written. Where the file system allows it, a file without
// a name (O_TMPFILE) in OUT's directory that gets OUT's name only once
// whole: however the pack ends, SIGKILL included, nothing is left but an
// earlier OUT. Elsewhere (file systems without unnamed files, some network
// ones), OUT.partial.PID, removed on every end this process sees, and by
// the next pack to OUT after a SIGKILL. Either is held (flock) while written.
class PackOutput {
 public:
  static Result<std::unique_ptr<PackOutput>> Open(const fs::path& output) {
    RemovePartialsNobodyHolds(output);
    std::unique_ptr<PackOutput> opened(new PackOutput(output));
    const fs::path directory = output.has_parent_path() ? output.parent_path() : fs::path(".");
    opened->unnamed_ =
        FileDescriptor(::open(directory.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666));
    if (opened->unnamed_.get() >= 0) {
      (void)::flock(opened->unnamed_.get(), LOCK_EX | LOCK_NB);  // its name, once linked
      opened->stream_.open(opened->ProcessPath(), std::ios::binary | std::ios::trunc);
      if (opened->stream_) return opened;
      opened->unnamed_ = FileDescriptor(-1);  // no /proc: a named file after all
    }
    opened->held_ = FileDescriptor(
        ::open(opened->partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
    if (opened->held_.get() < 0)
      return Status::FromErrno(errno, "cannot write " + opened->partial_.string());
    opened->partial_made_ = true;
    (void)::flock(opened->held_.get(), LOCK_EX | LOCK_NB);
    opened->stream_.open(opened->partial_, std::ios::binary | std::ios::trunc);
    if (!opened->stream_)
      return Status::FromErrno(errno, "cannot write " + opened->partial_.string());
    return opened;
  }
  PackOutput(const PackOutput&) = delete;
  PackOutput& operator=(const PackOutput&) = delete;
  ~PackOutput() {
    stream_.close();
    std::error_code ignored;
    if (partial_made_) fs::remove(partial_, ignored);
  }

  std::ofstream& stream() { return stream_; }

  // Closes the file and gives it OUT's name, replacing an earlier OUT.
  Status Publish() {
    stream_.close();
    if (!stream_) return Status::IoError("cannot write " + output_.string() + ": disk full?");
    std::error_code error;
    if (unnamed_.get() >= 0) {
      // A name of its own first (this process's: never another pack's),
      // then OUT's by rename: link() does not replace. A kill between the
      // two leaves it, to the next pack's sweep.
      fs::remove(partial_, error);
      if (::linkat(AT_FDCWD, ProcessPath().c_str(), AT_FDCWD, partial_.c_str(),
                   AT_SYMLINK_FOLLOW) != 0) {
        return Status::FromErrno(errno, "cannot give " + output_.string() + " its name");
      }
      partial_made_ = true;
    }
    fs::rename(partial_, output_, error);
    if (error) return Status::IoError("cannot write " + output_.string() + ": " + error.message());
    partial_made_ = false;
    return Status::Ok();
  }

 private:
  explicit PackOutput(fs::path output)
      : output_(std::move(output)),
        partial_(output_.string() + ".partial." + std::to_string(::getpid())) {}
  std::string ProcessPath() const { return "/proc/self/fd/" + std::to_string(unnamed_.get()); }

  fs::path output_;
  fs::path partial_;
  FileDescriptor unnamed_{-1};
  FileDescriptor held_{-1};  // the named file's lock, where there is no unnamed one
  std::ofstream stream_;
  bool partial_made_ = false;
};

// An unpack holds an flock on its staging directory while it works: the
// lock, unlike a pid, also says "in use" for an unpack on another host
// sharing the file system, or in another pid namespace. Nothing (-1) when
// it cannot be taken; `taken` then says whether someone else has the
// directory (holds its lock, or removed it), rather than the file system
// refusing the lock (NFS refuses flock on a directory opened for reading,
// and there nothing is ever swept).
FileDescriptor LockStaging(const fs::path& staging, bool* taken = nullptr) {
  FileDescriptor directory(
      ::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (directory.get() < 0) {
    if (taken != nullptr) *taken = true;
    return directory;
  }
  if (::flock(directory.get(), LOCK_EX | LOCK_NB) != 0) {
    if (taken != nullptr) *taken = errno == EWOULDBLOCK;
    return FileDescriptor(-1);
  }
  return directory;
}

// The staging directories in `directory` of unpacks that nobody holds
// (theirs was killed: SIGKILL, which nothing in the process can handle);
// of `target_name` only, or of any target when it is empty.
std::uint64_t RemoveStagingNobodyHolds(const fs::path& directory, const std::string& target_name) {
  constexpr std::string_view kMiddle = ".unpacking.";
  std::uint64_t removed = 0;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const auto middle = name.rfind(kMiddle);
    if (!name.starts_with('.') || middle == std::string::npos || middle < 2 ||
        (!target_name.empty() && std::string_view(name).substr(1, middle - 1) != target_name) ||
        !WholeNumber<pid_t>(std::string_view(name).substr(middle + kMiddle.size())))
      continue;
    const FileDescriptor held = LockStaging(it->path());
    if (held.get() < 0) continue;  // in use, or not a directory
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
    ++removed;
  }
  return removed;
}

}  // namespace

std::uint64_t RemoveStagingOfKilledUnpacks(const fs::path& directory) {
  return RemoveStagingNobodyHolds(directory, "");
}

Result<PackSummary> Pack(const fs::path& prefix_argument, const fs::path& output,
                         const Interrupted& interrupted) {
  std::error_code error;
  const fs::path prefix = fs::canonical(prefix_argument, error);
  if (error) return Status::NotFound(prefix_argument.string() + " does not exist: give an environment's prefix");
  auto packages = ReadPrefix(prefix);
  if (!packages.ok()) return packages.status();
  auto lock = MakeLock(*packages);
  if (!lock.ok()) return lock.status();

  auto opened = PackOutput::Open(output);
  if (!opened.ok()) return opened.status();
  PackOutput& written = **opened;
  std::ofstream& stream = written.stream();
  Writer writer(stream);
  writer.Bytes(kMagic, sizeof(kMagic));
  PackSummary summary;
  summary.recorded_prefix = prefix.string();
  summary.lock_hash = lock->hash;
  writer.Text(summary.recorded_prefix);
  writer.Text(summary.lock_hash);

  std::vector<fs::path> entries;
  for (auto it = fs::recursive_directory_iterator(prefix, error); it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (error) break;
    entries.push_back(it->path());
  }
  if (error) return Status::IoError("cannot walk " + prefix.string() + ": " + error.message());
  std::sort(entries.begin(), entries.end());  // the same tree packs the same bytes
  std::uint64_t count = 0;
  for (const auto& path : entries) {
    const std::string relative = path.lexically_relative(prefix).string();  // never through links
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) return Status::FromErrno(errno, "cannot stat " + path.string());
    const auto mode = static_cast<std::uint32_t>(info.st_mode & 07777);
    if (S_ISLNK(info.st_mode)) {
      writer.Number(EntryType::kSymlink);
      writer.Text(relative);
      writer.Text(fs::read_symlink(path).string());
    } else if (S_ISDIR(info.st_mode)) {
      writer.Number(EntryType::kDirectory);
      writer.Text(relative);
      writer.Number(mode);
    } else if (S_ISREG(info.st_mode)) {
      auto data = ReadWholeFile(path);
      if (!data.ok()) return data.status();
      const PrefixKind kind = KindOf(*data, summary.recorded_prefix);
      writer.Number(EntryType::kFile);
      writer.Text(relative);
      writer.Number(mode);
      writer.Number(kind);
      writer.Number(static_cast<std::uint64_t>(data->size()));
      writer.Bytes(data->data(), data->size());
      summary.files++;
      summary.bytes += data->size();
      summary.relocated_files += kind == PrefixKind::kNone ? 0U : 1U;
    } else {
      continue;  // sockets, fifos: not part of an environment
    }
    ++count;
    if (interrupted && interrupted()) {
      return Status::Unavailable("packing " + prefix.string() +
                                 " was interrupted: " + output.string() + " was not written");
    }
  }
  writer.Number(EntryType::kEnd);
  writer.Number(count);
  const std::string digest = writer.digest().Finish();
  stream.write(digest.data(), static_cast<std::streamsize>(digest.size()));
  if (Status published = written.Publish(); !published.ok()) return published;
  return summary;
}

namespace {

Result<PackSummary> ReadHeader(Reader& reader, const std::string& name) {
  char magic[sizeof(kMagic)];
  if (Status read = reader.Bytes(magic, sizeof(magic)); !read.ok()) return read;
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return Status::InvalidArgument(name + " is not a sray packed environment (make one with `sray env pack`)");
  }
  PackSummary summary;
  auto prefix = reader.Text();
  if (!prefix.ok()) return prefix.status();
  auto hash = reader.Text();
  if (!hash.ok()) return hash.status();
  summary.recorded_prefix = *prefix;
  summary.lock_hash = *hash;
  return summary;
}

}  // namespace

Result<PackSummary> InspectPack(const fs::path& pack) {
  std::ifstream stream(pack, std::ios::binary);
  if (!stream) return Status::FromErrno(errno, "cannot read " + pack.string());
  Reader reader(stream, pack.string());
  return ReadHeader(reader, pack.string());
}

Result<PackSummary> Unpack(const fs::path& pack, const fs::path& target_argument,
                           const UnpackObserver& observer, const Interrupted& interrupted) {
  std::error_code error;
  const fs::path target = fs::absolute(target_argument, error).lexically_normal();
  if (fs::exists(target, error)) {
    return Status::AlreadyExists(target.string() + " already exists: unpack into a new directory");
  }
  std::ifstream stream(pack, std::ios::binary);
  if (!stream) return Status::FromErrno(errno, "cannot read " + pack.string());
  Reader reader(stream, pack.string());
  auto header = ReadHeader(reader, pack.string());
  if (!header.ok()) return header.status();
  PackSummary summary = *header;
  const std::string& old_prefix = summary.recorded_prefix;
  const std::string new_prefix = target.string();

  RemoveStagingNobodyHolds(target.parent_path(), target.filename().string());
  const fs::path staging = target.parent_path() / ("." + target.filename().string() + ".unpacking." +
                                                   std::to_string(::getpid()));
  fs::remove_all(staging, error);
  fs::create_directories(staging, error);
  if (error) return Status::IoError("cannot create " + staging.string() + ": " + error.message());
  bool taken = false;
  const FileDescriptor staging_lock = LockStaging(staging, &taken);
  auto fail = [&](Status status) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    return status;
  };
  // Between the directory's creation and the lock, a sweep beside the same
  // target took it for a killed unpack's: it is removing it, or has.
  if (taken) {
    return Status::Unavailable("another unpack beside " + target.string() + " took " +
                               staging.string() + " while it was made: run this again");
  }
  std::uint64_t count = 0;
  while (true) {
    auto type = reader.Number<EntryType>();
    if (!type.ok()) return fail(type.status());
    if (*type == EntryType::kEnd) break;
    auto relative = reader.Text();
    if (!relative.ok()) return fail(relative.status());
    const fs::path relative_path(*relative);
    if (relative_path.is_absolute() || relative->find("..") != std::string::npos) {
      return fail(Status::InvalidArgument(pack.string() + " names a path outside its prefix (" + *relative + ")"));
    }
    const fs::path destination = staging / relative_path;
    if (!ParentInsideTree(staging, destination)) {
      return fail(Status::InvalidArgument(pack.string() + " names a path that leads out of its prefix through a link (" +
                                          *relative + "): pack the environment again with `sray env pack`"));
    }
    if (*type == EntryType::kDirectory) {
      auto mode = reader.Number<std::uint32_t>();
      if (!mode.ok()) return fail(mode.status());
      fs::create_directories(destination, error);
      ::chmod(destination.c_str(), static_cast<mode_t>(*mode | 0700));
    } else if (*type == EntryType::kSymlink) {
      auto link = reader.Text();
      if (!link.ok()) return fail(link.status());
      std::string points_to = *link;
      if (points_to.starts_with(old_prefix)) points_to = new_prefix + points_to.substr(old_prefix.size());
      fs::create_symlink(points_to, destination, error);
      if (error) return fail(Status::IoError("cannot create " + destination.string() + ": " + error.message()));
    } else if (*type == EntryType::kFile) {
      auto mode = reader.Number<std::uint32_t>();
      auto kind = reader.Number<PrefixKind>();
      auto size = reader.Number<std::uint64_t>();
      if (!mode.ok() || !kind.ok() || !size.ok()) return fail(Status::InvalidArgument(pack.string() + " is truncated: copy or pack it again"));
      // The size is the pack's word: a damaged one must not size an
      // allocation (tests/fuzz/environment_readers_fuzzer asked for 8 EiB).
      if (*size > reader.Remaining()) {
        return fail(Status::InvalidArgument(pack.string() + " is truncated or damaged (" + *relative + " claims " +
                                            std::to_string(*size) + " bytes, more than the pack holds): copy or pack it again"));
      }
      std::string data(*size, '\0');
      if (Status read = reader.Bytes(data.data(), data.size()); !read.ok()) return fail(read);
      if (*kind == PrefixKind::kText) {
        ReplaceText(data, old_prefix, new_prefix);
      } else if (*kind == PrefixKind::kBinary) {
        if (new_prefix.size() > old_prefix.size()) {
          return fail(Status::InvalidArgument(
              "binary file " + *relative + " holds the packed prefix " + old_prefix + " (" +
              std::to_string(old_prefix.size()) + " bytes), and " + new_prefix + " is longer (" +
              std::to_string(new_prefix.size()) + "): unpack to a path of at most " +
              std::to_string(old_prefix.size()) + " bytes, or pack from a longer prefix"));
        }
        ReplaceBinary(data, old_prefix, new_prefix);
      }
      fs::create_directories(destination.parent_path(), error);
      std::ofstream file(destination, std::ios::binary | std::ios::trunc);
      file.write(data.data(), static_cast<std::streamsize>(data.size()));
      file.close();
      if (!file) return fail(Status::IoError("cannot write " + destination.string() + ": disk full?"));
      ::chmod(destination.c_str(), static_cast<mode_t>(*mode));
      summary.files++;
      summary.bytes += data.size();
      summary.relocated_files += *kind == PrefixKind::kNone ? 0U : 1U;
      if (observer) observer(UnpackProgress{.files = summary.files, .bytes = summary.bytes});
      if (interrupted && interrupted()) {
        return fail(Status::Unavailable("unpacking " + pack.string() + " was interrupted"));
      }
    } else {
      return fail(Status::InvalidArgument(pack.string() + " is damaged (unknown entry type)"));
    }
    ++count;
  }
  auto recorded_count = reader.Number<std::uint64_t>();
  if (!recorded_count.ok()) return fail(recorded_count.status());
  const std::string computed = reader.digest().Finish();
  std::string recorded(computed.size(), '\0');
  stream.read(recorded.data(), static_cast<std::streamsize>(recorded.size()));
  if (static_cast<std::size_t>(stream.gcount()) != recorded.size() || recorded != computed ||
      *recorded_count != count) {
    return fail(Status::InvalidArgument(pack.string() + " is truncated or damaged (its checksum does "
                                        "not match): copy or pack it again"));
  }
  fs::rename(staging, target, error);
  if (error) return fail(Status::IoError("cannot move the unpacked environment to " + target.string() + ": " + error.message()));
  return summary;
}

}  // namespace sray::envs
