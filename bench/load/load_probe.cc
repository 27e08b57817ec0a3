// The load of bench/load (issue 14, item 4): TASKS no-op tasks submitted
// as fast as the driver can, every result checked, then every reference
// dropped. Before it, a warm-up: WARMUP tasks the same way, then DRAIN
// seconds, so that "start" is a driver whose transport queues, allocator
// caches and worker pool have seen a burst (what any burst reaches once,
// and is kept for the next: docs/reliability.md, Load). Prints timestamped
// phase lines for the memory sampler:
//   load: cold T           (CLOCK_REALTIME ns; every node has a worker)
//   load: start T          (after the warm-up and DRAIN seconds)
//   load: submitted T
//   load: done T ok=K wrong=W
//   load: drained T        (DRAIN seconds after the references were dropped:
//                           jemalloc hands freed pages back over 10 s)
//   memory: PHASE rss_anon=KiB rss_file=KiB rss_shmem=KiB [allocated=B
//           active=B metadata=B resident=B mapped=B retained=B
//           thread_caches=B]  (this process cold, at start, once every
//           task is submitted (about the peak), once every result is in
//           (the references still held) and drained: what the resident set
//           is made of; jemalloc's part only where it is the allocator)
//
//   load_probe [TASKS [DRAIN [WARMUP]]]    (default 1,000,000, 12 and 20,000)

#include <dlfcn.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <sray/api.h>

#include "common/every_node.h"

namespace {

std::int64_t RealtimeNanoseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

std::uint64_t twice(std::uint64_t value) {
  return 2 * value;
}

// Where this process's resident memory is: anonymous, files (code) and
// shared memory (the object store's pages it touched), and what jemalloc
// says of its own: bytes the program holds, pages it uses, its metadata.
void PrintMemory(const char* phase) {
  // With SRAY_LOAD_PROBE_SMAPS=DIR, each phase's /proc/self/smaps is kept
  // as DIR/PHASE: which mappings grew (docs/reliability.md, Load).
  if (const char* directory = std::getenv("SRAY_LOAD_PROBE_SMAPS")) {
    std::ifstream smaps("/proc/self/smaps");
    std::ofstream(std::string(directory) + "/" + phase) << smaps.rdbuf();
  }
  using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  const auto mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  // With MALLOC_CONF=prof:true as well, jemalloc's heap profile of each
  // phase goes there too, as DIR/PHASE.heap (jeprof --base=DIR/cold.heap).
  if (const char* directory = std::getenv("SRAY_LOAD_PROBE_SMAPS"); directory && mallctl) {
    const std::string path = std::string(directory) + "/" + phase + ".heap";
    const char* name = path.c_str();
    (void)mallctl("prof.dump", nullptr, nullptr, &name, sizeof(name));
  }
  std::cout << "memory: " << phase;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    for (const char* field : {"RssAnon", "RssFile", "RssShmem"}) {
      const std::string key = std::string(field) + ":";
      if (line.rfind(key, 0) != 0) continue;
      std::string name = field == std::string("RssAnon")   ? "rss_anon"
                         : field == std::string("RssFile") ? "rss_file"
                                                           : "rss_shmem";
      std::cout << " " << name << "=" << std::stoull(line.substr(key.size()));
    }
  }
  if (mallctl != nullptr) {
    std::uint64_t epoch = 1;
    std::size_t length = sizeof(epoch);
    (void)mallctl("epoch", &epoch, &length, &epoch, sizeof(epoch));  // refreshes the statistics
    for (const char* statistic :
         {"allocated", "active", "metadata", "resident", "mapped", "retained"}) {
      std::size_t value = 0;
      length = sizeof(value);
      if (mallctl((std::string("stats.") + statistic).c_str(), &value, &length, nullptr, 0) == 0) {
        std::cout << " " << statistic << "=" << value;
      }
    }
    std::size_t value = 0;
    length = sizeof(value);
    // MALLCTL_ARENAS_ALL (4096): what every thread's cache holds.
    if (mallctl("stats.arenas.4096.tcache_bytes", &value, &length, nullptr, 0) == 0) {
      std::cout << " thread_caches=" << value;
    }
  }
  std::cout << std::endl;
}

// Submits `tasks` tasks, checks their results, drops the references; with
// `report`, prints the phase lines and memory of each step.
void RunTasks(std::size_t tasks, bool report, std::size_t& ok, std::size_t& wrong) {
  std::vector<sray::ObjectRef<std::uint64_t>> refs;
  refs.reserve(tasks);
  for (std::size_t index = 0; index < tasks; ++index)
    refs.push_back(sray::Task(twice).Remote(std::uint64_t{index}));
  if (report) {
    std::cout << "load: submitted " << RealtimeNanoseconds() << std::endl;
    PrintMemory("submitted");
  }
  // In slices, so that results are checked while later ones still run.
  constexpr std::size_t kSlice = 10'000;
  for (std::size_t first = 0; first < tasks; first += kSlice) {
    const std::size_t last = std::min(tasks, first + kSlice);
    std::vector<sray::ObjectRef<std::uint64_t>> slice(
        refs.begin() + static_cast<std::ptrdiff_t>(first),
        refs.begin() + static_cast<std::ptrdiff_t>(last));
    const std::vector<std::uint64_t> values = sray::Get(slice);
    for (std::size_t index = 0; index < values.size(); ++index) {
      (values[index] == 2 * (first + index) ? ok : wrong)++;
    }
  }
  if (report) {
    std::cout << "load: done " << RealtimeNanoseconds() << " ok=" << ok << " wrong=" << wrong
              << std::endl;
    PrintMemory("done");
  }
}

}  // namespace

SRAY_REMOTE(twice);

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  const std::size_t tasks = argc > 1 ? std::stoull(argv[1]) : 1'000'000;
  const int drain_seconds = argc > 2 ? std::stoi(argv[2]) : 12;
  const std::size_t warm_up_tasks = argc > 3 ? std::stoull(argv[3]) : 20'000;
  (void)sray_bench::RunOnEveryNode(sray::CurrentNode().num_nodes);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // a steady start for the sampler
  PrintMemory("cold");
  std::cout << "load: cold " << RealtimeNanoseconds() << std::endl;
  std::size_t ok = 0;
  std::size_t wrong = 0;
  std::size_t warm_up_ok = 0;
  std::size_t warm_up_wrong = 0;
  if (warm_up_tasks > 0) {
    RunTasks(warm_up_tasks, /*report=*/false, warm_up_ok, warm_up_wrong);
    std::this_thread::sleep_for(std::chrono::seconds(drain_seconds));
  }
  PrintMemory("start");
  std::cout << "load: start " << RealtimeNanoseconds() << std::endl;
  RunTasks(tasks, /*report=*/true, ok, wrong);
  std::this_thread::sleep_for(std::chrono::seconds(drain_seconds));
  std::cout << "load: drained " << RealtimeNanoseconds() << std::endl;
  PrintMemory("drained");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  sray::Shutdown();
  return wrong == 0 && ok == tasks && warm_up_wrong == 0 && warm_up_ok == warm_up_tasks ? 0 : 1;
}
