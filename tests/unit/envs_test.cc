#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "envs/activation.h"
#include "envs/create.h"
#include "envs/lock.h"
#include "envs/pack.h"
#include "envs/readers.h"
#include "envs/stage.h"
#include "envs/verify.h"
#include "jobsetup/node_setup.h"
#include "jobsetup/resolved_options.h"
#include "jobsetup/step_environment.h"
#include "jobsetup/step_processes.h"

namespace sray::envs {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// A conda-meta record as conda writes it (the fields sray reads, plus some
// it ignores).
std::string Record(const std::string& name, const std::string& version, const std::string& build,
                   const std::string& md5, const std::string& sha256) {
  return R"({"build": ")" + build +
         R"(", "build_number": 0, "channel": "https://conda.anaconda.org/conda-forge/linux-64", "depends": [], "files": ["bin/x"], "fn": ")" +
         name + "-" + version + "-" + build + R"(.conda", "license": "MIT", "md5": ")" + md5 +
         R"(", "name": ")" + name + R"(", "sha256": ")" + sha256 +
         R"(", "subdir": "linux-64", "url": "https://conda.anaconda.org/conda-forge/linux-64/)" +
         name + "-" + version + "-" + build + R"(.conda", "version": ")" + version + R"("})";
}

const std::string kPythonMd5 = "4bea2c4e29ba9a6fe6d9e3b4f5ca2e6b";
const std::string kNumpyMd5 = "7b0c9f3fe0b2a4cf3b5d0e8f7c61a1d2";
const std::string kMutexMd5 = "d7c89558ba9fa0495403155b64376d81";

class EnvsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sray-envs-test-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    prefix_ = root_ / "envs" / "train";
    Write(prefix_ / "conda-meta" / "python-3.11.5-hab00c5b_0_cpython.json",
          Record("python", "3.11.5", "hab00c5b_0_cpython", kPythonMd5, std::string(64, 'a')));
    Write(prefix_ / "conda-meta" / "numpy-1.26.0-py311h64a7726_0.json",
          Record("numpy", "1.26.0", "py311h64a7726_0", kNumpyMd5, std::string(64, 'b')));
    Write(prefix_ / "conda-meta" / "_libgcc_mutex-0.1-conda_forge.json",
          Record("_libgcc_mutex", "0.1", "conda_forge", kMutexMd5, std::string(64, 'c')));
    Write(prefix_ / "conda-meta" / "history", "==> 2026-11-30 <==\n");
    Write(prefix_ / "lib" / "python3.11" / "site-packages" / "requests-2.31.0.dist-info" /
              "INSTALLER",
          "pip\n");
    Write(prefix_ / "lib" / "python3.11" / "site-packages" / "numpy-1.26.0.dist-info" / "INSTALLER",
          "conda\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
  fs::path prefix_;
};

TEST_F(EnvsTest, APrefixListsItsCondaRecordsAndPipDistributions) {
  auto list = ReadPrefix(prefix_);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->packages.size(), 4u);
  EXPECT_EQ(list->packages[0].name, "_libgcc_mutex");
  EXPECT_EQ(list->packages[2].name, "python");
  EXPECT_EQ(list->packages[2].build, "hab00c5b_0_cpython");
  EXPECT_EQ(list->packages[2].channel, "conda-forge");
  EXPECT_EQ(list->packages[2].md5, kPythonMd5);
  EXPECT_EQ(list->packages[3].manager, Manager::kPip);
  EXPECT_EQ(list->packages[3].name, "requests");
}

TEST_F(EnvsTest, AnExportWithBuildsMatchesItsPrefix) {
  Write(root_ / "environment.yml", R"(name: train
channels:
  - conda-forge
dependencies:
  - _libgcc_mutex=0.1=conda_forge
  - numpy=1.26.0=py311h64a7726_0
  - python=3.11.5=hab00c5b_0_cpython
  - pip:
    - requests==2.31.0
variables:
  OMP_NUM_THREADS: "1"
prefix: /opt/conda/envs/train
)");
  auto spec = ReadSpec(root_ / "environment.yml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->complete);
  ASSERT_EQ(spec->variables.size(), 1u);
  EXPECT_EQ(spec->variables[0].first, "OMP_NUM_THREADS");
  const auto differences = Compare(*spec, *ReadPrefix(prefix_));
  EXPECT_TRUE(differences.empty()) << Describe(differences).front();
}

TEST_F(EnvsTest, VerifyCatchesAChangedBuildString) {
  Write(root_ / "environment.yml", R"(name: train
dependencies:
  - _libgcc_mutex=0.1=conda_forge
  - numpy=1.26.0=py311h64a7726_1
  - python=3.11.5=hab00c5b_0_cpython
  - pip:
    - requests==2.31.0
)");
  const auto differences = Compare(*ReadSpec(root_ / "environment.yml"), *ReadPrefix(prefix_));
  ASSERT_EQ(differences.mismatched.size(), 1u);
  EXPECT_EQ(differences.mismatched[0].field, "build");
  EXPECT_EQ(Describe(differences).front(),
            "build of conda package numpy: wanted py311h64a7726_1, found py311h64a7726_0");
}

TEST_F(EnvsTest, VerifyCatchesAChangedHashInAnExplicitFile) {
  Write(root_ / "explicit.txt", R"(# This file may be used to create an environment using:
# $ conda create --name <env> --file <this file>
# platform: linux-64
@EXPLICIT
https://conda.anaconda.org/conda-forge/linux-64/_libgcc_mutex-0.1-conda_forge.tar.bz2#)" +
                                    kMutexMd5 + R"(
https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.0-py311h64a7726_0.conda#)" +
                                    std::string(32, 'f') + R"(
https://conda.anaconda.org/conda-forge/linux-64/python-3.11.5-hab00c5b_0_cpython.conda#)" +
                                    kPythonMd5 + "\n");
  auto spec = ReadSpec(root_ / "explicit.txt");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const auto differences = Compare(*spec, *ReadPrefix(prefix_));
  ASSERT_EQ(differences.mismatched.size(), 1u);
  EXPECT_EQ(differences.mismatched[0].field, "md5");
  EXPECT_EQ(differences.mismatched[0].wanted.name, "numpy");
  // An explicit file cannot list pip packages: requests is not compared,
  // not extra (it was reported as extra before).
  EXPECT_TRUE(differences.extra.empty());
  ASSERT_EQ(differences.not_compared.size(), 1u);
  EXPECT_EQ(differences.not_compared[0].name, "requests");
}

TEST_F(EnvsTest, AFromHistoryExportReportsNoExtrasButChecksVersions) {
  Write(root_ / "history.yml", R"(name: train
channels:
  - conda-forge
dependencies:
  - python=3.11
  - numpy>=1.20
)");
  auto spec = ReadSpec(root_ / "history.yml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_FALSE(spec->complete);
  EXPECT_TRUE(Compare(*spec, *ReadPrefix(prefix_)).empty());
  Write(root_ / "history.yml", "dependencies:\n  - python=3.12\n  - scipy\n");
  const auto differences = Compare(*ReadSpec(root_ / "history.yml"), *ReadPrefix(prefix_));
  ASSERT_EQ(differences.missing.size(), 1u);
  EXPECT_EQ(differences.missing[0].name, "scipy");
  ASSERT_EQ(differences.mismatched.size(), 1u);
  EXPECT_EQ(differences.mismatched[0].field, "version");
  EXPECT_TRUE(differences.extra.empty());
}

TEST_F(EnvsTest, ALockRoundTripsAndDetectsEditing) {
  auto lock = MakeLock(*ReadPrefix(prefix_));
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  EXPECT_EQ(lock->hash.size(), 64u);
  Write(root_ / "train.lock", lock->text);
  auto read = ReadSpec(root_ / "train.lock");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE(Compare(*read, *ReadPrefix(prefix_)).empty());
  EXPECT_EQ(MakeLock(*read)->hash, lock->hash);
  std::string edited = lock->text;
  edited.replace(edited.find("1.26.0"), 6, "1.26.1");
  Write(root_ / "train.lock", edited);
  auto tampered = ReadSpec(root_ / "train.lock");
  ASSERT_FALSE(tampered.ok());
  EXPECT_NE(tampered.status().message().find("recorded hash"), std::string::npos);
}

TEST_F(EnvsTest, ALockNeedsEveryPackagePinned) {
  Write(root_ / "history.yml", "dependencies:\n  - python=3.11\n");
  auto lock = MakeLock(*ReadSpec(root_ / "history.yml"));
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.status().message().find("not pinned"), std::string::npos);
}

TEST_F(EnvsTest, ACondaLockFileIsRead) {
  Write(root_ / "conda-lock.yml", R"(version: 1
metadata:
  content_hash:
    linux-64: 0123
  channels:
  - url: conda-forge
    used_env_vars: []
  platforms:
  - linux-64
  sources:
  - environment.yml
package:
- name: python
  version: 3.11.5
  manager: conda
  platform: linux-64
  dependencies: {}
  url: https://conda.anaconda.org/conda-forge/linux-64/python-3.11.5-hab00c5b_0_cpython.conda
  hash:
    md5: )" + kPythonMd5 + R"(
    sha256: )" + std::string(64, 'a') +
                                      R"(
  category: main
  optional: false
- name: python
  version: 3.11.5
  manager: conda
  platform: osx-arm64
  dependencies: {}
  url: https://conda.anaconda.org/conda-forge/osx-arm64/python-3.11.5-h47c9636_0_cpython.conda
  hash:
    md5: 00000000000000000000000000000000
  category: main
  optional: false
- name: requests
  version: 2.31.0
  manager: pip
  platform: linux-64
  dependencies: {}
  url: https://files.pythonhosted.org/packages/requests-2.31.0-py3-none-any.whl
  hash:
    sha256: )" + std::string(64, 'd') +
                                      R"(
  category: main
  optional: false
)");
  auto spec = ReadSpec(root_ / "conda-lock.yml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->packages.size(), 2u);
  EXPECT_EQ(spec->packages[0].name, "python");
  EXPECT_EQ(spec->packages[0].build, "hab00c5b_0_cpython");
  EXPECT_EQ(spec->packages[1].manager, Manager::kPip);
  const auto differences = Compare(*spec, *ReadPrefix(prefix_));
  EXPECT_EQ(differences.extra.size(), 2u);  // numpy and the mutex are not in it
  EXPECT_TRUE(differences.mismatched.empty());
}

