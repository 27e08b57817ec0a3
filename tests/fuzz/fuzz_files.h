#pragma once

// A private scratch directory per fuzzer process, for readers that take a
// path: each input is written to a file there before the reader runs.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace sray::fuzz {

// Removed when the fuzzer exits normally (a crash leaves it for a look).
inline const std::filesystem::path& ScratchDirectory() {
  static const std::filesystem::path directory = [] {
    auto path =
        std::filesystem::temp_directory_path() / ("sray-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(ScratchDirectory(), ignored);
    });
    return path;
  }();
  return directory;
}

// Writes the input to ScratchDirectory()/name and returns the path.
inline std::filesystem::path WriteInput(const std::string& name, const std::uint8_t* data,
                                        std::size_t size) {
  const auto path = ScratchDirectory() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace sray::fuzz
