// Job-wide checks of actors and placement groups, run by the local
// (`sray run -N3`) and slurm (`srun -N3 --ray-cluster`) tests. Each mode
// prints "ok: <what>" lines that the scripts count, or "FAIL: ..." and
// exits 1.
//
//   actors_check basic | many | restart | kill | placement | errors | concurrency |
//                caller-death | orphans | reuse (sray run only: markers in /tmp)

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <sray/api.h>

#include "check.h"

namespace {

using sray::check::Expect;
using sray::check::Fail;

// A counter that remembers every amount it was given, in order.
class Counter {
 public:
  explicit Counter(std::int64_t start) : value_(start) {}
  static Counter* Create(std::int64_t start) { return new Counter(start); }
  std::int64_t Add(std::int64_t amount) {
    value_ += amount;
    seen_.push_back(amount);
    return value_;
  }
  std::int64_t Value() const { return value_; }
  std::vector<std::int64_t> Seen() const { return seen_; }
  std::int64_t Pid() const { return ::getpid(); }
  std::uint32_t Node() const { return sray::CurrentNode().node_id; }
  std::int64_t SleepThenValue(std::int64_t milliseconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
    return value_;
  }
  std::int64_t Fail(std::int64_t) { throw std::out_of_range("counter refuses"); }
  // A result above the inline limit: it goes to the store of the actor's node.
  std::vector<std::uint8_t> Bytes(std::int64_t size) const {
    return std::vector<std::uint8_t>(static_cast<std::size_t>(size), 7);
  }
  // Calls another actor from inside this one.
  std::int64_t AddTo(sray::ActorHandle<Counter> other, std::int64_t amount) {
    return sray::Get(other.Task(&Counter::Add).Remote(amount));
  }

