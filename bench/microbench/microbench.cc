// Ray's core microbenchmarks, by their names, for sray (the Dask peer and the
// JSON with ratios are bench/microbench/run's job once it exists; this
// program prints "name value unit" lines).
//
//   sray run -N3 ./sray_microbench [METRIC...]
//
// Only when named: {actor_calls,tasks}_sync_{100,1000,3000}us_overhead, what
// a synchronous call of a method or task that sleeps that long costs beyond
// its own sleep (the waits between messages, where threads sleep and wake).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <sray/api.h>

namespace {

std::int64_t noop(std::int64_t value) {
  return value;
}

// One client among several: submits `count` tasks from inside a worker.
std::int64_t submit_many(std::int64_t count) {
  std::vector<sray::ObjectRef<std::int64_t>> refs;
  refs.reserve(static_cast<std::size_t>(count));
  for (std::int64_t index = 0; index < count; ++index) refs.push_back(sray::Task(noop).Remote(index));
  std::int64_t sum = 0;
  for (const auto value : sray::Get(refs)) sum += value;
  return sum;
}

std::int64_t SleepFor(std::int64_t microseconds) {
  const auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               started)
      .count();
}

// The actor of the actor benchmarks: answers at once.
class Echo {
 public:
  static Echo* Create() { return new Echo(); }
  std::int64_t Ping(std::int64_t value) { return value; }
  // Sleeps `microseconds`; answers how many it really slept.
  std::int64_t Sleep(std::int64_t microseconds) { return SleepFor(microseconds); }
};

// One caller among several: `count` async calls to its own actor.
std::int64_t call_many(sray::ActorHandle<Echo> actor, std::int64_t count) {
  std::vector<sray::ObjectRef<std::int64_t>> refs;
  refs.reserve(static_cast<std::size_t>(count));
  for (std::int64_t index = 0; index < count; ++index) refs.push_back(actor.Task(&Echo::Ping).Remote(index));
  std::int64_t sum = 0;
  for (const auto value : sray::Get(refs)) sum += value;
  return sum;
}

SRAY_REMOTE(noop, submit_many, call_many, SleepFor);
SRAY_REMOTE(Echo::Create, &Echo::Ping, &Echo::Sleep);

using Clock = std::chrono::steady_clock;

// Runs `batch` until `seconds` passed; returns operations per second.
// SRAY_BENCH_SECONDS overrides how long each metric runs (default 2 s).
double Rate(const std::function<std::size_t()>& batch) {
  const char* configured = std::getenv("SRAY_BENCH_SECONDS");
  const double seconds = configured != nullptr ? std::atof(configured) : 2.0;
  (void)batch();  // warm-up: workers started, pages touched
  std::size_t operations = 0;
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) operations += batch();
  return static_cast<double>(operations) / std::chrono::duration<double>(Clock::now() - start).count();
}

// Mean microseconds a call of `sleep_call` (which sleeps `microseconds` and
// answers how long it slept) takes beyond its sleep.
double OverheadBeyondSleeps(std::int64_t microseconds,
                            const std::function<std::int64_t()>& sleep_call) {
  const std::int64_t calls = std::min<std::int64_t>(2000, 1'000'000 / microseconds);
  (void)sleep_call();  // warm-up
  std::int64_t slept = 0;
  const auto started = Clock::now();
  for (std::int64_t index = 0; index < calls; ++index) slept += sleep_call();
  const double total = std::chrono::duration<double, std::micro>(Clock::now() - started).count();
  return (total - static_cast<double>(slept)) / static_cast<double>(calls);
}

// Metrics to run: all, or those named on the command line.
std::vector<std::string> selected;

bool Wanted(const std::string& name) {
  return selected.empty() || std::find(selected.begin(), selected.end(), name) != selected.end();
}

// Metrics that are not Ray's (no peer in bench/microbench/run): only when named.
bool Named(const std::string& name) {
  return std::find(selected.begin(), selected.end(), name) != selected.end();
}

