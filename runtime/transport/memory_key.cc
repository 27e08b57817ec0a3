#include "transport/memory_key.h"

#include <cstring>
#include <fstream>
#include <string_view>

namespace sray::transport {
namespace {

// "sray memory key", version 1.
constexpr std::uint32_t kMagic = 0x53524b31;
// Paths and boot ids are short; a larger length is a malformed key.
constexpr std::uint32_t kLongestText = 4096;

void PutInteger(Bytes& out, std::uint64_t value, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) {
    out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
  }
}

void PutBytes(Bytes& out, std::span<const std::byte> bytes) {
  PutInteger(out, bytes.size(), 4);
  out.insert(out.end(), bytes.begin(), bytes.end());
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> input) : input_(input) {}

  bool Integer(std::uint64_t& value, std::size_t width) {
    if (input_.size() - position_ < width) return false;
    value = 0;
    for (std::size_t i = 0; i < width; ++i) {
      value |= static_cast<std::uint64_t>(input_[position_ + i]) << (8 * i);
    }
    position_ += width;
    return true;
  }
  bool Chunk(std::span<const std::byte>& chunk, std::uint64_t longest) {
    std::uint64_t length = 0;
    if (!Integer(length, 4) || length > longest || input_.size() - position_ < length) return false;
    chunk = input_.subspan(position_, length);
    position_ += length;
    return true;
  }
  bool Text(std::string& text) {
    std::span<const std::byte> chunk;
    if (!Chunk(chunk, kLongestText)) return false;
    text.assign(TextOf(chunk));
    return true;
  }
  [[nodiscard]] bool AtEnd() const { return position_ == input_.size(); }

 private:
  std::span<const std::byte> input_;
  std::size_t position_ = 0;
};

}  // namespace

Bytes EncodeMemoryKey(const MemoryKey& key) {
  Bytes out;
  out.reserve(key.ucx_key.size() + 64 + (key.file ? key.file->path.size() + 64 : 0));
  PutInteger(out, kMagic, 4);
  PutBytes(out, key.ucx_key);
  PutInteger(out, key.address, 8);
  PutInteger(out, key.length, 8);
  PutInteger(out, key.file ? 1 : 0, 1);
  if (key.file) {
    PutBytes(out, BytesOf(key.file->host));
    PutBytes(out, BytesOf(key.file->path));
    PutInteger(out, key.file->device, 8);
    PutInteger(out, key.file->inode, 8);
    PutInteger(out, key.file->offset, 8);
  }
  return out;
}

Result<MemoryKey> DecodeMemoryKey(std::span<const std::byte> encoded) {
  const auto malformed = [] {
    return Status::InvalidArgument(
        "malformed remote memory key: it must come from the same job's Transport::Register");
  };
  Reader reader(encoded);
  std::uint64_t magic = 0;
  if (!reader.Integer(magic, 4) || magic != kMagic) return malformed();
  MemoryKey key;
  std::span<const std::byte> ucx_key;
  std::uint64_t has_file = 0;
  if (!reader.Chunk(ucx_key, encoded.size()) || !reader.Integer(key.address, 8) ||
      !reader.Integer(key.length, 8) || !reader.Integer(has_file, 1) || has_file > 1) {
    return malformed();
  }
  key.ucx_key.assign(ucx_key.begin(), ucx_key.end());
  if (has_file == 1) {
    SharedFileOfMemory file;
    if (!reader.Text(file.host) || !reader.Text(file.path) || !reader.Integer(file.device, 8) ||
        !reader.Integer(file.inode, 8) || !reader.Integer(file.offset, 8)) {
      return malformed();
    }
    key.file = std::move(file);
  }
  if (!reader.AtEnd()) return malformed();
  return key;
}

const std::string& ThisHostId() {
  static const std::string id = [] {
    std::ifstream input("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(input, line);
    return line;
  }();
  return id;
}

}  // namespace sray::transport
