#include "transport/memory_key.h"

#include <cstring>
#include <fstream>
#include <string_view>

#include "transport/little_endian.h"

namespace sray::transport {
namespace {

// "sray memory key", version 1.
constexpr std::uint32_t kMagic = 0x53524b31;
// Paths and boot ids are short; a larger length is a malformed key.
constexpr std::uint32_t kLongestText = 4096;

// A length-prefixed run of bytes.
void AppendChunk(Bytes& out, std::span<const std::byte> bytes) {
  AppendLittleEndian<std::uint32_t>(out, static_cast<std::uint32_t>(bytes.size()));
  out.insert(out.end(), bytes.begin(), bytes.end());
}

bool ReadChunk(ByteReader& reader, std::span<const std::byte>& chunk, std::uint64_t longest) {
  std::uint32_t length = 0;
  return reader.Read(length) && length <= longest && reader.Take(length, chunk);
}

bool ReadText(ByteReader& reader, std::string& text) {
  std::span<const std::byte> chunk;
  if (!ReadChunk(reader, chunk, kLongestText)) return false;
  text.assign(TextOf(chunk));
  return true;
}

}  // namespace

Bytes EncodeMemoryKey(const MemoryKey& key) {
  Bytes out;
  out.reserve(key.ucx_key.size() + 64 + (key.file ? key.file->path.size() + 96 : 0));
  // Widths written out: a field's type changing must not change the format.
  AppendLittleEndian<std::uint32_t>(out, kMagic);
  AppendChunk(out, key.ucx_key);
  AppendLittleEndian<std::uint64_t>(out, key.address);
  AppendLittleEndian<std::uint64_t>(out, key.length);
  AppendLittleEndian<std::uint8_t>(out, key.file ? 1 : 0);
  if (key.file) {
    AppendChunk(out, BytesOf(key.file->host));
    AppendChunk(out, BytesOf(key.file->path));
    AppendLittleEndian<std::uint64_t>(out, key.file->device);
    AppendLittleEndian<std::uint64_t>(out, key.file->inode);
    AppendLittleEndian<std::uint64_t>(out, key.file->offset);
  }
  return out;
}

Result<MemoryKey> DecodeMemoryKey(std::span<const std::byte> encoded) {
  const auto malformed = [] {
    return Status::InvalidArgument(
        "malformed remote memory key: it must come from the same job's Transport::Register");
  };
  ByteReader reader(encoded);
  std::uint32_t magic = 0;
  if (!reader.Read(magic) || magic != kMagic) return malformed();
  MemoryKey key;
  std::span<const std::byte> ucx_key;
  std::uint8_t has_file = 0;
  if (!ReadChunk(reader, ucx_key, encoded.size()) || !reader.Read(key.address) ||
      !reader.Read(key.length) || !reader.Read(has_file) || has_file > 1) {
    return malformed();
  }
  key.ucx_key.assign(ucx_key.begin(), ucx_key.end());
  if (has_file == 1) {
    SharedFileOfMemory file;
    if (!ReadText(reader, file.host) || !ReadText(reader, file.path) || !reader.Read(file.device) ||
        !reader.Read(file.inode) || !reader.Read(file.offset)) {
      return malformed();
    }
    key.file = std::move(file);
  }
  if (reader.left() != 0) return malformed();
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