TEST_F(EnvsTest, BadInputGetsAnErrorNamingTheProblem) {
  Write(root_ / "broken.yml", "dependencies: [python=3.11\n");
  auto broken = ReadSpec(root_ / "broken.yml");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("malformed YAML"), std::string::npos);

  Write(root_ / "unknown.yml", "name: x\nflavour: vanilla\ndependencies:\n  - python\n");
  auto unknown = ReadSpec(root_ / "unknown.yml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown field 'flavour'"), std::string::npos);

  Write(prefix_ / "conda-meta" / "broken-1-0.json", "{\"name\": ");
  auto damaged = ReadPrefix(prefix_);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("broken-1-0.json"), std::string::npos);

  auto missing = ReadSpec(root_ / "nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);

  auto not_an_env = ReadPrefix(root_);
  ASSERT_FALSE(not_an_env.ok());
  EXPECT_NE(not_an_env.status().message().find("conda-meta"), std::string::npos);

  Write(root_ / "explicit.txt", "https://conda.anaconda.org/conda-forge/linux-64/x-1-0.conda\n");
  auto no_marker = ReadExplicitFile(root_ / "explicit.txt");
  ASSERT_FALSE(no_marker.ok());
  EXPECT_NE(no_marker.status().message().find("@EXPLICIT"), std::string::npos);
}

TEST_F(EnvsTest, ActivationSetsCondasVariablesThenEnvVarsThenState) {
  Write(prefix_ / "etc" / "conda" / "env_vars.d" / "a.json",
        R"({"OMP_NUM_THREADS": "4", "MODE": "env_vars.d"})");
  Write(prefix_ / "conda-meta" / "state", R"({"env_vars": {"MODE": "state"}})");
  auto activation = Activate(prefix_, [](const std::string& name) -> std::optional<std::string> {
    if (name == "PATH") return std::string("/usr/bin:/bin");
    return std::nullopt;
  });
  ASSERT_TRUE(activation.ok()) << activation.status().message();
  EXPECT_EQ(activation->set.at("PATH"), (prefix_ / "bin").string() + ":/usr/bin:/bin");
  EXPECT_EQ(activation->set.at("CONDA_PREFIX"), prefix_.string());
  EXPECT_EQ(activation->set.at("CONDA_SHLVL"), "1");
  EXPECT_EQ(activation->set.at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(activation->set.at("MODE"), "state");
  EXPECT_TRUE(activation->scripts_run.empty());
}

TEST_F(EnvsTest, ActivateScriptsAreSourcedAndWhatTheySetIsApplied) {
  Write(prefix_ / "etc" / "conda" / "activate.d" / "10-cuda.sh",
        "export CUDA_HOME=\"$CONDA_PREFIX/cuda\"\nexport PATH=\"$CONDA_PREFIX/extra:$PATH\"\n");
  Write(prefix_ / "etc" / "conda" / "activate.d" / "20-unset.sh", "unset CONDA_PROMPT_MODIFIER\n");
  auto activation = Activate(prefix_, [](const std::string& name) -> std::optional<std::string> {
    if (name == "PATH") return std::string("/usr/bin:/bin");
    return std::nullopt;
  });
  ASSERT_TRUE(activation.ok()) << activation.status().message();
  EXPECT_EQ(activation->set.at("CUDA_HOME"), (prefix_ / "cuda").string());
  EXPECT_EQ(activation->set.at("PATH"),
            (prefix_ / "extra").string() + ":" + (prefix_ / "bin").string() + ":/usr/bin:/bin");
  EXPECT_FALSE(activation->set.contains("CONDA_PROMPT_MODIFIER"));
  EXPECT_NE(std::find(activation->unset.begin(), activation->unset.end(), "CONDA_PROMPT_MODIFIER"),
            activation->unset.end());
  EXPECT_EQ(activation->scripts_run.size(), 2u);
}

// `sray run` runs the scripts with INT, TERM and PIPE blocked in its own
// threads (for its signalfd), and the scripts and what they started
// inherited that mask: a hung one went on through Ctrl-C, and `yes | head`
// in one never ended. What a script starts must have nothing blocked.
TEST_F(EnvsTest, ActivateScriptsDoNotInheritTheCallersBlockedSignals) {
  Write(prefix_ / "etc" / "conda" / "activate.d" / "mask.sh",
        "export BLOCKED=$(awk '/^SigBlk:/ {print $2}' /proc/self/status)\n");
  sigset_t blocked;
  sigemptyset(&blocked);
  for (const int signal_number : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&blocked, signal_number);
  sigset_t before;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &blocked, &before), 0);
  auto activation = Activate(prefix_, [](const std::string& name) -> std::optional<std::string> {
    if (name == "PATH") return std::string("/usr/bin:/bin");
    return std::nullopt;
  });
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &before, nullptr), 0);
  ASSERT_TRUE(activation.ok()) << activation.status().message();
  const std::uint64_t mask = std::stoull(activation->set.at("BLOCKED"), nullptr, 16);
  for (const int signal_number : {SIGINT, SIGTERM, SIGPIPE}) {
    EXPECT_EQ(mask & (std::uint64_t{1} << (signal_number - 1)), 0U)
        << "signal " << signal_number << " blocked in what the script ran (SigBlk "
        << activation->set.at("BLOCKED") << ")";
  }
}

