// The load that scripts/chaos injects faults into: tasks with object
// arguments (some above the inline limit) and actor calls, every result
// checked. Prints "chaos: ready" once its objects and actors exist (the
// script starts killing then), and at the end one line
//   chaos_check rounds=R tasks=N task_ok=K task_lost=L task_wrong=W calls=N
//     call_ok=K call_lost=L call_wrong=W other_errors=E
// with N the totals over all rounds. One round runs TASKS tasks, then CALLS
// calls; `seconds=S` repeats rounds until S seconds have passed since
// "ready" (so that a fault injected in the first second lands in running
// work, however fast a round is), `forever` until the job is ended from
// outside.
// "lost" is a typed error that names what died (WorkerDiedError after the
// retries, ActorDiedError); "wrong" a result that does not match, and
// "other" any other error: both fail the run (exit 1).
//
// `store` keeps the object stores full for SECONDS: objects of 128 KiB to
// 2.125 MiB put by the driver and made by tasks and actors on every node
// (an actor's process killed after storing a result leaves it to be freed
// by the caller's node manager), several times
// what the stores hold alive at once (so they spill, and reads restore them),
// each read back by the driver and by tasks on other nodes and checked
// against a checksum of what was written. Prints "chaos: ready", then one line
//   chaos_check store seconds=S objects=N reads=R read_ok=K read_wrong=W
//     full_errors=F lost=L other_errors=E max_spilled_mib=M drained=0|1
// "full" is ObjectStoreFullError (a typed error, counted), "lost" a task
// whose worker died on every try (WorkerDiedError) or an actor call whose
// process died on every try (ActorDiedError); "drained" says
// the stores and spill files were empty within 10 s of the last reference
// going. Exit 1 on a wrong read, another error or stores that did not drain.
//
// `soak` mixes everything until DONE_FILE exists (bench/soak/run): per
// round 1,000 tasks with object arguments, 300 actor calls, 8 Puts of 1 MiB
// read back, and an actor created, called and killed; every result checked.
// A line "soak: round N" every 100 rounds, then
//   chaos_check soak rounds=N results=R wrong=W lost=L other_errors=E
//
//   chaos_check load SEED TASKS CALLS [forever | seconds=S]
//   chaos_check store SEED SECONDS
//   chaos_check soak SEED DONE_FILE

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sray/api.h>

namespace {

std::uint64_t Checksum(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (const std::uint8_t byte : bytes) hash = (hash ^ byte) * 1099511628211ull;
  return hash;
}

std::uint64_t Mix(std::uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdull;
  value ^= value >> 33;
  return value;
}

// A task: the checksum of its argument object, tied to its index.
std::uint64_t checksum_of(const std::vector<std::uint8_t>& blob, std::uint64_t index) {
  return Checksum(blob) ^ Mix(index);
}

// An actor without state that survives a restart: every answer is a
// function of the call's argument.
class Mixer {
 public:
  static Mixer* Create() { return new Mixer(); }
  std::uint64_t Apply(std::uint64_t value) const { return Mix(value) + 1; }
  // Object `key` (Fill), made in the store of the actor's node.
  std::vector<std::uint8_t> Blob(std::uint64_t key, std::uint64_t size) const;
};

// The bytes of object `key`: a generator both the writer and the checker
// run, so nothing but the key and size travels to check a read.
std::vector<std::uint8_t> Fill(std::uint64_t key, std::uint64_t size) {
  std::vector<std::uint8_t> bytes(size);
  std::uint64_t state = Mix(key + 1);
  for (std::size_t index = 0; index < bytes.size(); index += 8) {
    state = Mix(state + index);
    for (std::size_t byte = 0; byte < 8 && index + byte < bytes.size(); ++byte) {
      bytes[index + byte] = static_cast<std::uint8_t>(state >> (8 * byte));
    }
  }
  return bytes;
}

std::vector<std::uint8_t> Mixer::Blob(std::uint64_t key, std::uint64_t size) const {
  return Fill(key, size);
}

// A task that makes object `key` in the store of the node it runs on.
std::vector<std::uint8_t> make_blob(std::uint64_t key, std::uint64_t size) {
  return Fill(key, size);
}

}  // namespace

