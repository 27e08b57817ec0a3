// A job that stays up while the dashboard test looks at it: runs a few
// tasks, then waits until the file named by its argument exists (at most
// 120 s), and ends.
//
//   dashboard_check DONE_FILE

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <sray/api.h>

#include "check.h"

namespace {

// Prints from the worker: its lines reach the job's output with a prefix
// and the worker's log file.
std::int64_t twice(std::int64_t value) {
  std::cout << "twice(" << value << ") on node " << sray::CurrentNode().node_id << std::endl;
  if (value == 7) std::cerr << "a line on standard error from twice(7)" << std::endl;
  return 2 * value;
}
SRAY_REMOTE(twice);

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  if (argc < 2) sray::check::Fail("usage: dashboard_check DONE_FILE");
  std::vector<sray::ObjectRef<std::int64_t>> refs;
  for (std::int64_t value = 0; value < 20; ++value) refs.push_back(sray::Task(twice).Remote(value));
  std::int64_t sum = 0;
  for (const auto value : sray::Get(refs)) sum += value;
  sray::check::Expect(sum == 380, "tasks ran");
  std::cout << "ready" << std::endl;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(argv[1]) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sray::Shutdown();
  return 0;
}