TEST_F(EnvsTest, AFailingActivateScriptOrBadVariablesFileActivatesNothing) {
  Write(prefix_ / "etc" / "conda" / "activate.d" / "broken.sh", "false\n");
  auto failed = Activate(prefix_, [](const std::string&) { return std::optional<std::string>(); });
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("broken.sh"), std::string::npos);
  fs::remove(prefix_ / "etc" / "conda" / "activate.d" / "broken.sh");
  Write(prefix_ / "etc" / "conda" / "env_vars.d" / "bad.json", R"({"THREADS": 4})");
  auto bad = Activate(prefix_, [](const std::string&) { return std::optional<std::string>(); });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("THREADS is not a string"), std::string::npos);
}

// A prefix with files holding its own path, as conda installs them.
void AddRelocatableFiles(const fs::path& prefix) {
  Write(prefix / "bin" / "tool", "#!" + (prefix / "bin" / "python").string() + "\nprint('hi')\n");
  std::string binary(
      "\x7f"
      "ELF",
      4);
  binary += std::string(16, '\x01');
  binary += (prefix / "lib").string() + ":/usr/lib";
  binary += std::string(1, '\0');
  binary += "trailer";
  binary += std::string(1, '\0');
  Write(prefix / "lib" / "libfoo.so", binary);
  fs::create_symlink(prefix / "bin" / "tool", prefix / "bin" / "absolute-link");
  fs::create_symlink("tool", prefix / "bin" / "relative-link");
}

TEST_F(EnvsTest, APackUnpacksElsewhereWithThePrefixRelocated) {
  AddRelocatableFiles(prefix_);
  const auto lock = MakeLock(*ReadPrefix(prefix_));
  auto packed = Pack(prefix_, root_ / "train.pack");
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_EQ(packed->relocated_files, 2u);
  EXPECT_EQ(InspectPack(root_ / "train.pack")->lock_hash, lock->hash);

  const fs::path target = root_ / "t";  // shorter than the packed prefix
  std::vector<UnpackProgress> seen;
  auto unpacked = Unpack(root_ / "train.pack", target,
                         [&seen](const UnpackProgress& progress) { seen.push_back(progress); });
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
  ASSERT_EQ(seen.size(), unpacked->files) << "told after every file";
  EXPECT_EQ(seen.back().files, unpacked->files);
  EXPECT_EQ(seen.back().bytes, unpacked->bytes);
  std::ifstream tool(target / "bin" / "tool");
  std::string shebang;
  std::getline(tool, shebang);
  EXPECT_EQ(shebang, "#!" + (target / "bin" / "python").string());
  std::ifstream library(target / "lib" / "libfoo.so", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(library)),
                          std::istreambuf_iterator<char>());
  const std::string relocated = (target / "lib").string() + ":/usr/lib";
  ASSERT_NE(bytes.find(relocated), std::string::npos);
  EXPECT_EQ(bytes.size(), fs::file_size(prefix_ / "lib" / "libfoo.so"))
      << "binary files keep their size";
  EXPECT_EQ(bytes[bytes.find(relocated) + relocated.size()], '\0') << "padded with NULs";
  EXPECT_NE(bytes.find("trailer"), std::string::npos);
  EXPECT_EQ(fs::read_symlink(target / "bin" / "absolute-link"), target / "bin" / "tool");
  EXPECT_EQ(fs::read_symlink(target / "bin" / "relative-link"), "tool");
  EXPECT_TRUE(Compare(*ReadPrefix(prefix_), *ReadPrefix(target)).empty())
      << "the relocated tree verifies";
}

// A pack written by hand, entry by entry, in the format `sray env pack`
// writes (its trailer is never reached by the packs below).
class HandMadePack {
 public:
  HandMadePack() {
    bytes_ = "SRAYPK01";
    Text("/old/prefix");
    Text("0123");
  }
  HandMadePack& Symlink(const std::string& name, const std::string& target) {
    Byte(3);
    Text(name);
    Text(target);
    return *this;
  }
  HandMadePack& File(const std::string& name, const std::string& data, std::uint64_t size) {
    Byte(1);
    Text(name);
    Raw(std::uint32_t{0644});
    Byte(0);
    Raw(size);
    bytes_ += data;
    return *this;
  }
  void WriteTo(const fs::path& path) {
    Byte(0);
    Raw(std::uint64_t{2});
    bytes_ += std::string(32, '\0');
    std::ofstream(path, std::ios::binary) << bytes_;
  }