SRAY_REMOTE(checksum_of, make_blob);
SRAY_REMOTE(Mixer::Create, &Mixer::Apply, &Mixer::Blob);

namespace {

struct LiveObject {
  sray::ObjectRef<std::vector<std::uint8_t>> ref;
  std::uint64_t checksum;
  std::uint64_t size;
};

std::uint64_t SpilledBytes() {
  std::uint64_t spilled = 0;
  for (const auto& node : sray::StoreUsage()) spilled += node.spilled;
  return spilled;
}

std::uint64_t HeldBytes() {
  std::uint64_t held = 0;
  for (const auto& node : sray::StoreUsage()) held += node.in_memory + node.spilled;
  return held;
}

int StoreFull(std::uint64_t seed, double seconds) {
  std::mt19937_64 random(seed);
  std::uint64_t capacity = 0;
  for (const auto& node : sray::StoreUsage()) capacity += node.capacity;
  // Alive at once: four times what the stores of all nodes hold (the
  // driver's Puts alone go to node 0's store, many times its size).
  const std::uint64_t budget = 4 * capacity;
  std::vector<sray::ActorHandle<Mixer>> makers;
  for (int index = 0; index < 3; ++index) {
    makers.push_back(
        sray::Actor(Mixer::Create).SetMaxRestarts(100000).SetMaxTaskRetries(3).Remote());
  }
  for (auto& maker : makers) (void)sray::Get(maker.Task(&Mixer::Apply).Remote(0));
  std::cout << "chaos: ready (stores " << (capacity >> 20) << " MiB in all, " << (budget >> 20)
            << " MiB alive)" << std::endl;
  std::vector<LiveObject> live;
  std::uint64_t live_bytes = 0;
  std::uint64_t next_key = seed << 20;
  std::size_t next_maker = 0;
  std::size_t objects = 0, reads = 0, read_ok = 0, read_wrong = 0, full = 0, lost = 0, other = 0;
  std::uint64_t max_spilled = 0;
  auto other_error = [&](const std::string& what, const std::exception& error) {
    if (other++ < 3) std::cerr << "chaos_check: " << what << ": " << error.what() << "\n";
  };
  // A full store is a typed error, wherever it surfaced (a task's own
  // failure to get room is its TaskError); a worker that died on every try
  // (kills, 3 retries) is counted as lost; anything else is a defect.
  auto count_error = [&](const std::string& what, const std::exception& error) {
    const auto* task_error = dynamic_cast<const sray::TaskError*>(&error);
    if (dynamic_cast<const sray::ObjectStoreFullError*>(&error) != nullptr ||
        (task_error != nullptr &&
         task_error->remote_type().find("ObjectStoreFull") != std::string::npos)) {
      ++full;
    } else if (dynamic_cast<const sray::WorkerDiedError*>(&error) != nullptr ||
               dynamic_cast<const sray::ActorDiedError*>(&error) != nullptr) {
      ++lost;
    } else {
      other_error(what, error);
    }
  };
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    // A round: 8 new objects (half Puts, a quarter made by tasks on any
    // node, a quarter by actors), then 16 reads of random live ones (half by
    // the driver, half by tasks).
    std::vector<std::uint64_t> keys, sizes;
    for (std::size_t index = 0; index < 8; ++index) {
      keys.push_back(next_key++);
      sizes.push_back((std::uint64_t{128} << 10) + random() % (std::uint64_t{2} << 20));
    }
    for (std::size_t index = 0; index < 8; ++index) {
      try {
        auto ref = index % 2 == 0 ? sray::Put(Fill(keys[index], sizes[index]))
                   : index % 4 == 1
                       ? sray::Task(make_blob).SetMaxRetries(3).Remote(keys[index], sizes[index])
                       : makers[next_maker++ % makers.size()]
                             .Task(&Mixer::Blob)
                             .Remote(keys[index], sizes[index]);
        live.push_back({ref, Checksum(Fill(keys[index], sizes[index])), sizes[index]});
        live_bytes += sizes[index];
        ++objects;
      } catch (const std::exception& error) {
        count_error("object " + std::to_string(keys[index]), error);
      }
    }
    std::vector<std::pair<std::size_t, sray::ObjectRef<std::uint64_t>>> remote_reads;
    for (std::size_t index = 0; index < 16 && !live.empty(); ++index) {
      const std::size_t pick = random() % live.size();
      if (index % 2 == 1) {
        remote_reads.emplace_back(
            pick,
            sray::Task(checksum_of).SetMaxRetries(3).Remote(live[pick].ref, std::uint64_t{0}));
        continue;
      }
      ++reads;
      try {
        (Checksum(sray::Get(live[pick].ref)) == live[pick].checksum ? read_ok : read_wrong)++;
      } catch (const std::exception& error) {
        count_error("read of a live object", error);
      }
    }
    for (auto& [pick, result] : remote_reads) {
      ++reads;
      try {
        (sray::Get(result) == (live[pick].checksum ^ Mix(0)) ? read_ok : read_wrong)++;
      } catch (const std::exception& error) {
        count_error("a task's read", error);
      }
    }
    // Keep the live set near the budget: drop random objects beyond it.
    while (live_bytes > budget && !live.empty()) {
      const std::size_t pick = random() % live.size();
      live_bytes -= live[pick].size;
      live[pick] = live.back();
      live.pop_back();
    }
    max_spilled = std::max(max_spilled, SpilledBytes());
  }
  live.clear();
  for (auto& maker : makers) maker.Kill();
  makers.clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (HeldBytes() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool drained = HeldBytes() == 0;
  if (!drained) {
    for (const auto& node : sray::StoreUsage()) {
      std::cout << "chaos_check store: node " << node.node_id << " still holds " << node.objects
                << " objects: " << node.in_memory << " bytes in memory, " << node.spilled
                << " spilled" << std::endl;
    }
  }
  std::cout << "chaos_check store seconds=" << static_cast<long>(seconds) << " objects=" << objects
            << " reads=" << reads << " read_ok=" << read_ok << " read_wrong=" << read_wrong
            << " full_errors=" << full << " lost=" << lost << " other_errors=" << other
            << " max_spilled_mib=" << (max_spilled >> 20) << " drained=" << (drained ? 1 : 0)
            << std::endl;
  sray::Shutdown();
  return read_wrong == 0 && other == 0 && drained && max_spilled > 0 ? 0 : 1;
}

// What the load and the soak work on: 8 objects of 1 KiB (inline in a
// task's arguments) and 8 of 256 KiB (through the object store), with their
// checksums, and actors that restart and retry their calls.
struct Workload {
  std::vector<sray::ObjectRef<std::vector<std::uint8_t>>> blobs;
  std::vector<std::uint64_t> sums;
  std::vector<sray::ActorHandle<Mixer>> actors;
};

Workload MakeWorkload(std::mt19937_64& random, int actor_count) {
  Workload workload;
  for (int index = 0; index < 16; ++index) {
    std::vector<std::uint8_t> blob(index < 8 ? 1024 : 256 * 1024);
    for (auto& byte : blob) byte = static_cast<std::uint8_t>(random());
    workload.sums.push_back(Checksum(blob));
    workload.blobs.push_back(sray::Put(blob));
  }
  for (int index = 0; index < actor_count; ++index) {
    workload.actors.push_back(
        sray::Actor(Mixer::Create).SetMaxRestarts(100000).SetMaxTaskRetries(20).Remote());
  }
  return workload;
}

int Soak(std::uint64_t seed, const std::string& done_file) {
  std::mt19937_64 random(seed);
  auto [blobs, sums, actors] = MakeWorkload(random, 3);
  std::cout << "chaos: ready" << std::endl;
  std::size_t rounds = 0, results = 0, wrong = 0, lost = 0, other = 0;
  auto other_error = [&](const std::string& what, const std::exception& error) {
    if (other++ < 3) std::cerr << "chaos_check: " << what << ": " << error.what() << "\n";
  };
  std::uint64_t key = seed << 24;
  while (!std::filesystem::exists(done_file) && wrong == 0 && other == 0) {
    std::vector<sray::ObjectRef<std::uint64_t>> tasks;
    tasks.reserve(1000);
    for (std::uint64_t index = 0; index < 1000; ++index) {
      tasks.push_back(
          sray::Task(checksum_of).SetMaxRetries(20).Remote(blobs[index % blobs.size()], index));
    }
    std::vector<sray::ObjectRef<std::uint64_t>> calls;
    calls.reserve(300);
    for (std::uint64_t index = 0; index < 300; ++index) {
      calls.push_back(actors[index % actors.size()].Task(&Mixer::Apply).Remote(index));
    }
    for (std::uint64_t index = 0; index < tasks.size(); ++index) {
      ++results;
      try {
        if (sray::Get(tasks[index]) != (sums[index % sums.size()] ^ Mix(index))) ++wrong;
      } catch (const sray::WorkerDiedError&) {
        ++lost;
      } catch (const std::exception& error) {
        other_error("task", error);
      }
    }
    for (std::uint64_t index = 0; index < calls.size(); ++index) {
      ++results;
      try {
        if (sray::Get(calls[index]) != Mix(index) + 1) ++wrong;
      } catch (const sray::ActorDiedError&) {
        ++lost;
      } catch (const std::exception& error) {
        other_error("actor call", error);
      }
    }
    for (int index = 0; index < 8; ++index) {
      ++results;
      const std::uint64_t this_key = key++;
      try {
        const auto ref = sray::Put(Fill(this_key, 1 << 20));
        if (Checksum(sray::Get(ref)) != Checksum(Fill(this_key, 1 << 20))) ++wrong;
      } catch (const std::exception& error) {
        other_error("put", error);
      }
    }
    ++results;
    try {
      auto actor = sray::Actor(Mixer::Create).Remote();
      if (sray::Get(actor.Task(&Mixer::Apply).Remote(rounds)) != Mix(rounds) + 1) ++wrong;
      actor.Kill();
    } catch (const sray::ActorDiedError&) {
      ++lost;  // its process was a kill's victim before the call returned
    } catch (const std::exception& error) {
      other_error("a new actor", error);
    }
    if (++rounds % 100 == 0) std::cout << "soak: round " << rounds << std::endl;
  }
  std::cout << "chaos_check soak rounds=" << rounds << " results=" << results << " wrong=" << wrong
            << " lost=" << lost << " other_errors=" << other << std::endl;
  sray::Shutdown();
  return wrong == 0 && other == 0 ? 0 : 1;
}

// The whole text as a number, or nothing: "4x", "" and "-1" are refused,
// not read as 4 or 0 as std::stoull and std::stod would.
std::optional<std::uint64_t> WholeCount(std::string_view text) {
  std::uint64_t number = 0;
  const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || stop != text.data() + text.size())
    return std::nullopt;
  return number;
}

