// libFuzzer target for the environment readers (envs/): environment.yml,
// explicit files, conda-lock files, sray locks, format detection, pack
// headers and unpacking, and package specs. The first byte picks which; the
// rest is the file or the spec. Anything must be read or fail with a Status
// naming the problem, never crash; an unpack never writes beside its target.
//   build-fuzz/tests/sray_environment_readers_fuzzer tests/fuzz/corpus/environment_readers

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "envs/lock.h"
#include "envs/pack.h"
#include "envs/package.h"
#include "envs/readers.h"
#include "fuzz_files.h"

namespace {

void ExpectMessage(const sray::Status& status) {
  if (!status.ok() && status.message().empty()) std::abort();
}

// Unpacks into AREA/target, where AREA holds nothing else: anything else
// found in AREA afterwards was written beside the target.
void UnpackInto(const std::filesystem::path& pack) {
  const auto area = sray::fuzz::ScratchDirectory() / "unpack-area";
  const auto target = area / "target";
  std::error_code ignored;
  std::filesystem::remove_all(area, ignored);
  std::filesystem::create_directories(area);
  ExpectMessage(sray::envs::Unpack(pack, target).status());
  for (const auto& entry : std::filesystem::directory_iterator(area)) {
    if (entry.path().filename() != "target") std::abort();
  }
  std::filesystem::remove_all(area, ignored);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t* rest = data + 1;
  const std::size_t rest_size = size - 1;
  const std::string_view text(reinterpret_cast<const char*>(rest), rest_size);
  switch (data[0] % 10) {
    case 0:
      ExpectMessage(sray::envs::ReadEnvironmentYaml(
                        sray::fuzz::WriteInput("environment.yml", rest, rest_size))
                        .status());
      break;
    case 1:
      ExpectMessage(
          sray::envs::ReadExplicitFile(sray::fuzz::WriteInput("explicit.txt", rest, rest_size))
              .status());
      break;
    case 2:
      ExpectMessage(
          sray::envs::ReadCondaLock(sray::fuzz::WriteInput("conda-lock.yml", rest, rest_size))
              .status());
      break;
    case 3:
      ExpectMessage(
          sray::envs::ReadLock(sray::fuzz::WriteInput("sray.lock", rest, rest_size)).status());
      break;
    case 4:
      ExpectMessage(sray::envs::ReadSpec(sray::fuzz::WriteInput("spec", rest, rest_size)).status());
      break;
    case 5:
      ExpectMessage(
          sray::envs::InspectPack(sray::fuzz::WriteInput("env.pack", rest, rest_size)).status());
      break;
    case 6: UnpackInto(sray::fuzz::WriteInput("env.pack", rest, rest_size)); break;
    case 7:
      ExpectMessage(sray::envs::ParseCondaSpec(text).status());
      ExpectMessage(sray::envs::ParsePipSpec(text).status());
      break;
    case 8: ExpectMessage(sray::envs::PackageFromUrl(text).status()); break;
    default: ExpectMessage(sray::envs::PackageFromFileName(text).status()); break;
  }
  return 0;
}