 private:
  void Byte(char value) { bytes_ += value; }
  template <typename Integer>
  void Raw(Integer value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  void Text(const std::string& text) {
    Raw(static_cast<std::uint32_t>(text.size()));
    bytes_ += text;
  }
  std::string bytes_;
};

// A link made by one entry and a later name through it wrote outside the
// target before the checksum at the end was read.
TEST_F(EnvsTest, UnpackNeverWritesThroughALinkOutOfTheTarget) {
  const fs::path outside = root_ / "outside";
  fs::create_directories(outside);
  HandMadePack()
      .Symlink("lib", outside.string())
      .File("lib/escaped", "hello", 5)
      .WriteTo(root_ / "evil.pack");
  auto unpacked = Unpack(root_ / "evil.pack", root_ / "target");
  ASSERT_FALSE(unpacked.ok());
  EXPECT_NE(
      unpacked.status().message().find("leads out of its prefix through a link (lib/escaped)"),
      std::string::npos)
      << unpacked.status().message();
  EXPECT_FALSE(fs::exists(outside / "escaped"));
  EXPECT_FALSE(fs::exists(root_ / "target"));
}

// Found by tests/fuzz/environment_readers_fuzzer: a damaged size asked for
// an 8 EiB buffer (std::bad_alloc out of Unpack, a crash of `sray env`).
TEST_F(EnvsTest, UnpackRefusesAFileLargerThanThePack) {
  HandMadePack().File("bin/x", "abc", std::uint64_t{1} << 62).WriteTo(root_ / "damaged.pack");
  auto unpacked = Unpack(root_ / "damaged.pack", root_ / "target");
  ASSERT_FALSE(unpacked.ok());
  EXPECT_NE(unpacked.status().message().find("bin/x claims 4611686018427387904 bytes, more than "
                                             "the pack holds"),
            std::string::npos)
      << unpacked.status().message();
  EXPECT_FALSE(fs::exists(root_ / "target"));
}

// Before: a pack cut short (an error, Ctrl-C) left OUTPUT.partial, and
// `sray env pack` had no interrupt handling at all.
TEST_F(EnvsTest, AnInterruptedPackLeavesNoPartialFileAndKeepsTheEarlierPack) {
  AddRelocatableFiles(prefix_);
  const fs::path output = root_ / "train.pack";
  ASSERT_TRUE(Pack(prefix_, output).ok());
  const auto earlier_size = fs::file_size(output);
  int asked = 0;
  auto packed = Pack(prefix_, output, [&asked] { return ++asked == 2; });
  ASSERT_FALSE(packed.ok());
  EXPECT_EQ(asked, 2) << "asked between files, and stopped when told";
  EXPECT_NE(packed.status().message().find("was interrupted"), std::string::npos)
      << packed.status().message();
  EXPECT_FALSE(fs::exists(output.string() + ".partial"));
  EXPECT_EQ(fs::file_size(output), earlier_size);
  EXPECT_TRUE(InspectPack(output).ok()) << "the earlier pack is whole";
}

// SIGKILL, which nothing in the process can handle, mid-pack: it left
// OUT.partial beside OUT. The pack is written without a name until whole.
TEST_F(EnvsTest, AKilledPackLeavesNothingBesideTheEarlierPack) {
  // Only where unnamed files exist: elsewhere (NFS, overlayfs before Linux
  // 6.6) the pack writes OUT.partial, which SIGKILL leaves, as said.
  if (const int unnamed = ::open(root_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
      unnamed < 0) {
    GTEST_SKIP() << root_ << " has no unnamed files (O_TMPFILE)";
  } else {
    ::close(unnamed);
  }
  AddRelocatableFiles(prefix_);
  const fs::path output = root_ / "train.pack";
  ASSERT_TRUE(Pack(prefix_, output).ok());
  const auto earlier_size = fs::file_size(output);
  int working[2];
  ASSERT_EQ(::pipe(working), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Says it is between files, then waits there to be killed.
    (void)Pack(prefix_, output, [&working] {
      (void)!::write(working[1], "x", 1);
      ::pause();
      return false;
    });
    ::_exit(0);
  }
  ::close(working[1]);
  char byte = 0;
  ASSERT_EQ(::read(working[0], &byte, 1), 1) << "the pack never reached its first file";
  ::close(working[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(root_)) {
    if (entry.path().filename().string().starts_with("train.pack"))
      left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"train.pack"});
  EXPECT_EQ(fs::file_size(output), earlier_size);
  EXPECT_TRUE(InspectPack(output).ok()) << "the earlier pack is whole";
  ASSERT_TRUE(Pack(prefix_, output).ok()) << "and is replaced by the next";
  EXPECT_TRUE(InspectPack(output).ok());
}

// Where there are no unnamed files, or killed between its link and its
// rename, a pack leaves OUT.partial.PID: the next pack to OUT removes those
// nobody holds, never one a pack at work holds (it may run on another host).
TEST_F(EnvsTest, APackRemovesThePartialFilesOfKilledPacks) {
  AddRelocatableFiles(prefix_);
  const fs::path output = root_ / "train.pack";
  const fs::path killed = root_ / "train.pack.partial.4242";
  const fs::path working = root_ / "train.pack.partial.4343";
  const fs::path older_version = root_ / "train.pack.partial";
  const fs::path not_a_partial = root_ / "train.pack.partial.notes";
  for (const fs::path& file : {killed, working, older_version, not_a_partial}) Write(file, "x");
  const int held = ::open(working.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0) << "as the pack writing it holds it";
  ASSERT_TRUE(Pack(prefix_, output).ok());
  ::close(held);
  EXPECT_FALSE(fs::exists(killed)) << "nobody held it";
  EXPECT_FALSE(fs::exists(older_version)) << "nobody held it";
  EXPECT_TRUE(fs::exists(working)) << "its pack still works";
  EXPECT_TRUE(fs::exists(not_a_partial)) << "not a name a pack gives";
  EXPECT_TRUE(InspectPack(output).ok());
}

// Makes this process's file systems look like ones without unnamed files
// (some network file systems): open and openat with O_TMPFILE fail with
// EOPNOTSUPP, as there. False where the filter is not written for the
// machine's architecture.
bool RefuseUnnamedFiles() {
#if defined(__x86_64__)
  constexpr std::uint32_t kUnnamedFlag = 020000000;  // __O_TMPFILE, without O_DIRECTORY
  sock_filter instructions[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 2),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),  // openat's flags
      BPF_JUMP(BPF_JMP | BPF_JA, 2, 0, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_open, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),  // open's flags
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, kUnnamedFlag, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EOPNOTSUPP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(instructions)), instructions};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0 &&
         ::open(".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600) < 0 && errno == EOPNOTSUPP;
#else
  return false;
#endif
}

// Where there are no unnamed files, the pack is written as OUT.partial.PID:
// a whole pack leaves only OUT, and what a SIGKILL leaves is the next
// pack's to remove. Shown in children whose O_TMPFILE is refused.
TEST_F(EnvsTest, WithoutUnnamedFilesAPackLeavesOnlyItsOutputAndTheNextRemovesAKilledOnes) {
  AddRelocatableFiles(prefix_);
  const fs::path output = root_ / "train.pack";
  const auto packed_without_unnamed_files = [&](bool killed_between_files) {
    int working[2];
    EXPECT_EQ(::pipe(working), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(working[0]);
      if (!RefuseUnnamedFiles()) ::_exit(77);
      const auto packed = Pack(prefix_, output, [&] {
        if (killed_between_files) {
          (void)!::write(working[1], "x", 1);
          ::pause();
        }
        return false;
      });
      ::_exit(packed.ok() ? 0 : 1);
    }
    ::close(working[1]);
    char byte = 0;
    if (killed_between_files && ::read(working[0], &byte, 1) == 1) ::kill(child, SIGKILL);
    ::close(working[0]);
    int status = 0;
    EXPECT_EQ(::waitpid(child, &status, 0), child);
    return std::pair{child, status};
  };
  const auto left = [&] {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(root_)) {
      if (entry.path().filename().string().starts_with("train.pack"))
        names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  };

  const auto [whole, whole_status] = packed_without_unnamed_files(false);
  if (WIFEXITED(whole_status) && WEXITSTATUS(whole_status) == 77) {
    GTEST_SKIP() << "no seccomp filter for this machine to refuse O_TMPFILE with";
  }
  ASSERT_TRUE(WIFEXITED(whole_status) && WEXITSTATUS(whole_status) == 0) << whole_status;
  EXPECT_EQ(left(), std::vector<std::string>{"train.pack"});
  ASSERT_TRUE(InspectPack(output).ok());
  const auto earlier_size = fs::file_size(output);

  const auto [killed, killed_status] = packed_without_unnamed_files(true);
  ASSERT_TRUE(WIFSIGNALED(killed_status) && WTERMSIG(killed_status) == SIGKILL) << killed_status;
  EXPECT_EQ(left(), (std::vector<std::string>{"train.pack",
                                              "train.pack.partial." + std::to_string(killed)}))
      << "the named partial file is what a SIGKILL leaves there";
  EXPECT_EQ(fs::file_size(output), earlier_size);
  EXPECT_TRUE(InspectPack(output).ok()) << "the earlier pack is whole";

  const auto [next, next_status] = packed_without_unnamed_files(false);
  ASSERT_TRUE(WIFEXITED(next_status) && WEXITSTATUS(next_status) == 0) << next_status;
  EXPECT_EQ(left(), std::vector<std::string>{"train.pack"}) << "the next pack removed it";
  EXPECT_TRUE(InspectPack(output).ok());
}

