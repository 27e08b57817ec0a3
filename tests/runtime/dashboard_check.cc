// A job that stays up while the dashboard test looks at it: runs a few
// tasks (one that throws), starts an actor named "greeter" that prints and
// may restart once, and a placement group, then waits until the file named
// by its argument exists (at most 120 s), and ends.
//
//   dashboard_check DONE_FILE

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <stdexcept>
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
std::int64_t refuse(std::int64_t value) {
  throw std::invalid_argument("refuse(" + std::to_string(value) + ") always throws");
}

// An actor whose prints `sray logs --actor greeter` shows.
class Greeter {
 public:
  static Greeter* Create(std::string greeting) {
    std::cout << "greeter starts with '" << greeting << "'" << std::endl;
    return new Greeter(std::move(greeting));
  }
  std::string Greet(std::string whom) {
    std::cout << greeting_ << ", " << whom << std::endl;
    return greeting_ + ", " + whom;
  }
  std::int64_t Pid() const { return ::getpid(); }

 private:
  explicit Greeter(std::string greeting) : greeting_(std::move(greeting)) {}
  std::string greeting_;
};

// The pid of the task worker that runs it (never an actor's: an actor keeps
// its worker to itself).
std::int64_t worker_pid() {
  return ::getpid();
}

SRAY_REMOTE(twice, refuse, worker_pid, Greeter::Create, &Greeter::Greet, &Greeter::Pid);

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  if (argc < 2) sray::check::Fail("usage: dashboard_check DONE_FILE");
  std::vector<sray::ObjectRef<std::int64_t>> refs;
  for (std::int64_t value = 0; value < 20; ++value) refs.push_back(sray::Task(twice).Remote(value));
  std::int64_t sum = 0;
  for (const auto value : sray::Get(refs)) sum += value;
  sray::check::Expect(sum == 380, "tasks ran");
  bool threw = false;
  try {
    sray::Get(sray::Task(refuse).Remote(1));
  } catch (const sray::TaskError&) {
    threw = true;
  }
  sray::check::Expect(threw, "refuse threw");
  auto greeter = sray::Actor(Greeter::Create).SetName("greeter").SetMaxRestarts(1).Remote("hello");
  sray::check::Expect(
      sray::Get(greeter.Task(&Greeter::Greet).Remote("dashboard")) == "hello, dashboard",
      "the greeter greets");
  const auto greeter_pid = sray::Get(greeter.Task(&Greeter::Pid).Remote());
  auto group = sray::CreatePlacementGroup({.name = "pair",
                                           .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                                           .strategy = sray::PlacementStrategy::kSpread});
  sray::check::Expect(group.Wait(std::chrono::seconds(30)), "the placement group is placed");
  std::cout << "greeter pid " << greeter_pid << std::endl;
  // A live task worker for the test to kill (the twice tasks' worker may
  // since host the greeter).
  std::cout << "task worker pid " << sray::Get(sray::Task(worker_pid).Remote()) << std::endl;
  std::cout << "ready" << std::endl;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(argv[1]) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sray::Shutdown();
  return 0;
}
