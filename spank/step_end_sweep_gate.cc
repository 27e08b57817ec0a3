#include "step_end_sweep_gate.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <thread>

#include "job_user_process.h"
#include "jobsetup/step_record.h"

namespace sray::spank {
namespace {

constexpr char kLeftSomething = 'x';
constexpr char kClean = '.';

// The stamp's descriptor, or -1.
int OpenStamp(const std::filesystem::path& directory) {
  const std::filesystem::path stamp = directory / jobsetup::kStepEndSweepStamp;
  return ::open(stamp.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

}  // namespace

StepEndSweepGate::StepEndSweepGate(int descriptor) : descriptor_(descriptor) {
  (void)KeepOutOfJobUserProcesses(descriptor);
}

StepEndSweepGate::~StepEndSweepGate() {
  AllowIntoJobUserProcesses(descriptor_.get());
}

std::unique_ptr<StepEndSweepGate> StepEndSweepGate::Enter(
    const std::filesystem::path& directory, std::chrono::system_clock::time_point now) {
  const int descriptor = OpenStamp(directory);
  if (descriptor < 0) return nullptr;
  std::unique_ptr<StepEndSweepGate> gate(new StepEndSweepGate(descriptor));
  if (::flock(descriptor, LOCK_EX | LOCK_NB) != 0) return nullptr;  // another sweep runs
  struct stat last {};
  char outcome = 0;
  if (::fstat(descriptor, &last) == 0 && ::pread(descriptor, &outcome, 1, 0) == 1 &&
      outcome == kLeftSomething &&
      now - std::chrono::system_clock::from_time_t(last.st_mtime) < kPauseAfterProblems) {
    return nullptr;
  }
  return gate;
}

std::unique_ptr<StepEndSweepGate> StepEndSweepGate::Hold(
    const std::filesystem::path& directory, std::chrono::steady_clock::time_point give_up_at) {
  const int descriptor = OpenStamp(directory);
  if (descriptor < 0) return nullptr;
  std::unique_ptr<StepEndSweepGate> gate(new StepEndSweepGate(descriptor));
  // Polled rather than a blocking flock: a sweep that hangs past the
  // deadline must not hold the step's start with it.
  while (::flock(descriptor, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() >= give_up_at) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return gate;
}

void StepEndSweepGate::Record(bool left_something) {
  const char outcome = left_something ? kLeftSomething : kClean;
  // A stamp that cannot be written only costs the pause.
  if (::pwrite(descriptor_.get(), &outcome, 1, 0) == 1)
    (void)::futimens(descriptor_.get(), nullptr);
}

}  // namespace sray::spank
