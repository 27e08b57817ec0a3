#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "common/huge_page_buffer.h"

namespace sray {
namespace {

// The VmFlags line of the mapping of /proc/self/smaps that holds `address`.
std::string VmFlagsOfMappingAt(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto wanted = reinterpret_cast<std::uintptr_t>(address);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    std::uintptr_t start = 0;
    std::uintptr_t end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= wanted && wanted < end;
    } else if (inside && line.starts_with("VmFlags:")) {
      return line;
    }
  }
  return {};
}

TEST(HugePageBuffer, SmallBuffersComeFromTheHeap) {
  HugePageBuffer buffer(4096);
  EXPECT_EQ(buffer.size(), 4096u);
  EXPECT_FALSE(buffer.mapped());
  std::memset(buffer.data(), 7, buffer.size());
}

TEST(HugePageBuffer, LargeBuffersAreMappedAlignedToAHugePageAndAdvisedForHugePages) {
  std::ifstream huge_page_size("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  std::size_t huge_page = 0;
  if (huge_page_size >> huge_page && huge_page > HugePageBuffer::kMappedFrom) {
    GTEST_SKIP() << "huge pages of " << huge_page << " bytes: 3 MiB comes from the heap";
  }
  HugePageBuffer buffer((std::size_t{3} << 20) + 5);
  ASSERT_TRUE(buffer.mapped());
  EXPECT_EQ(buffer.size(), (std::size_t{3} << 20) + 5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % HugePageBuffer::kMappedFrom, 0u);
  std::memset(buffer.data(), 7, buffer.size());  // every byte asked for is writable
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  const std::string flags = VmFlagsOfMappingAt(buffer.data());
  if (flags.empty()) GTEST_SKIP() << "this kernel's /proc/self/smaps has no VmFlags";
  // "hg": the mapping was given MADV_HUGEPAGE.
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

TEST(HugePageBuffer, MovingHandsTheMemoryOverAndFreesWhatWasHeld) {
  HugePageBuffer first(std::size_t{4} << 20);
  std::byte* const memory = first.data();
  HugePageBuffer second(std::move(first));
  EXPECT_EQ(second.data(), memory);
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): checks the move
  EXPECT_EQ(first.size(), 0u);
  second = HugePageBuffer(100);
  EXPECT_FALSE(second.mapped());
  // The 4 MiB mapping is gone (the address may have been mapped again since,
  // but not advised for huge pages).
  EXPECT_EQ(VmFlagsOfMappingAt(memory).find(" hg"), std::string::npos);
}

}  // namespace
}  // namespace sray
