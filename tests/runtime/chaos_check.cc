// The load that scripts/chaos injects faults into: tasks with object
// arguments (some above the inline limit) and actor calls, every result
// checked. Prints "chaos: ready" once its objects and actors exist (the
// script starts killing then), and at the end one line
//   chaos_check tasks=N task_ok=K task_lost=L task_wrong=W calls=N call_ok=K
//     call_lost=L call_wrong=W other_errors=E
// "lost" is a typed error that names what died (WorkerDiedError after the
// retries, ActorDiedError); "wrong" a result that does not match, and
// "other" any other error: both fail the run (exit 1).
//
//   chaos_check load SEED TASKS CALLS

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
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
};

}  // namespace

SRAY_REMOTE(checksum_of);
SRAY_REMOTE(Mixer::Create, &Mixer::Apply);

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  if (argc != 5 || std::string(argv[1]) != "load") {
    std::cerr << "usage: chaos_check load SEED TASKS CALLS\n";
    return 2;
  }
  const std::uint64_t seed = std::stoull(argv[2]);
  const std::size_t tasks = std::stoull(argv[3]);
  const std::size_t calls = std::stoull(argv[4]);
  std::mt19937_64 random(seed);

  // 8 objects of 1 KiB (inline in a task's arguments) and 8 of 256 KiB
  // (through the object store).
  std::vector<sray::ObjectRef<std::vector<std::uint8_t>>> blobs;
  std::vector<std::uint64_t> sums;
  for (int index = 0; index < 16; ++index) {
    std::vector<std::uint8_t> blob(index < 8 ? 1024 : 256 * 1024);
    for (auto& byte : blob) byte = static_cast<std::uint8_t>(random());
    sums.push_back(Checksum(blob));
    blobs.push_back(sray::Put(blob));
  }
  std::vector<sray::ActorHandle<Mixer>> actors;
  for (int index = 0; index < 6; ++index) {
    actors.push_back(sray::Actor(Mixer::Create).SetMaxRestarts(100000).SetMaxTaskRetries(20).Remote());
  }
  for (auto& actor : actors) (void)sray::Get(actor.Task(&Mixer::Apply).Remote(0));
  std::cout << "chaos: ready" << std::endl;

  std::size_t task_ok = 0, task_lost = 0, task_wrong = 0, call_ok = 0, call_lost = 0,
              call_wrong = 0, other = 0;
  auto other_error = [&](const std::string& what, const std::exception& error) {
    if (other++ < 3) std::cerr << "chaos_check: " << what << ": " << error.what() << "\n";
  };
  std::vector<sray::ObjectRef<std::uint64_t>> results;
  results.reserve(tasks);
  for (std::size_t index = 0; index < tasks; ++index) {
    results.push_back(
        sray::Task(checksum_of).SetMaxRetries(20).Remote(blobs[index % blobs.size()], std::uint64_t{index}));
  }
  for (std::size_t index = 0; index < tasks; ++index) {
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
  answers.reserve(calls);
  for (std::size_t index = 0; index < calls; ++index) {
    answers.push_back(actors[index % actors.size()].Task(&Mixer::Apply).Remote(std::uint64_t{index}));
  }
  for (std::size_t index = 0; index < calls; ++index) {
    try {
      (sray::Get(answers[index]) == Mix(index) + 1 ? call_ok : call_wrong)++;
    } catch (const sray::ActorDiedError&) {
      ++call_lost;
    } catch (const std::exception& error) {
      other_error("actor call " + std::to_string(index), error);
    }
  }
  std::cout << "chaos_check tasks=" << tasks << " task_ok=" << task_ok << " task_lost=" << task_lost
            << " task_wrong=" << task_wrong << " calls=" << calls << " call_ok=" << call_ok
            << " call_lost=" << call_lost << " call_wrong=" << call_wrong << " other_errors=" << other
            << std::endl;
  sray::Shutdown();
  return task_wrong == 0 && call_wrong == 0 && other == 0 ? 0 : 1;
}