 private:
  std::int64_t value_;
  std::vector<std::int64_t> seen_;
};

class Broken {
 public:
  static Broken* Create(std::string why) { throw std::invalid_argument(why); }
  std::int64_t Value() const { return 0; }
};

// Two calls meet here: only an actor serving them at once lets both return.
class Meeting {
 public:
  static Meeting* Create() { return new Meeting(); }
  bool Arrive() {
    std::unique_lock lock(mutex_);
    ++arrived_;
    changed_.notify_all();
    return changed_.wait_for(lock, std::chrono::seconds(20), [&] { return arrived_ >= 2; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
};

// Where a task writes its pid for the driver to find.
class Board {
 public:
  static Board* Create() { return new Board(); }
  std::int64_t Set(std::int64_t value) { return value_ = value; }
  std::int64_t Value() const { return value_; }

 private:
  std::int64_t value_ = 0;
};

// In a task: says where it runs, then waits for a slow call.
std::int64_t call_slowly(sray::ActorHandle<Counter> counter, sray::ActorHandle<Board> board) {
  sray::Get(board.Task(&Board::Set).Remote(static_cast<std::int64_t>(::getpid())));
  // Long enough that the kill lands while it runs, however slow the start.
  return sray::Get(counter.Task(&Counter::SleepThenValue).Remote(10000));
}

// In a task: finds the named counter and adds to it.
std::int64_t add_through_name(std::int64_t amount) {
  auto counter = sray::GetActor<Counter>("counter");
  if (!counter) throw std::runtime_error("no actor named counter from node " +
                                         std::to_string(sray::CurrentNode().node_id));
  sray::Get(counter->Task(&Counter::Add).Remote(amount));
  // Holds its CPU a while, so the twelve spread over the nodes even when a
  // node's second worker starts late.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return sray::CurrentNode().node_id;
}

// In a task: uses a handle passed as an argument.
std::int64_t add_through_handle(sray::ActorHandle<Counter> counter, std::int64_t amount) {
  return sray::Get(counter.Task(&Counter::Add).Remote(amount));
}

std::uint32_t busy_node(std::int64_t milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  return sray::CurrentNode().node_id;
}

}  // namespace

// Leaves a file when destroyed (its path from the driver), and can leave a
// thread behind or sleep in a call: what decides whether Kill hands its
// process to the next actor.
class Tracker {
 public:
  explicit Tracker(std::string marker) : marker_(std::move(marker)) {}
  static Tracker* Create(std::string marker) { return new Tracker(std::move(marker)); }
  ~Tracker() { std::ofstream(marker_) << ::getpid() << "\n"; }
  std::int64_t Pid() const { return ::getpid(); }
  std::int64_t LeaveAThread() {
    std::thread([] { std::this_thread::sleep_for(std::chrono::hours(1)); }).detach();
    return 1;
  }
  std::int64_t Sleep(std::int64_t milliseconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
    return milliseconds;
  }

 private:
  std::string marker_;
};

SRAY_REMOTE(Tracker::Create, &Tracker::Pid, &Tracker::LeaveAThread, &Tracker::Sleep);

SRAY_REMOTE(Counter::Create, &Counter::Add, &Counter::Value, &Counter::Seen, &Counter::Pid,
            &Counter::Node, &Counter::SleepThenValue, &Counter::Fail, &Counter::AddTo,
            &Counter::Bytes);
SRAY_REMOTE(Broken::Create, &Broken::Value);
SRAY_REMOTE(Meeting::Create, &Meeting::Arrive);
SRAY_REMOTE(Board::Create, &Board::Set, &Board::Value);
SRAY_REMOTE(add_through_name, add_through_handle, busy_node, call_slowly);

namespace {

template <typename Exception, typename Function>
std::string Throws(Function function, const std::string& what) {
  try {
    function();
  } catch (const Exception& error) {
    return error.what();
  } catch (const std::exception& error) {
    Fail(what + ": threw the wrong type: " + error.what());
  }
  Fail(what + ": did not throw");
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void Basic() {
  auto counter = sray::Actor(Counter::Create).SetName("counter").Remote(100);
  // Ordering per caller: 500 calls in flight at once run in submission order.
  std::vector<sray::ObjectRef<std::int64_t>> refs;
  for (std::int64_t amount = 1; amount <= 500; ++amount) {
    refs.push_back(counter.Task(&Counter::Add).Remote(amount));
  }
  const auto totals = sray::Get(refs);
  bool in_order = true;
  std::int64_t expected = 100;
  for (std::int64_t amount = 1; amount <= 500; ++amount) {
    expected += amount;
    in_order = in_order && totals[static_cast<std::size_t>(amount - 1)] == expected;
  }
  Expect(in_order, "500 calls from one caller ran in submission order");
  Expect(sray::Get(counter.Task(&Counter::Value).Remote()) == expected,
         "state is kept across calls");
  // An ObjectRef argument that is not ready yet holds back the calls after it.
  auto slow = sray::Task(busy_node).Remote(300);
  auto first = counter.Task(&Counter::Add).Remote(sray::Get(sray::Put<std::int64_t>(0)) + 1000);
  (void)slow;
  auto second = counter.Task(&Counter::Add).Remote(1);
  Expect(sray::Get(second) == sray::Get(first) + 1, "calls with resolved arguments keep their order");

  // Named lookup from tasks on every node, and handles passed to tasks.
  std::vector<sray::ObjectRef<std::int64_t>> named;
  for (int index = 0; index < 12; ++index) named.push_back(sray::Task(add_through_name).Remote(1));
  std::set<std::int64_t> nodes;
  for (auto node : sray::Get(named)) nodes.insert(node);
  Expect(nodes.size() >= 2, "GetActor by name works from tasks on " + std::to_string(nodes.size()) +
                                " nodes");
  auto through_handle = sray::Task(add_through_handle).Remote(counter, 5);
  Expect(sray::Get(through_handle) > 0, "a handle passed to a task reaches the actor");
  auto other = sray::Actor(Counter::Create).Remote(0);
  Expect(sray::Get(counter.Task(&Counter::AddTo).Remote(other, 7)) == 7,
         "an actor calls another actor through a handle it was given");
  auto found = sray::GetActor<Counter>("counter");
  Expect(found.has_value() && found->id() == counter.id() && !sray::GetActor<Counter>("nobody"),
         "GetActor finds the named actor and nothing for an unknown name");
}

void Many() {
  std::vector<sray::ActorHandle<Counter>> actors;
  for (std::int64_t index = 0; index < 200; ++index) {
    actors.push_back(sray::Actor(Counter::Create).Remote(index));
  }
  std::vector<sray::ObjectRef<std::int64_t>> values;
  std::vector<sray::ObjectRef<std::uint32_t>> nodes;
  for (auto& actor : actors) {
    values.push_back(actor.Task(&Counter::Add).Remote(1));
    nodes.push_back(actor.Task(&Counter::Node).Remote());
  }
  const auto results = sray::Get(values);
  bool right = true;
  for (std::size_t index = 0; index < results.size(); ++index) {
    right = right && results[index] == static_cast<std::int64_t>(index) + 1;
  }
  Expect(right, "200 actors created and called, each with its own state");
  std::set<std::uint32_t> used;
  for (auto node : sray::Get(nodes)) used.insert(node);
  Expect(used.size() == 3, "the 200 actors spread over all 3 nodes");
}

void Restart() {
  // A restarted actor runs its constructor again; a call in flight when it
  // died is retried (max_task_retries=1).
  auto counter = sray::Actor(Counter::Create)
                     .SetName("restartable")
                     .SetMaxRestarts(1)
                     .SetMaxTaskRetries(1)
                     .Remote(10);
  sray::Get(counter.Task(&Counter::Add).Remote(5));
  const auto first_pid = sray::Get(counter.Task(&Counter::Pid).Remote());
  ::kill(static_cast<pid_t>(first_pid), SIGKILL);
  const auto value = sray::Get(counter.Task(&Counter::Value).Remote());
  const auto second_pid = sray::Get(counter.Task(&Counter::Pid).Remote());
  Expect(value == 10 && second_pid != first_pid,
         "after kill -9 the actor restarted with its constructor's arguments (value " +
             std::to_string(value) + ") in a new process");
  ::kill(static_cast<pid_t>(second_pid), SIGKILL);
  const std::string message = Throws<sray::ActorDiedError>(
      [&] {
        for (int attempt = 0; attempt < 100; ++attempt) {
          sray::Get(counter.Task(&Counter::Value).Remote());
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      },
      "a call after the second kill");
  Expect(Contains(message, "restartable") && Contains(message, "no restart left") &&
             Contains(message, "signal 9"),
         "after the second kill calls fail with ActorDiedError naming the actor and the cause: " +
             message);
  Throws<sray::ActorDiedError>([&] { sray::Get(counter.Task(&Counter::Value).Remote()); },
                               "a later call");
  Expect(!sray::GetActor<Counter>("restartable"), "a dead actor's name is free again");

  // Without task retries, the call in flight fails, and later calls succeed.
  auto plain = sray::Actor(Counter::Create).SetMaxRestarts(1).Remote(1);
  const auto pid = sray::Get(plain.Task(&Counter::Pid).Remote());
  auto in_flight = plain.Task(&Counter::SleepThenValue).Remote(5000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  const std::string lost = Throws<sray::ActorDiedError>([&] { sray::Get(in_flight); }, "the call in flight");
  Expect(Contains(lost, "lost") && Contains(lost, "SetMaxTaskRetries"),
         "a call in flight without retries fails naming the fix: " + lost);
  Expect(sray::Get(plain.Task(&Counter::Value).Remote()) == 1, "later calls reach the restarted actor");
}

void Kill() {
  // Three actors holding every CPU of the three nodes (2 each).
  std::vector<sray::ActorHandle<Counter>> holders;
  for (int index = 0; index < 3; ++index) {
    holders.push_back(sray::Actor(Counter::Create).SetResources({{"CPU", 2}}).Remote(index));
  }
  std::set<std::uint32_t> nodes;
  for (auto& holder : holders) nodes.insert(sray::Get(holder.Task(&Counter::Node).Remote()));
  Expect(nodes.size() == 3, "three CPU:2 actors hold one node each");
  auto waiting = sray::Actor(Counter::Create).SetName("waiting").SetResources({{"CPU", 2}}).Remote(42);
  auto pending = waiting.Task(&Counter::Value).Remote();
  const auto early = sray::Wait(std::vector{pending}, 1, std::chrono::milliseconds(1500));
  Expect(early.ready.empty(), "an actor that needs CPUs held by others waits");
  holders[1].Kill();
  Expect(sray::Get(pending, std::chrono::milliseconds(30000)) == 42,
         "Kill freed the CPUs and the waiting actor started");
  const std::string message = Throws<sray::ActorDiedError>(
      [&] { sray::Get(holders[1].Task(&Counter::Value).Remote()); }, "a call to a killed actor");
  Expect(Contains(message, "killed"), "calls to a killed actor fail: " + message);
  // Killing a task-held... tasks still run on the remaining CPUs? Every CPU is
  // held now; a zero-resource actor still starts.
  auto free_actor = sray::Actor(Counter::Create).Remote(3);
  Expect(sray::Get(free_actor.Task(&Counter::Value).Remote()) == 3,
         "an actor without resources starts on a full cluster");
}

// A caller other than the one that killed the actor.
std::string call_killed(sray::ActorHandle<Tracker> actor) {
  try {
    return "answered " + std::to_string(sray::Get(actor.Task(&Tracker::Pid).Remote()));
  } catch (const sray::ActorDiedError& error) {
    return std::string("ActorDiedError: ") + error.what();
  } catch (const std::exception& error) {
    return std::string("another error: ") + error.what();
  }
}

SRAY_REMOTE(call_killed);

bool Alive(std::int64_t pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0;
}

// What `path` holds (a pid), once it exists; 0 if it never does.
std::int64_t WaitForMarker(const std::string& path, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream marker(path);
    std::int64_t pid = 0;
    if (marker >> pid) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

bool EndsWithin(std::int64_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (Alive(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !Alive(pid);
}

// Kill gives a worker back to its node when it can, and ends the process
// when it cannot. Every actor here lands on node 0 (no other actor lives,
// the directory prefers the node with fewest).
void Reuse() {
  char pattern[] = "/tmp/sray-actors-reuse-XXXXXX";
  const char* directory = ::mkdtemp(pattern);
  if (directory == nullptr) Fail("cannot make a directory for the markers");
  const std::string markers = directory;

  auto first = sray::Actor(Tracker::Create).Remote(markers + "/first");
  const auto first_pid = sray::Get(first.Task(&Tracker::Pid).Remote());
  first.Kill();
  const std::string message = Throws<sray::ActorDiedError>(
      [&] { sray::Get(first.Task(&Tracker::Pid).Remote()); }, "a call after Kill");
  Expect(Contains(message, "killed"), "a call to a killed actor fails as before: " + message);
  Expect(WaitForMarker(markers + "/first", std::chrono::seconds(10)) == first_pid,
         "Kill with no call running ran the actor's destructor in its process");

  // Before any task runs: a task's worker, idle by then, may take the next
  // actor while the killed actor's process still tells its node it is
  // free (the destructor's marker comes first), and did once in a CI
  // rehearsal (2026-12-07: "pid 20483, now 20487").
  auto second = sray::Actor(Tracker::Create).Remote(markers + "/second");
  const auto second_pid = sray::Get(second.Task(&Tracker::Pid).Remote());
  Expect(second_pid == first_pid && Alive(first_pid),
         "the next actor runs in the killed actor's process (pid " + std::to_string(first_pid) +
             ", now " + std::to_string(second_pid) + ")");
  const std::string elsewhere = sray::Get(sray::Task(call_killed).Remote(first));
  Expect(Contains(elsewhere, "ActorDiedError") && Contains(elsewhere, "killed"),
         "a task that did not kill it gets ActorDiedError too: " + elsewhere);

  (void)sray::Get(second.Task(&Tracker::LeaveAThread).Remote());
  second.Kill();
  Expect(WaitForMarker(markers + "/second", std::chrono::seconds(10)) == second_pid &&
             EndsWithin(second_pid, std::chrono::seconds(10)),
         "an actor that left a thread running is destroyed, then its process ends");

  auto third = sray::Actor(Tracker::Create).Remote(markers + "/third");
  const auto third_pid = sray::Get(third.Task(&Tracker::Pid).Remote());
  Expect(third_pid != second_pid, "the next actor gets another process");
  auto sleeping = third.Task(&Tracker::Sleep).Remote(20000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the call runs
  const auto killed_at = std::chrono::steady_clock::now();
  third.Kill();
  Throws<sray::ActorDiedError>([&] { sray::Get(sleeping); }, "the call running at Kill");
  Expect(EndsWithin(third_pid, std::chrono::seconds(5)) &&
             std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(5),
         "Kill during a call ends the process at once, without waiting for the call");
  Expect(WaitForMarker(markers + "/third", std::chrono::milliseconds(200)) == 0,
         "a process ended mid-call runs no destructor");

  auto restartable =
      sray::Actor(Tracker::Create).SetMaxRestarts(1).Remote(markers + "/restartable");
  const auto before_restart = sray::Get(restartable.Task(&Tracker::Pid).Remote());
  restartable.Kill(/*no_restart=*/false);
  // No call until it was retired: one running at that moment would end the
  // process instead (the case above).
  Expect(WaitForMarker(markers + "/restartable", std::chrono::seconds(10)) == before_restart,
         "Kill(no_restart=false) with no call running ran the destructor");
  std::int64_t after_restart = 0;
  for (int attempt = 0; attempt < 200 && after_restart == 0; ++attempt) {
    try {
      after_restart = sray::Get(restartable.Task(&Tracker::Pid).Remote());
    } catch (const sray::ActorDiedError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // lost while it restarted
    }
  }
  Expect(after_restart == before_restart,
         "the actor restarted in the process it was retired from (pid " +
             std::to_string(before_restart) + ", now " + std::to_string(after_restart) + ")");
  std::filesystem::remove(markers + "/restartable");
  restartable.Kill();
  // Its destructor writes the marker once more, in its own process: waited
  // for, or the directory could be removed while the file is being made
  // ("Directory not empty" ended this check once in CI).
  Expect(WaitForMarker(markers + "/restartable", std::chrono::seconds(10)) == before_restart,
         "the final Kill ran the restarted actor's destructor");
  std::error_code ignored;
  std::filesystem::remove_all(markers, ignored);
}

void Placement() {
  auto spread = sray::CreatePlacementGroup(
      {.name = "spread", .bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
       .strategy = sray::PlacementStrategy::kSpread});
  Expect(spread.Wait(std::chrono::seconds(30)), "a SPREAD group of 3 bundles is placed");
  const auto bundle_nodes = spread.BundleNodes();
  const std::set<std::uint32_t> distinct(bundle_nodes.begin(), bundle_nodes.end());
  Expect(distinct.size() == 3, "SPREAD put its bundles on 3 different nodes");
  bool where = true;
  for (int index = 0; index < 3; ++index) {
    auto actor = sray::Actor(Counter::Create)
                     .SetResources({{"CPU", 1}})
                     .SetPlacementGroup(spread, index)
                     .Remote(index);
    where = where && sray::Get(actor.Task(&Counter::Node).Remote()) ==
                         bundle_nodes[static_cast<std::size_t>(index)];
  }
  Expect(where, "an actor in bundle i runs on bundle i's node");
  auto pack = sray::CreatePlacementGroup(
      {.name = "pack", .bundles = {{{"CPU", 0.5}}, {{"CPU", 0.5}}}, .strategy = sray::PlacementStrategy::kPack});
  Expect(pack.Wait(std::chrono::seconds(30)), "a PACK group is placed");
  const auto packed = pack.BundleNodes();
  Expect(packed.size() == 2 && packed[0] == packed[1], "PACK put both bundles on one node");
  const std::string message = Throws<sray::InfeasibleResourcesError>(
      [] {
        sray::CreatePlacementGroup({.name = "", .bundles = {{{"CPU", 100}}},
                                    .strategy = sray::PlacementStrategy::kPack});
      },
      "an infeasible group");
  Expect(Contains(message, "CPU"), "an infeasible group is refused at once: " + message);
  auto inside = sray::Actor(Counter::Create).SetPlacementGroup(pack, 0).Remote(1);
  sray::Get(inside.Task(&Counter::Value).Remote());
  sray::RemovePlacementGroup(pack);
  Throws<sray::ActorDiedError>(
      [&] {
        for (int attempt = 0; attempt < 100; ++attempt) {
          sray::Get(inside.Task(&Counter::Value).Remote());
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      },
      "a call to an actor of a removed group");
  Expect(true, "removing a group kills its actors");
}

void Errors() {
  auto broken = sray::Actor(Broken::Create).Remote(std::string("no database"));
  const std::string message =
      Throws<sray::ActorDiedError>([&] { sray::Get(broken.Task(&Broken::Value).Remote()); },
                                   "a call to an actor whose constructor threw");
  Expect(Contains(message, "no database") && Contains(message, "invalid_argument"),
         "a constructor's exception reaches the caller: " + message);
  auto counter = sray::Actor(Counter::Create).SetName("unique").Remote(1);
  const std::string taken = Throws<sray::ConfigError>(
      [] { sray::Actor(Counter::Create).SetName("unique").Remote(2); }, "a taken name");
  Expect(Contains(taken, "unique"), "a taken name is refused: " + taken);
  const std::string infeasible = Throws<sray::InfeasibleResourcesError>(
      [] { sray::Actor(Counter::Create).SetResources({{"CPU", 64}}).Remote(0); }, "CPU:64");
  Expect(Contains(infeasible, "CPU"), "an infeasible actor is refused at once: " + infeasible);
  const std::string threw = Throws<sray::TaskError>(
      [&] { sray::Get(counter.Task(&Counter::Fail).Remote(1)); }, "a throwing method");
  Expect(Contains(threw, "counter refuses") &&
             sray::Get(counter.Task(&Counter::Add).Remote(1)) == 2,
         "a method's exception reaches the caller and the actor goes on");
  auto wrong = sray::GetActor<Broken>("unique");
  const std::string mismatch = Throws<sray::TaskError>(
      [&] { sray::Get(wrong->Task(&Broken::Value).Remote()); }, "a handle of the wrong class");
  Expect(Contains(mismatch, "Counter") && Contains(mismatch, "GetActor"),
         "a handle of the wrong class is refused, not run on the wrong type: " + mismatch);
}

// A caller killed while its call runs: the actor answers into the void and
// keeps serving (it crashed with SIGSEGV when it answered on the dead
// caller's reply endpoint).
void CallerDeath() {
  auto counter = sray::Actor(Counter::Create).Remote(5);
  auto board = sray::Actor(Board::Create).Remote();
  auto waiting = sray::Task(call_slowly).SetMaxRetries(0).Remote(counter, board);
  std::int64_t pid = 0;
  for (int attempt = 0; attempt < 500 && pid == 0; ++attempt) {
    pid = sray::Get(board.Task(&Board::Value).Remote());
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (pid == 0) Fail("the calling task never started");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // its call is running
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  Throws<sray::WorkerDiedError>([&] { sray::Get(waiting); }, "the killed caller's task");
  // Runs after the slow call, whose answer goes to the dead caller.
  Expect(sray::Get(counter.Task(&Counter::Add).Remote(1)) == 6,
         "an actor whose caller died mid-call keeps serving");
}

void Concurrency() {
  auto meeting = sray::Actor(Meeting::Create).SetMaxConcurrency(2).Remote();
  auto first = meeting.Task(&Meeting::Arrive).Remote();
  auto second = meeting.Task(&Meeting::Arrive).Remote();
  Expect(sray::Get(first) && sray::Get(second), "max_concurrency=2 serves two calls at once");
}

}  // namespace

// Calls killed with their actor at varying moments: queued, running, or
// done with the result stored but not yet answered. Whatever their processes
// stored for calls the caller gave up is freed on the actor's node: once the
// last reference goes, every store is empty.
void Orphans() {
  std::size_t died = 0;
  for (int round = 0; round < 30; ++round) {
    auto actor = sray::Actor(Counter::Create).Remote(round);
    if (sray::Get(actor.Task(&Counter::Value).Remote()) != round) Fail("the actor answers wrongly");
    std::vector<sray::ObjectRef<std::vector<std::uint8_t>>> results;
    for (int call = 0; call < 4; ++call) {
      results.push_back(actor.Task(&Counter::Bytes).Remote(std::int64_t{256 * 1024}));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100 * round));
    actor.Kill();
    for (auto& result : results) {
      try {
        if (sray::Get(result).size() != 256 * 1024)
          Fail("a call that finished lost part of its result");
      } catch (const sray::ActorDiedError&) {
        ++died;
      }
    }
  }
  std::cout << "orphans: " << died << " of 120 calls died with their actor" << std::endl;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  std::uint64_t held = 0;
  do {
    held = 0;
    for (const auto& node : sray::StoreUsage()) held += node.in_memory + node.spilled;
    if (held == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  if (held != 0) {
    for (const auto& node : sray::StoreUsage()) {
      std::cout << "node " << node.node_id << " still holds " << node.objects << " objects"
                << std::endl;
    }
  }
  Expect(held == 0,
         "the stores are empty once no result of calls killed with their actor is referenced");
}

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "basic";
  if (mode == "basic") {
    Basic();
  } else if (mode == "many") {
    Many();
  } else if (mode == "restart") {
    Restart();
  } else if (mode == "kill") {
    Kill();
  } else if (mode == "placement") {
    Placement();
  } else if (mode == "reuse") {
    Reuse();
  } else if (mode == "errors") {
    Errors();
  } else if (mode == "concurrency") {
    Concurrency();
  } else if (mode == "caller-death") {
    CallerDeath();
  } else if (mode == "orphans") {
    Orphans();
  } else {
    Fail("unknown mode " + mode);
  }
  sray::Shutdown();
  return 0;
}