// A SIGKILLed unpack leaves its staging directory: the next unpack beside
// the same target removes it, but never one that another unpack holds (it
// may run on another host that shares the file system).
TEST_F(EnvsTest, AnUnpackRemovesTheStagingLeftByAKilledUnpack) {
  AddRelocatableFiles(prefix_);
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  const fs::path killed = root_ / ".t.unpacking.4242";
  const fs::path running = root_ / ".t.unpacking.4343";
  const fs::path other_target = root_ / ".u.unpacking.4242";
  for (const fs::path& directory : {killed, running, other_target}) {
    fs::create_directories(directory / "lib");
    Write(directory / "lib" / "half-written", "x");
  }
  const int held = ::open(running.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0) << "as the unpack working there holds it";
  ASSERT_TRUE(Unpack(root_ / "train.pack", root_ / "t").ok());
  ::close(held);
  EXPECT_FALSE(fs::exists(killed)) << "nobody held it";
  EXPECT_TRUE(fs::exists(running)) << "its unpack still works there";
  EXPECT_TRUE(fs::exists(other_target)) << "another target's";
}

// What keeps a working unpack's directory from the sweep above: it holds
// the lock on it while it writes.
TEST_F(EnvsTest, AnUnpackHoldsTheLockOnItsStagingDirectoryWhileItWorks) {
  AddRelocatableFiles(prefix_);
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  const fs::path staging = root_ / (".t.unpacking." + std::to_string(::getpid()));
  int checked = 0;
  auto unpacked = Unpack(root_ / "train.pack", root_ / "t", [&](const UnpackProgress&) {
    if (checked++ > 0) return;
    const int other = ::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(other, 0);
    EXPECT_NE(::flock(other, LOCK_EX | LOCK_NB), 0) << "the unpack does not hold its lock";
    ::close(other);
  });
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
  EXPECT_GT(checked, 0);
}

TEST_F(EnvsTest, UnpackRefusesALongerPrefixForBinariesAndTruncatedPacks) {
  AddRelocatableFiles(prefix_);
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  const fs::path longer = root_ / "a-much-longer-directory-than-before" / "train";
  auto refused = Unpack(root_ / "train.pack", longer);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("lib/libfoo.so"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(fs::exists(longer));
  EXPECT_TRUE(fs::is_empty(longer.parent_path())) << "nothing half-unpacked is left";

  const auto size = fs::file_size(root_ / "train.pack");
  fs::resize_file(root_ / "train.pack", size - 40);
  auto truncated = Unpack(root_ / "train.pack", root_ / "t");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status().message();
  EXPECT_FALSE(fs::exists(root_ / "t"));
}

TEST_F(EnvsTest, StagingSharesOneCopyPerHashAndEvictsTheLeastRecentlyUsed) {
  // Packed from a path longer than the cache's, as a user's environment
  // under their home usually is.
  const fs::path original = prefix_;
  prefix_ = root_ / "home" / "user" / "miniconda3" / "envs" / "train";
  fs::create_directories(prefix_.parent_path());
  fs::copy(original, prefix_, fs::copy_options::recursive);
  AddRelocatableFiles(prefix_);
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  const fs::path cache = root_ / "c";  // short: binaries relocate to shorter paths only
  // Two jobs staging at once: both get the same copy, unpacked once.
  Result<StagedEnvironment> first = Status::Internal("not run");
  Result<StagedEnvironment> second = Status::Internal("not run");
  std::thread other([&] { second = StagePack(root_ / "train.pack", cache, 1ULL << 30); });
  first = StagePack(root_ / "train.pack", cache, 1ULL << 30);
  other.join();
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(first->prefix, second->prefix);
  EXPECT_NE(first->reused, second->reused) << "exactly one of them unpacked it";
  EXPECT_TRUE(Compare(*ReadPrefix(prefix_), *ReadPrefix(first->prefix)).empty());

  // Another environment; with a limit below both, the older copy goes.
  Write(prefix_ / "conda-meta" / "scipy-1.11.3-py311h_0.json",
        Record("scipy", "1.11.3", "py311h_0", std::string(32, 'e'), std::string(64, 'e')));
  ASSERT_TRUE(Pack(prefix_, root_ / "other.pack").ok());
  auto newer = StagePack(root_ / "other.pack", cache, 1);
  ASSERT_TRUE(newer.ok()) << newer.status().message();
  EXPECT_NE(newer->prefix, first->prefix);
  EXPECT_EQ(newer->evicted, 1u);
  EXPECT_FALSE(fs::exists(first->prefix));
  EXPECT_TRUE(fs::exists(newer->prefix / "conda-meta"));
}

// Stages killed by SIGKILL left a staging directory, or a copy without its
// marker (the conda tool's, cut short): kept until the same environment
// was staged again, and neither counted by the limit nor offered.
TEST_F(EnvsTest, TheNextStageRemovesWhatKilledStagesLeftInTheCache) {
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  const fs::path cache = root_ / "c";
  const auto first = StagePack(root_ / "train.pack", cache, 1ULL << 30);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const fs::path killed_unpack = cache / ".0123456789abcdef.unpacking.4242";
  const fs::path running_unpack = cache / ".fedcba9876543210.unpacking.4343";
  const fs::path killed_tool = cache / "spec-00112233aabbccdd";
  const fs::path killed_eviction = cache / "aabbccddeeff0011";
  const fs::path users_own = cache / "notes";
  for (const fs::path& directory :
       {killed_unpack, running_unpack, killed_tool, killed_eviction, users_own}) {
    fs::create_directories(directory / "lib");
    Write(directory / "lib" / "half-written", "x");
  }
  const int held = ::open(running_unpack.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0) << "as the unpack working there holds it";
  auto again = StagePack(root_ / "train.pack", cache, 1ULL << 30);
  ::close(held);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->reused);
  EXPECT_FALSE(fs::exists(killed_unpack)) << "nobody held it";
  EXPECT_FALSE(fs::exists(killed_tool)) << "a copy without its marker";
  EXPECT_FALSE(fs::exists(killed_eviction)) << "a copy without its marker";
  EXPECT_TRUE(fs::exists(running_unpack)) << "its unpack still works there";
  EXPECT_TRUE(fs::exists(users_own)) << "not a name the cache gives";
  EXPECT_TRUE(fs::exists(again->prefix / "conda-meta")) << "the staged copy stays";
}

