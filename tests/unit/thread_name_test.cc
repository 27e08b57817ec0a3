#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

namespace sray {
namespace {

// What ps -L and top -H read.
std::string NameInProc(long thread_id) {
  std::ifstream comm("/proc/self/task/" + std::to_string(thread_id) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

TEST(ThreadName, NamesOnlyTheCallingThreadAsPsShowsIt) {
  const std::string main_name = ThisThreadName();
  std::string seen;
  std::string in_proc;
  std::thread named([&] {
    NameThisThread("sray-progress");
    seen = ThisThreadName();
    in_proc = NameInProc(::syscall(SYS_gettid));
  });
  named.join();
  EXPECT_EQ(seen, "sray-progress");
  EXPECT_EQ(in_proc, "sray-progress");
  EXPECT_EQ(ThisThreadName(), main_name);
}

TEST(ThreadName, ALongNameIsCutToWhatTheKernelKeeps) {
  std::string seen;
  std::thread named([&] {
    NameThisThread("sray-a-name-longer-than-fifteen-bytes");
    seen = ThisThreadName();
  });
  named.join();
  EXPECT_EQ(seen, "sray-a-name-lon");
}

}  // namespace
}  // namespace sray