void Report(const std::string& name, double value, const std::string& unit) {
  std::cout << name << " " << value << " " << unit << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  for (int index = 1; index < argc; ++index) selected.emplace_back(argv[index]);
  if (Wanted("single_client_tasks_sync")) Report("single_client_tasks_sync", Rate([] {
           for (std::int64_t index = 0; index < 100; ++index) (void)sray::Get(sray::Task(noop).Remote(index));
           return std::size_t{100};
         }),
         "tasks/s");
  if (Wanted("single_client_tasks_async")) Report("single_client_tasks_async", Rate([] {
           std::vector<sray::ObjectRef<std::int64_t>> refs;
           for (std::int64_t index = 0; index < 1000; ++index) refs.push_back(sray::Task(noop).Remote(index));
           (void)sray::Get(refs);
           return std::size_t{1000};
         }),
         "tasks/s");
  const std::int64_t clients = 3;
  if (Wanted("multi_client_tasks_async")) Report("multi_client_tasks_async", Rate([] {
           std::vector<sray::ObjectRef<std::int64_t>> refs;
           for (std::int64_t client = 0; client < clients; ++client) {
             refs.push_back(sray::Task(submit_many).SetResources({{"CPU", 0}}).Remote(500));
           }
           (void)sray::Get(refs);
           return static_cast<std::size_t>(clients * 500);
         }),
         "tasks/s");
  if (Wanted("single_client_put_calls")) Report("single_client_put_calls", Rate([] {
           for (std::int64_t index = 0; index < 1000; ++index) (void)sray::Put(index);
           return std::size_t{1000};
         }),
         "puts/s");
  auto stored = sray::Put(std::int64_t{7});
  if (Wanted("single_client_get_calls")) Report("single_client_get_calls", Rate([&] {
           for (int index = 0; index < 1000; ++index) (void)sray::Get(stored);
           return std::size_t{1000};
         }),
         "gets/s");
  const std::vector<char> block(100u << 20, 'x');
  if (Wanted("single_client_put_gigabytes")) {
    const double puts = Rate([&] {
      (void)sray::Put(block);
      return std::size_t{1};
    });
    Report("single_client_put_gigabytes", puts * static_cast<double>(block.size()) / 1e9, "GB/s");
  }
  std::vector<sray::ObjectRef<std::int64_t>> thousand;
  for (std::int64_t index = 0; index < 1000; ++index) thousand.push_back(sray::Task(noop).Remote(index));
  (void)sray::Get(thousand);
  if (Wanted("single_client_wait_1k_refs")) Report("single_client_wait_1k_refs", Rate([&] {
           (void)sray::Wait(thousand, thousand.size());
           return std::size_t{1};
         }),
         "waits/s");
  // Actors: Ray's names. One actor per node for the 1:n and n:n cases.
  auto actor = sray::Actor(Echo::Create).Remote();
  if (Wanted("1_1_actor_calls_sync")) Report("1_1_actor_calls_sync", Rate([&] {
           for (std::int64_t index = 0; index < 100; ++index) {
             (void)sray::Get(actor.Task(&Echo::Ping).Remote(index));
           }
           return std::size_t{100};
         }),
         "calls/s");
  if (Wanted("1_1_actor_calls_async")) Report("1_1_actor_calls_async", Rate([&] {
           std::vector<sray::ObjectRef<std::int64_t>> refs;
           refs.reserve(1000);
           for (std::int64_t index = 0; index < 1000; ++index) refs.push_back(actor.Task(&Echo::Ping).Remote(index));
           (void)sray::Get(refs);
           return std::size_t{1000};
         }),
         "calls/s");
  for (const std::int64_t microseconds : {100, 1000, 3000}) {
    const std::string suffix = "_" + std::to_string(microseconds) + "us_overhead";
    if (Named("actor_calls_sync" + suffix)) {
      Report("actor_calls_sync" + suffix,
             OverheadBeyondSleeps(
                 microseconds,
                 [&] { return sray::Get(actor.Task(&Echo::Sleep).Remote(microseconds)); }),
             "us");
    }
    if (Named("tasks_sync" + suffix)) {
      Report(
          "tasks_sync" + suffix,
          OverheadBeyondSleeps(
              microseconds, [&] { return sray::Get(sray::Task(SleepFor).Remote(microseconds)); }),
          "us");
    }
  }
  std::vector<sray::ActorHandle<Echo>> actors;
  for (int index = 0; index < 3; ++index) actors.push_back(sray::Actor(Echo::Create).Remote());
  if (Wanted("1_n_actor_calls_async")) Report("1_n_actor_calls_async", Rate([&] {
           std::vector<sray::ObjectRef<std::int64_t>> refs;
           refs.reserve(1002);
           for (std::int64_t index = 0; index < 334; ++index) {
             for (auto& each : actors) refs.push_back(each.Task(&Echo::Ping).Remote(index));
           }
           (void)sray::Get(refs);
           return refs.size();
         }),
         "calls/s");
  if (Wanted("n_n_actor_calls_async")) Report("n_n_actor_calls_async", Rate([&] {
           std::vector<sray::ObjectRef<std::int64_t>> refs;
           for (auto& each : actors) {
             refs.push_back(sray::Task(call_many).SetResources({{"CPU", 0}}).Remote(each, 1000));
           }
           (void)sray::Get(refs);
           return static_cast<std::size_t>(actors.size() * 1000);
         }),
         "calls/s");
  if (Wanted("actor_creation")) Report("actor_creation", Rate([] {
           // Created, called once (so each is really up), then killed.
           std::vector<sray::ActorHandle<Echo>> created;
           std::vector<sray::ObjectRef<std::int64_t>> first_calls;
           for (std::int64_t index = 0; index < 10; ++index) {
             created.push_back(sray::Actor(Echo::Create).Remote());
             first_calls.push_back(created.back().Task(&Echo::Ping).Remote(index));
           }
           (void)sray::Get(first_calls);
           for (auto& each : created) each.Kill();
           return created.size();
         }),
         "actors/s");
  sray::Shutdown();
  return 0;
}