TEST_F(EnvsTest, ACacheDirectoryAnotherUserCouldHavePlantedIsRefused) {
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  auto header = InspectPack(root_ / "train.pack");
  ASSERT_TRUE(header.ok());
  // What a planted cache holds: a copy with the pack's key and its marker,
  // whose programs would run as the victim's.
  auto plant = [&](const fs::path& cache) {
    Write(cache / header->lock_hash.substr(0, 16) / ".sray-staged", "1\n");
    Write(cache / header->lock_hash.substr(0, 16) / "bin" / "python", "#!/bin/sh\n");
  };

  const fs::path open_to_all = root_ / "open";
  plant(open_to_all);
  fs::permissions(open_to_all, fs::perms::all);
  auto staged = StagePack(root_ / "train.pack", open_to_all, 1ULL << 30);
  ASSERT_FALSE(staged.ok()) << "a world-writable cache was used: " << staged->prefix;
  EXPECT_NE(staged.status().message().find("other users may write into it"), std::string::npos)
      << staged.status().message();
  EXPECT_NE(staged.status().message().find("remove it"), std::string::npos);

  // A cache of this user's own with a wider mode (as older versions or a
  // user's mkdir left it) is narrowed and used.
  const fs::path own = root_ / "own";
  fs::create_directories(own);
  fs::permissions(own, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  auto used = StagePack(root_ / "train.pack", own, 1ULL << 30);
  ASSERT_TRUE(used.ok()) << used.status().message();
  EXPECT_FALSE(used->reused);
  EXPECT_EQ(fs::status(own).permissions() & fs::perms::mask, fs::perms::owner_all);

  // A relative cache ("cache"), and one named with a trailing slash under a
  // umask that lets the group write (its parent is made with the umask, the
  // cache itself 0700): before, the first failed to make "", the second
  // refused the directory it had just made.
  const fs::path before = fs::current_path();
  fs::current_path(root_);
  auto relative = StagePack(root_ / "train.pack", "relative-cache", 1ULL << 30);
  fs::current_path(before);
  ASSERT_TRUE(relative.ok()) << relative.status().message();
  EXPECT_EQ(relative->prefix.parent_path(), fs::path("relative-cache"));
  const mode_t umask_before = ::umask(002);
  auto trailing = StagePack(root_ / "train.pack", root_.string() + "/trailing-cache/", 1ULL << 30);
  ::umask(umask_before);
  ASSERT_TRUE(trailing.ok()) << trailing.status().message();

  if (::geteuid() != 0) return;  // only root can give a directory away
  const fs::path foreign = root_ / "foreign";
  plant(foreign);
  fs::permissions(foreign, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  ASSERT_EQ(::chown(foreign.c_str(), 65534, 65534), 0);
  staged = StagePack(root_ / "train.pack", foreign, 1ULL << 30);
  ASSERT_FALSE(staged.ok()) << "another user's cache was used: " << staged->prefix;
  EXPECT_NE(staged.status().message().find("belongs to uid 65534"), std::string::npos)
      << staged.status().message();
}

// An explicit file for the conda packages of the fixture prefix.
std::string ExplicitFile() {
  return "# platform: linux-64\n@EXPLICIT\n"
         "https://conda.anaconda.org/conda-forge/linux-64/_libgcc_mutex-0.1-conda_forge.tar.bz2#" +
         kMutexMd5 +
         "\nhttps://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.0-py311h64a7726_0.conda#" +
         kNumpyMd5 +
         "\nhttps://conda.anaconda.org/conda-forge/linux-64/"
         "python-3.11.5-hab00c5b_0_cpython.conda#" +
         kPythonMd5 + "\n";
}

TEST_F(EnvsTest, AnExplicitFileOfEveryCondaPackageMatchesAPrefixWithPipPackages) {
  Write(root_ / "explicit.txt", ExplicitFile());
  auto spec = ReadSpec(root_ / "explicit.txt");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const auto differences = Compare(*spec, *ReadPrefix(prefix_));
  EXPECT_TRUE(differences.empty()) << ::testing::PrintToString(Describe(differences));
  EXPECT_EQ(differences.not_compared.size(), 1u);
}

// tests/fixtures/micromamba stands in for micromamba, which cannot be
// installed on this machine (see that script).
fs::path FakeMicromamba(const fs::path& bin) {
  fs::create_directories(bin);
  fs::copy_file(SRAY_TEST_FIXTURES "/micromamba", bin / "micromamba",
                fs::copy_options::overwrite_existing);
  return bin / "micromamba";
}

TEST_F(EnvsTest, AStepNotesWhetherItStagedReusedOrUsedItsEnvironmentInPlace) {
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  auto prepare = [&](const fs::path& source, const std::string& session) {
    fs::create_directories(root_ / session);
    jobsetup::TaskEnvironment environment;
    const Status prepared = jobsetup::PrepareStepEnvironment(
        jobsetup::StepEnvironmentRequest{.source = source,
                                         .tmpdir = root_ / "tmp",
                                         .session_directory = root_ / session,
                                         .uid = ::getuid(),
                                         .task_variable = {},
                                         .progress = {},
                                         .interrupted = {},
                                         .tool_environment = {}},
        environment);
    EXPECT_TRUE(prepared.ok()) << prepared.message();
    std::ifstream file(root_ / session / jobsetup::kEnvironmentNoteFile);
    std::string note;
    std::getline(file, note);
    return note;
  };
  const std::string pack = (root_ / "train.pack").string();
  const std::string staged = prepare(root_ / "train.pack", "first");
  EXPECT_EQ(staged.rfind("staged " + pack + " into ", 0), 0u) << staged;
  EXPECT_NE(staged.find(" files, "), std::string::npos) << staged;
  const std::string reused = prepare(root_ / "train.pack", "second");
  EXPECT_EQ(reused.rfind("used the copy of " + pack + " staged on this node before", 0), 0u)
      << reused;
  EXPECT_EQ(prepare(prefix_, "third"), "used the prefix " + prefix_.string() + " where it is");
}

TEST_F(EnvsTest, StagingASpecReusesTheStagedCopyThatMatchesIt) {
  const fs::path cache = root_ / "c";
  ASSERT_TRUE(Pack(prefix_, root_ / "train.pack").ok());
  auto packed = StagePack(root_ / "train.pack", cache, 1ULL << 30);
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  auto lock = MakeLock(*ReadPrefix(prefix_));
  ASSERT_TRUE(lock.ok());
  Write(root_ / "train.lock", lock->text);

  auto staged = StageSpec(root_ / "train.lock", cache, 1ULL << 30, std::nullopt);
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  EXPECT_TRUE(staged->reused);
  EXPECT_EQ(staged->prefix, packed->prefix);
  EXPECT_EQ(staged->lock_hash, lock->hash);

  // A spec nothing staged matches (the staged copy also has pip's requests),
  // and no tool to make it: say what to do.
  Write(root_ / "other.lock", ExplicitFile());
  auto missing = StageSpec(root_ / "other.lock", cache, 1ULL << 30, std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  for (const std::string part : {"no environment matching", "sray env pack", "micromamba"}) {
    EXPECT_NE(missing.status().message().find(part), std::string::npos)
        << missing.status().message();
  }
}

TEST_F(EnvsTest, StagingASpecCreatesItOnceWithTheUsersCondaTool) {
  const fs::path cache = root_ / "c";
  Write(root_ / "explicit.txt", ExplicitFile());
  const fs::path tool = FakeMicromamba(root_ / "bin");
  auto created = StageSpec(root_ / "explicit.txt", cache, 1ULL << 30, tool);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_FALSE(created->reused);
  EXPECT_EQ(created->prefix.parent_path(), cache);
  EXPECT_TRUE(created->prefix.filename().string().starts_with("spec-"));
  EXPECT_TRUE(Compare(*ReadSpec(root_ / "explicit.txt"), *ReadPrefix(created->prefix)).empty());
  std::ifstream log(cache / (created->prefix.filename().string() + ".log"));
  std::string first_line;
  std::getline(log, first_line);
  EXPECT_EQ(first_line, "micromamba create --yes --prefix " + created->prefix.string() +
                            " --file " + (root_ / "explicit.txt").string());

  auto again = StageSpec(root_ / "explicit.txt", cache, 1ULL << 30, tool);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->reused);
  EXPECT_EQ(again->prefix, created->prefix);
  EXPECT_EQ(again->lock_hash, created->lock_hash);
}

TEST_F(EnvsTest, CreatingASpecsEnvironmentTellsItsProgressWhileTheToolRuns) {
  Write(root_ / "explicit.txt", ExplicitFile());
  FakeMicromamba(root_ / "bin");
  fs::create_directories(root_ / "session");
  std::vector<std::string> lines;
  const std::string path = (root_ / "bin").string() + ":/usr/bin:/bin";
  ::setenv("FAKE_MICROMAMBA_SECONDS", "4", 1);
  jobsetup::TaskEnvironment environment;
  const Status prepared = jobsetup::PrepareStepEnvironment(
      jobsetup::StepEnvironmentRequest{
          .source = root_ / "explicit.txt",
          .tmpdir = root_ / "tmp",
          .session_directory = root_ / "session",
          .uid = ::getuid(),
          .task_variable =
              [&path](const std::string& name) {
                return name == "PATH" ? std::optional<std::string>(path) : std::nullopt;
              },
          .progress = [&lines](const std::string& line) { lines.push_back(line); },
          .interrupted = {},
          .tool_environment = {}},
      environment);
  ::unsetenv("FAKE_MICROMAMBA_SECONDS");
  ASSERT_TRUE(prepared.ok()) << prepared.message();
  // 4 s: one line after 2 s (the next would come 5 s later), then the outcome.
  ASSERT_GE(lines.size(), 2u) << ::testing::PrintToString(lines);
  const std::string& first = lines.front();
  const std::string start = "creating the environment of " + (root_ / "explicit.txt").string() +
                            " with micromamba: ";
  EXPECT_EQ(first.rfind(start, 0), 0u) << first;
  EXPECT_NE(first.find(" files, "), std::string::npos) << first;
  EXPECT_NE(first.find(" MiB so far; micromamba: Downloading packages ["), std::string::npos)
      << first;
  EXPECT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines.back().rfind("made ", 0), 0u) << lines.back();
}

// Before: `sray run` blocked INT and TERM for its signalfd, the tool inherited
// the mask, and nothing asked while it ran: a Ctrl-C during a creation of
// minutes was acted on only after it, and the program then started anyway.
TEST_F(EnvsTest, AnInterruptedCreationEndsTheToolAtOnceAndLeavesNoCopy) {
  const fs::path cache = root_ / "c";
  Write(root_ / "explicit.txt", ExplicitFile());
  const auto tool = FakeMicromamba(root_ / "bin");
  // The caller's mask, as `sray run` has it: the tool must not inherit it.
  sigset_t blocked;
  sigset_t original;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &blocked, &original), 0);
  ::setenv("FAKE_MICROMAMBA_SECONDS", "30", 1);
  const auto started = std::chrono::steady_clock::now();
  auto interrupted = StageSpec(root_ / "explicit.txt", cache, 1ULL << 30, tool, {}, [&] {
    return std::chrono::steady_clock::now() - started > std::chrono::seconds(1);
  });
  const auto took = std::chrono::steady_clock::now() - started;
  ::unsetenv("FAKE_MICROMAMBA_SECONDS");
  pthread_sigmask(SIG_SETMASK, &original, nullptr);
  ASSERT_FALSE(interrupted.ok());
  EXPECT_NE(interrupted.status().message().find("was interrupted"), std::string::npos)
      << interrupted.status().message();
  // Ended by its TERM (the mask was not inherited), not after 5 s by KILL.
  EXPECT_LT(took, std::chrono::seconds(4));
  for (const auto& entry : fs::directory_iterator(cache)) {
    EXPECT_FALSE(entry.is_directory()) << "left behind: " << entry.path();
  }
}

