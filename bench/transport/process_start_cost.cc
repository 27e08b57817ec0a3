// What a fresh worker process pays for UCX before it can answer anyone, and
// what fork itself costs, measured in forked children of a process that has
// already loaded UCX's modules (the best case a forked template worker could
// reach). Issue 15 asks for 1,000 actors/s; this shows whether one new
// process per actor can get there on this machine.
//
//   process_start_cost [rounds]     (default 20; UCX_TLS and friends apply)
//
// Prints one line per phase: the median wall time and the median CPU time
// (user + system) of the child, in milliseconds.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "transport/ucx_handles.h"

namespace {

double MillisecondsNow() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double CpuMilliseconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto milliseconds = [](const timeval& time) {
    return static_cast<double>(time.tv_sec) * 1e3 + static_cast<double>(time.tv_usec) / 1e3;
  };
  return milliseconds(usage.ru_utime) + milliseconds(usage.ru_stime);
}

// The phases of one start, through the runtime's own handles as a worker
// makes them (core/worker_main.cc: a 1 s keepalive).
struct Phases {
  double init = 0;
  double worker = 0;
  double cleanup = 0;
  double cpu = 0;
};

bool StartAndStopUcx(Phases& phases) {
  const double started = MillisecondsNow();
  const double cpu_started = CpuMilliseconds();
  auto context = sray::transport::UcxContext::Create("1s");
  if (!context.ok()) return false;
  const double context_made = MillisecondsNow();
  auto worker = sray::transport::UcxWorker::Create(*context);
  if (!worker.ok()) return false;
  const double worker_made = MillisecondsNow();
  // The worker holds the context: dropping both ends UCX here.
  context->reset();
  worker->reset();
  const double ended = MillisecondsNow();
  phases = {.init = context_made - started,
            .worker = worker_made - context_made,
            .cleanup = ended - worker_made,
            .cpu = CpuMilliseconds() - cpu_started};
  return true;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  Phases first;
  if (!StartAndStopUcx(first)) {
    std::fprintf(stderr, "process_start_cost: cannot start UCX: check UCX_TLS\n");
    return 1;
  }
  std::vector<double> forks;
  std::vector<double> inits;
  std::vector<double> workers;
  std::vector<double> cleanups;
  std::vector<double> cpus;
  for (int round = 0; round < rounds; ++round) {
    int report[2];
    if (::pipe(report) != 0) return 1;
    const double before_fork = MillisecondsNow();
    const pid_t child = ::fork();
    if (child < 0) return 1;
    if (child == 0) {
      const double fork_wall = MillisecondsNow() - before_fork;
      Phases phases;
      double values[5] = {fork_wall, -1, -1, -1, -1};
      if (StartAndStopUcx(phases)) {
        values[1] = phases.init;
        values[2] = phases.worker;
        values[3] = phases.cleanup;
        values[4] = phases.cpu;
      }
      const bool written = ::write(report[1], values, sizeof(values)) == sizeof(values);
      ::_exit(written ? 0 : 1);
    }
    ::close(report[1]);
    double values[5] = {};
    const bool read = ::read(report[0], values, sizeof(values)) == sizeof(values);
    ::close(report[0]);
    int wait_status = 0;
    ::waitpid(child, &wait_status, 0);
    if (!read || values[1] < 0) {
      std::fprintf(stderr, "process_start_cost: a child could not start UCX\n");
      return 1;
    }
    forks.push_back(values[0]);
    inits.push_back(values[1]);
    workers.push_back(values[2]);
    cleanups.push_back(values[3]);
    cpus.push_back(values[4]);
  }
  const char* transports = std::getenv("UCX_TLS");
  std::printf("UCX_TLS=%s, %d forked children, medians in ms\n", transports ? transports : "(all)",
              rounds);
  std::printf("first start in this process: ucp_init %.2f, ucp_worker_create %.2f, cleanup %.2f\n",
              first.init, first.worker, first.cleanup);
  std::printf("fork (to the child running) %.2f\n", Median(forks));
  std::printf("ucp_init %.2f\n", Median(inits));
  std::printf("ucp_worker_create %.2f\n", Median(workers));
  std::printf("cleanup %.2f\n", Median(cleanups));
  std::printf("child CPU for init, worker and cleanup %.2f\n", Median(cpus));
  return 0;
}