// Seconds: finite and not negative.
std::optional<double> WholeSeconds(std::string_view text) {
  double number = 0;
  const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || stop != text.data() + text.size() ||
      !std::isfinite(number) || number < 0) {
    return std::nullopt;
  }
  return number;
}

int Usage(const std::string& problem) {
  std::cerr << "chaos_check: " << problem
            << "\nusage: chaos_check load SEED TASKS CALLS [forever | seconds=S] | store SEED "
               "SECONDS | soak SEED DONE_FILE\n";
  return 2;
}

}  // namespace

// Init first even when the arguments are wrong: under `sray run` every rank
// runs main, and the other ranks wait in the wire-up for the driver's.
int main(int argc, char** argv) {
  sray::Init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::optional<std::uint64_t> seed = argc > 2 ? WholeCount(argv[2]) : std::nullopt;
  if (argc > 2 && !seed)
    return Usage("SEED must be a whole number, not '" + std::string(argv[2]) + "'");
  if (argc == 4 && mode == "store") {
    const std::optional<double> seconds = WholeSeconds(argv[3]);
    if (!seconds)
      return Usage("SECONDS must be a number of seconds, not '" + std::string(argv[3]) + "'");
    return StoreFull(*seed, *seconds);
  }
  if (argc == 4 && mode == "soak") return Soak(*seed, argv[3]);
  if (mode != "load" || (argc != 5 && argc != 6))
    return Usage("unknown mode or wrong number of arguments");
  const std::optional<std::uint64_t> tasks = WholeCount(argv[3]);
  const std::optional<std::uint64_t> calls = WholeCount(argv[4]);
  if (!tasks || !calls) return Usage("TASKS and CALLS must be whole numbers");
  const std::string how_long = argc == 6 ? argv[5] : "";
  const bool forever = how_long == "forever";
  std::optional<double> least_seconds = 0.0;
  if (how_long.starts_with("seconds=")) {
    least_seconds = WholeSeconds(std::string_view(how_long).substr(8));
  } else if (!how_long.empty() && !forever) {
    least_seconds.reset();
  }
  if (!least_seconds)
    return Usage("the last argument must be 'forever' or 'seconds=S', not '" + how_long + "'");
  const std::chrono::duration<double> least_duration(*least_seconds);
  const std::size_t tasks_per_round = *tasks;
  const std::size_t calls_per_round = *calls;
  std::mt19937_64 random(*seed);
  auto [blobs, sums, actors] = MakeWorkload(random, 6);
  for (auto& actor : actors) (void)sray::Get(actor.Task(&Mixer::Apply).Remote(0));
  std::cout << "chaos: ready" << std::endl;
  const auto ready_at = std::chrono::steady_clock::now();

  std::size_t rounds = 0, task_ok = 0, task_lost = 0, task_wrong = 0, call_ok = 0, call_lost = 0,
              call_wrong = 0, other = 0;
  auto other_error = [&](const std::string& what, const std::exception& error) {
    if (other++ < 3) std::cerr << "chaos_check: " << what << ": " << error.what() << "\n";
  };
  auto more_rounds = [&] {
    if (task_wrong != 0 || call_wrong != 0 || other != 0) return false;
    return forever || std::chrono::steady_clock::now() - ready_at < least_duration;
  };
  do {
    ++rounds;
    std::vector<sray::ObjectRef<std::uint64_t>> results;
    results.reserve(tasks_per_round);
    for (std::size_t index = 0; index < tasks_per_round; ++index) {
      results.push_back(sray::Task(checksum_of)
                            .SetMaxRetries(20)
                            .Remote(blobs[index % blobs.size()], std::uint64_t{index}));
    }
    for (std::size_t index = 0; index < tasks_per_round; ++index) {
      try {
        const std::uint64_t value = sray::Get(results[index]);
        (value == (sums[index % sums.size()] ^ Mix(index)) ? task_ok : task_wrong)++;
      } catch (const sray::WorkerDiedError&) {
        ++task_lost;
      } catch (const std::exception& error) {
        other_error("task " + std::to_string(index), error);
      }
    }
    std::vector<sray::ObjectRef<std::uint64_t>> answers;
    answers.reserve(calls_per_round);
    for (std::size_t index = 0; index < calls_per_round; ++index) {
      answers.push_back(
          actors[index % actors.size()].Task(&Mixer::Apply).Remote(std::uint64_t{index}));
    }
    for (std::size_t index = 0; index < calls_per_round; ++index) {
      try {
        (sray::Get(answers[index]) == Mix(index) + 1 ? call_ok : call_wrong)++;
      } catch (const sray::ActorDiedError&) {
        ++call_lost;
      } catch (const std::exception& error) {
        other_error("actor call " + std::to_string(index), error);
      }
    }
  } while (more_rounds());
  std::cout << "chaos_check rounds=" << rounds << " tasks=" << rounds * tasks_per_round
            << " task_ok=" << task_ok << " task_lost=" << task_lost << " task_wrong=" << task_wrong
            << " calls=" << rounds * calls_per_round << " call_ok=" << call_ok
            << " call_lost=" << call_lost << " call_wrong=" << call_wrong
            << " other_errors=" << other << std::endl;
  sray::Shutdown();
  return task_wrong == 0 && call_wrong == 0 && other == 0 ? 0 : 1;
}