// A launcher killed while a node's environment was being created left the
// node's session directory and the conda tool running: what cleans up after
// it (its janitor) was told of the node only once staging had ended, and the
// tool carried nothing that marked it as one of the step's processes.
TEST_F(EnvsTest, ANodeIsAnnouncedBeforeItsEnvironmentIsCreatedAndTheToolIsOneOfTheStepsProcesses) {
  Write(root_ / "explicit.txt", ExplicitFile());
  FakeMicromamba(root_ / "bin");
  fs::create_directories(root_ / "tmp");
  const std::string path = (root_ / "bin").string() + ":/usr/bin:/bin";
  auto options =
      jobsetup::ResolveOptions({.admin_config = std::nullopt,
                                .option_list = "tmpdir=" + (root_ / "tmp").string() +
                                               ",env=" + (root_ / "explicit.txt").string()});
  ASSERT_TRUE(options.ok()) << options.status().message();
  std::optional<jobsetup::NodeSetup> announced;
  bool tool_was_found = false;
  const auto started = std::chrono::steady_clock::now();
  ::setenv("FAKE_MICROMAMBA_SECONDS", "30", 1);
  auto setup = jobsetup::PrepareNode(
      {.job_id = "unit" + std::to_string(::getpid()) + "-staging",
       .step_id = "0",
       .node_id = 2,
       .num_nodes = 3,
       .node_cpus = 2,
       .node_memory_bytes = std::uint64_t{1} << 30,
       .head_host = "n1",
       .uid = ::geteuid(),
       .options = *options,
       .session_directory_per_node = true,
       .nodes_on_this_machine = 1,
       .task_variable =
           [&path](const std::string& name) {
             return name == "PATH" ? std::optional<std::string>(path) : std::nullopt;
           },
       .progress = {},
       // Asked while the tool runs: ends the creation once the tool is found
       // among the announced node's processes, or after 5 s.
       .interrupted =
           [&] {
             if (announced) {
               tool_was_found =
                   !jobsetup::FindStepProcesses({.uid = ::geteuid(),
                                                 .session_directory = announced->session_directory,
                                                 .node_id = 2})
                        .empty();
             }
             return tool_was_found ||
                    std::chrono::steady_clock::now() - started > std::chrono::seconds(5);
           },
       .created =
           [&](const jobsetup::NodeSetup& node) {
             EXPECT_TRUE(fs::is_directory(node.session_directory));
             announced = node;
           }});
  ::unsetenv("FAKE_MICROMAMBA_SECONDS");
  ASSERT_FALSE(setup.ok()) << "the creation was not interrupted";
  ASSERT_TRUE(announced.has_value())
      << "the node was not announced before its environment was created";
  EXPECT_TRUE(tool_was_found) << "the conda tool is not among the node's processes";
  EXPECT_FALSE(fs::exists(announced->session_directory));  // an interrupted node is torn down
}

// Polled for an interrupt only, with no one to tell the progress to: the
// first progress line, after 2 s, called the empty observer (bad_function_call).
TEST_F(EnvsTest, ACreationWatchedOnlyForAnInterruptRunsPastItsFirstProgressLine) {
  Write(root_ / "explicit.txt", ExplicitFile());
  const auto tool = FakeMicromamba(root_ / "bin");
  ::setenv("FAKE_MICROMAMBA_SECONDS", "30", 1);
  const auto started = std::chrono::steady_clock::now();
  auto interrupted = StageSpec(root_ / "explicit.txt", root_ / "c", 1ULL << 30, tool, {}, [&] {
    return std::chrono::steady_clock::now() - started > std::chrono::milliseconds(2500);
  });
  ::unsetenv("FAKE_MICROMAMBA_SECONDS");
  ASSERT_FALSE(interrupted.ok());
  EXPECT_NE(interrupted.status().message().find("was interrupted"), std::string::npos)
      << interrupted.status().message();
}

TEST_F(EnvsTest, AFailedOrWrongCreationLeavesNoCopyBehind) {
  const fs::path cache = root_ / "c";
  Write(root_ / "explicit.txt", ExplicitFile());
  ::setenv("FAKE_MICROMAMBA_FAIL", "3", 1);
  auto failed = StageSpec(root_ / "explicit.txt", cache, 1ULL << 30, FakeMicromamba(root_ / "bin"));
  ::unsetenv("FAKE_MICROMAMBA_FAIL");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("exit status 3"), std::string::npos)
      << failed.status().message();
  EXPECT_NE(failed.status().message().find(".log"), std::string::npos);

  ::setenv("FAKE_MICROMAMBA_SKIP", "numpy", 1);
  auto wrong = StageSpec(root_ / "explicit.txt", cache, 1ULL << 30, FakeMicromamba(root_ / "bin"));
  ::unsetenv("FAKE_MICROMAMBA_SKIP");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("does not match"), std::string::npos)
      << wrong.status().message();
  EXPECT_NE(wrong.status().message().find("numpy"), std::string::npos);
  for (const auto& entry : fs::directory_iterator(cache)) {
    EXPECT_FALSE(entry.is_directory()) << "left behind: " << entry.path();
  }
}

TEST_F(EnvsTest, ALockBecomesPinnedMatchSpecsButPipPackagesAreRefused) {
  auto installed = ReadPrefix(prefix_);
  ASSERT_TRUE(installed.ok());
  auto conda_only = *installed;
  std::erase_if(conda_only.packages, [](const Package& p) { return p.manager == Manager::kPip; });
  Write(root_ / "conda.lock", MakeLock(conda_only)->text);
  auto command = CreateCommand("/opt/micromamba", root_ / "conda.lock", "/envs/x");
  ASSERT_TRUE(command.ok()) << command.status().message();
  const std::vector<std::string> head(command->begin(), command->begin() + 6);
  EXPECT_EQ(head, (std::vector<std::string>{"/opt/micromamba", "create", "--yes", "--prefix",
                                            "/envs/x", "--override-channels"}));
  EXPECT_NE(std::find(command->begin(), command->end(), "numpy=1.26.0=py311h64a7726_0"),
            command->end());
  EXPECT_NE(std::find(command->begin(), command->end(), "--channel"), command->end());

  Write(root_ / "full.lock", MakeLock(*installed)->text);
  auto with_pip = CreateCommand("/opt/micromamba", root_ / "full.lock", "/envs/x");
  ASSERT_FALSE(with_pip.ok());
  EXPECT_NE(with_pip.status().message().find("pip package requests"), std::string::npos);
}

TEST_F(EnvsTest, EachSpecFormatGetsTheCommandCondaReadsItWith) {
  Write(root_ / "environment.yml",
        "name: train\ndependencies:\n  - numpy=1.26.0=py311h64a7726_0\n");
  Write(root_ / "explicit.txt", ExplicitFile());
  auto yaml = CreateCommand("/opt/conda", root_ / "environment.yml", "/envs/x");
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  EXPECT_EQ(*yaml,
            (std::vector<std::string>{"/opt/conda", "env", "create", "--yes", "--prefix", "/envs/x",
                                      "--file", (root_ / "environment.yml").string()}));
  auto explicit_file = CreateCommand("/opt/conda", root_ / "explicit.txt", "/envs/x");
  ASSERT_TRUE(explicit_file.ok());
  EXPECT_EQ(*explicit_file,
            (std::vector<std::string>{"/opt/conda", "create", "--yes", "--prefix", "/envs/x",
                                      "--file", (root_ / "explicit.txt").string()}));
  EXPECT_FALSE(CreateCommand("/opt/conda", prefix_, "/envs/x").ok()) << "a prefix is no spec";
}

TEST(CondaToolTest, TheFirstOfMicromambaMambaCondaOnPathIsUsed) {
  const fs::path root =
      fs::temp_directory_path() / ("sray-tool-test-" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (const auto& [directory, tool] : {std::pair{"a", "conda"}, std::pair{"b", "micromamba"}}) {
    Write(root / directory / tool, "#!/bin/sh\n");
    fs::permissions(root / directory / tool, fs::perms::owner_all);
  }
  const std::string path = (root / "a").string() + "::" + (root / "b").string();
  EXPECT_EQ(FindCondaTool(path), root / "b" / "micromamba");
  EXPECT_EQ(FindCondaTool((root / "a").string()), root / "a" / "conda");
  EXPECT_EQ(FindCondaTool("/nonexistent"), std::nullopt);
  // Not executable, or a directory: skipped, as execvp would.
  Write(root / "c" / "micromamba", "#!/bin/sh\n");
  fs::permissions(root / "c" / "micromamba", fs::perms::owner_read);
  fs::create_directories(root / "d" / "micromamba");
  EXPECT_EQ(FindCondaTool((root / "c").string() + ":" + (root / "d").string() + ":" +
                          (root / "a").string()),
            root / "a" / "conda");
  fs::remove_all(root);
}

TEST(CondaSpecTest, ParsesTheFormsEnvironmentFilesUse) {
  auto full = ParseCondaSpec("python=3.11.5=hab00c5b_0_cpython");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->version, "3.11.5");
  EXPECT_EQ(full->build, "hab00c5b_0_cpython");
  auto channel = ParseCondaSpec("conda-forge::numpy>=1.20");
  ASSERT_TRUE(channel.ok());
  EXPECT_EQ(channel->channel, "conda-forge");
  EXPECT_EQ(channel->version_operator, ">=");
  auto spaced = ParseCondaSpec("numpy 1.26.0 py311h64a7726_0");
  ASSERT_TRUE(spaced.ok());
  EXPECT_EQ(spaced->build, "py311h64a7726_0");
  EXPECT_FALSE(ParseCondaSpec("numpy~=1").ok());
  EXPECT_TRUE(VersionSatisfies(*ParseCondaSpec("python=3.11"), "3.11.5"));
  EXPECT_FALSE(VersionSatisfies(*ParseCondaSpec("python=3.1"), "3.11.5"));
  EXPECT_TRUE(VersionSatisfies(*ParseCondaSpec("numpy>=1.9"), "1.26.0"));
  EXPECT_FALSE(VersionSatisfies(*ParseCondaSpec("numpy<1.20"), "1.26.0"));
  auto pip = ParsePipSpec("Typing_Extensions==4.8.0");
  ASSERT_TRUE(pip.ok());
  EXPECT_EQ(pip->name, "typing-extensions");
  EXPECT_FALSE(ParsePipSpec("-e git+https://example.org/x").ok());
}

// Found by tests/fuzz/environment_readers_fuzzer: an operator without a
// version threw std::out_of_range out of ParsePipSpec (a crash of `sray env`).
TEST(PackageSpecs, APipRequirementWithAnOperatorButNoVersionIsAnError) {
  for (const char* spec : {"numpy>=", "numpy ==  ", "numpy[extra]~="}) {
    auto parsed = ParsePipSpec(spec);
    ASSERT_FALSE(parsed.ok()) << spec;
    EXPECT_NE(parsed.status().message().find("has an operator but no version"), std::string::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace sray::envs
