// Transport benchmark, run on two ranks by bench/transport/run:
//   sray run -N1 --tasks-per-node 2 transport_bench [latency|bandwidth|rpc|pull|slow]
// Rank 0 measures against rank 1 and prints one line per metric:
//   metric <name> <value> <unit>
// Sizes go from 8 B to 64 MiB. Latency is half the round trip of a request
// and an equally large response (what ucx_perftest ucp_am_lat reports);
// bandwidth streams requests with a window of outstanding calls and empty
// replies (ucp_am_bw); pull bandwidth reads registered memory (ucp_get)
// that is, as the object store's, a shared mapping of a file in /dev/shm,
// so a peer on the same host reads the file (transport/same_host_reads.h).
// `slow` (only when named) times calls whose handler sleeps 20 us to 3 ms,
// answered from the handler or later from another thread, and reports what
// each costs beyond the handler's own time.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "wire/bootstrap.h"

namespace {

using sray::Result;
using sray::transport::Bytes;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kEcho = 1;
constexpr std::uint32_t kSink = 2;
constexpr std::uint32_t kSlow = 3;          // sleeps as many microseconds as its payload says
constexpr std::uint32_t kSlowDeferred = 4;  // the same on another thread, as an actor's method
// Requests in flight while streaming: kWindow, but no more than
// kBytesInFlight (a window of 32 64 MiB messages would have the receiver
// allocate 2 GiB, which no workload of sray does, and measure page faults).
constexpr std::size_t kWindow = 32;
constexpr std::size_t kBytesInFlight = std::size_t{256} << 20;

const std::vector<std::size_t> kSizes = {8,      64,       512,      4096,      32768,
                                         262144, 1U << 20, 4U << 20, 16U << 20, 64U << 20};

std::size_t IterationsFor(std::size_t size, std::size_t budget_bytes, std::size_t most = 20000) {
  const std::size_t iterations = budget_bytes / size;
  return std::max<std::size_t>(20, std::min<std::size_t>(most, iterations));
}

// Small round trips take about a microsecond: 200,000 of them (bench/transport/run
// gives ucx_perftest as many) last long enough that one scheduling hiccup of
// this VM does not make the figure.
constexpr std::size_t kMostLatencyIterations = 200000;

std::string SizeName(std::size_t size) {
  if (size >= (1U << 20)) return std::to_string(size >> 20) + "MiB";
  if (size >= 1024) return std::to_string(size >> 10) + "KiB";
  return std::to_string(size) + "B";
}

void Report(const std::string& name, double value, const std::string& unit) {
  std::cout << "metric " << name << " " << value << " " << unit << std::endl;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// A file in /dev/shm mapped shared, read-write; removed with the object.
class SharedFile {
 public:
  static std::unique_ptr<SharedFile> Create(std::string path, std::size_t size) {
    const int descriptor = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (descriptor < 0) return nullptr;
    void* data = ::ftruncate(descriptor, static_cast<off_t>(size)) == 0
                     ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)
                     : MAP_FAILED;
    ::close(descriptor);
    if (data == MAP_FAILED) {
      ::unlink(path.c_str());
      return nullptr;
    }
    std::memset(data, 9, size);
    return std::unique_ptr<SharedFile>(new SharedFile(std::move(path), data, size));
  }
  ~SharedFile() {
    ::munmap(data_, size_);
    ::unlink(path_.c_str());
  }
  SharedFile(const SharedFile&) = delete;
  SharedFile& operator=(const SharedFile&) = delete;
  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  SharedFile(std::string path, void* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  void* data_;
  std::size_t size_;
};

int Fail(const std::string& what) {
  std::cerr << "transport_bench: " << what << std::endl;
  return 1;
}

int MeasureLatency(sray::transport::Transport& transport) {
  for (const std::size_t size : kSizes) {
    Bytes payload(size, std::byte{7});
    const std::size_t iterations = IterationsFor(size, 512U << 20, kMostLatencyIterations);
    for (std::size_t i = 0; i < iterations / 10 + 1; ++i) {
      if (!transport.Call(1, kEcho, payload).ok()) return Fail("warm-up call failed");
    }
    const auto started = Clock::now();
    for (std::size_t i = 0; i < iterations; ++i) {
      auto reply = transport.Call(1, kEcho, payload);
      if (!reply.ok() || reply->size() != size) return Fail("echo failed");
    }
    Report("latency_" + SizeName(size),
           Seconds(started) / static_cast<double>(iterations) / 2 * 1e6, "us");
  }
  return 0;
}

std::size_t WindowFor(std::size_t size) {
  return std::clamp<std::size_t>(kBytesInFlight / std::max<std::size_t>(1, size), 1, kWindow);
}

// Streams `iterations` requests of `size` with a window in flight.
double StreamSeconds(sray::transport::Transport& transport, const Bytes& payload,
                     std::size_t iterations) {
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t in_flight = 0;
  std::size_t completed = 0;
  bool failed = false;
  const std::size_t window = WindowFor(payload.size());
  const auto started = Clock::now();
  for (std::size_t i = 0; i < iterations; ++i) {
    {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return in_flight < window; });
      ++in_flight;
    }
    transport.CallAsync(1, kSink, payload, [&](Result<Bytes> reply) {
      std::lock_guard lock(mutex);
      failed = failed || !reply.ok();
      --in_flight;
      ++completed;
      changed.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  changed.wait(lock, [&] { return completed == iterations; });
  return failed ? -1.0 : Seconds(started);
}

int MeasureBandwidth(sray::transport::Transport& transport) {
  for (const std::size_t size : kSizes) {
    Bytes payload(size, std::byte{3});
    const std::size_t iterations = IterationsFor(size, 2048U << 20);
    // Two windows at least: the receiver's pooled buffers are then all
    // made (ucx_perftest's receiver reuses one buffer), as in a process that
    // has run a while; fewer measured first page faults at 16 and 64 MiB.
    const std::size_t warm_up = std::max(iterations / 10 + 1, 2 * WindowFor(size));
    if (StreamSeconds(transport, payload, warm_up) < 0) return Fail("stream failed");
    const double seconds = StreamSeconds(transport, payload, iterations);
    if (seconds < 0) return Fail("stream failed");
    Report("bandwidth_" + SizeName(size), static_cast<double>(size * iterations) / seconds / 1e6,
           "MB/s");
  }
  return 0;
}

int MeasureRoundTrips(sray::transport::Transport& transport) {
  Bytes payload(8, std::byte{1});
  constexpr std::size_t kCalls = 50000;
  for (std::size_t i = 0; i < 1000; ++i) (void)transport.Call(1, kSink, payload);
  auto started = Clock::now();
  for (std::size_t i = 0; i < kCalls; ++i) {
    if (!transport.Call(1, kSink, payload).ok()) return Fail("call failed");
  }
  Report("rpc_sync", static_cast<double>(kCalls) / Seconds(started), "calls/s");
  const double seconds = StreamSeconds(transport, payload, kCalls * 4);
  if (seconds < 0) return Fail("async calls failed");
  Report("rpc_async", static_cast<double>(kCalls * 4) / seconds, "calls/s");
  return 0;
}

// Sleeps as many microseconds as `payload` says; answers the seconds slept.
Result<Bytes> SleepAsAsked(std::span<const std::byte> payload) {
  std::uint32_t microseconds = 0;
  if (payload.size() != sizeof(microseconds)) return Result<Bytes>(Bytes{});
  std::memcpy(&microseconds, payload.data(), sizeof(microseconds));
  const auto started = Clock::now();
  std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
  const double slept = Seconds(started);
  Bytes answer(sizeof(slept));
  std::memcpy(answer.data(), &slept, sizeof(slept));
  return answer;
}

// One thread that answers deferred requests in order, as an actor's does.
class SlowMethods {
 public:
  SlowMethods()
      : thread_([this] {
          std::unique_lock lock(mutex_);
          while (true) {
            changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;
            auto [payload, responder] = std::move(queue_.front());
            queue_.erase(queue_.begin());
            lock.unlock();
            responder.Reply(SleepAsAsked(payload));
            lock.lock();
          }
        }) {}
  ~SlowMethods() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_one();
    thread_.join();
  }
  SlowMethods(const SlowMethods&) = delete;
  SlowMethods& operator=(const SlowMethods&) = delete;
  void Add(Bytes payload, sray::transport::Responder responder) {
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back(std::move(payload), std::move(responder));
    }
    changed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::pair<Bytes, sray::transport::Responder>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// What a call costs beyond its handler's own time when the handler takes
// long (a task or an actor method at the other end): the caller stops
// spinning after a while and sleeps, and both sides' progress threads go
// from polling to sleeping on the worker's events.
int MeasureSlowCalls(sray::transport::Transport& transport) {
  for (const auto& [method, name] : {std::pair{kSlow, std::string("slow_call")},
                                     std::pair{kSlowDeferred, std::string("slow_deferred_call")}}) {
    for (const std::uint32_t microseconds : {20U, 100U, 400U, 1000U, 3000U}) {
      Bytes payload(sizeof(microseconds));
      std::memcpy(payload.data(), &microseconds, sizeof(microseconds));
      const std::size_t calls = std::clamp<std::size_t>(400'000 / microseconds, 50, 5000);
      double handler_seconds = 0;
      const auto started = Clock::now();
      for (std::size_t i = 0; i < calls; ++i) {
        auto reply = transport.Call(1, method, payload);
        if (!reply.ok() || reply->size() != sizeof(double)) return Fail("slow call failed");
        double slept = 0;
        std::memcpy(&slept, reply->data(), sizeof(slept));
        handler_seconds += slept;
      }
      const double seconds = Seconds(started);
      Report(name + "_overhead_" + std::to_string(microseconds) + "us",
             (seconds - handler_seconds) / static_cast<double>(calls) * 1e6, "us");
      Report(name + "_round_trip_" + std::to_string(microseconds) + "us",
             seconds / static_cast<double>(calls) * 1e6, "us");
    }
  }
  return 0;
}

int MeasurePull(sray::wire::WiredJob& job, const Bytes& address, const Bytes& key) {
  std::uint64_t remote = 0;
  std::memcpy(&remote, address.data(), sizeof(remote));
  for (const std::size_t size : kSizes) {
    if (size < 4096) continue;
    std::vector<std::byte> local(size);
    // As many pulls as bench/transport/run gives ucx_perftest's ucp_get. A
    // quarter of that (513 pulls of 1 MiB, 16 ms) let one scheduling hiccup
    // of this VM move the figure by a tenth.
    const std::size_t iterations = IterationsFor(size, 2048U << 20);
    for (std::size_t i = 0; i < iterations / 10 + 1; ++i) {
      auto pulled = job.transport->Pull(1, remote, key, local.data(), size);
      if (!pulled.ok()) return Fail(pulled.message());
    }
    const auto started = Clock::now();
    for (std::size_t i = 0; i < iterations; ++i) {
      auto pulled = job.transport->Pull(1, remote, key, local.data(), size);
      if (!pulled.ok()) return Fail(pulled.message());
    }
    Report("pull_" + SizeName(size),
           static_cast<double>(size * iterations) / Seconds(started) / 1e6, "MB/s");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // An optional argument runs one measurement: latency, bandwidth, rpc or
  // pull; or slow, which runs only when named (no peer measures it).
  const std::string only = argc > 1 ? argv[1] : "";
  const auto wanted = [&only](std::string_view name) { return only.empty() || only == name; };
  auto wired = sray::wire::WireUp();
  if (!wired.ok()) return Fail(wired.status().message());
  auto& job = **wired;
  job.transport->RegisterRequestHandler(
      kEcho, [](std::uint32_t, std::span<const std::byte> payload) {
        return Result<Bytes>(Bytes(payload.begin(), payload.end()));
      });
  job.transport->RegisterRequestHandler(
      kSink, [](std::uint32_t, std::span<const std::byte>) { return Result<Bytes>(Bytes{}); });
  // Answer how long they really slept (a sleep overshoots by the timer slack).
  job.transport->RegisterRequestHandler(
      kSlow,
      [](std::uint32_t, std::span<const std::byte> payload) { return SleepAsAsked(payload); });
  SlowMethods slow_methods;
  job.transport->RegisterDeferredRequestHandler(
      kSlowDeferred, [&slow_methods](std::uint32_t, std::span<const std::byte> payload,
                                     sray::transport::Responder responder) {
        slow_methods.Add(Bytes(payload.begin(), payload.end()), std::move(responder));
      });
  const auto& layout = job.pmix->layout();
  if (layout.size != 2) return Fail("run with exactly two ranks");

  // Rank 1 offers 64 MiB of registered memory for the pull measurement: a
  // shared mapping of a file in /dev/shm, as an object in the object store.
  std::unique_ptr<SharedFile> exposed;
  std::unique_ptr<sray::transport::RegisteredMemory> region;
  if (layout.rank == 1) {
    exposed = SharedFile::Create("/dev/shm/sray-transport-bench." + std::to_string(::getpid()),
                                 64U << 20);
    if (!exposed) return Fail("cannot make a 64 MiB file in /dev/shm");
    // SRAY_BENCH_REMOTE_PULL: registered without its file, as a peer on
    // another host sees it, so that the pull goes through UCX (the TCP rows).
    std::optional<sray::transport::SharedFileRegion> file;
    if (std::getenv("SRAY_BENCH_REMOTE_PULL") == nullptr) {
      file = sray::transport::SharedFileRegion{.path = exposed->path(), .offset = 0};
    }
    auto mapped = job.transport->Register(exposed->data(), exposed->size(), file);
    if (!mapped.ok()) return Fail(mapped.status().message());
    region = std::move(mapped).value();
    std::uint64_t address = reinterpret_cast<std::uintptr_t>(exposed->data());
    Bytes address_bytes(sizeof(address));
    std::memcpy(address_bytes.data(), &address, sizeof(address));
    if (!job.pmix->Put(sray::wire::Scope::kGlobal, "bench.address", address_bytes).ok() ||
        !job.pmix->Put(sray::wire::Scope::kGlobal, "bench.key", region->packed_key()).ok()) {
      return Fail("cannot publish the region");
    }
  }
  if (!job.pmix->Commit().ok() || !job.pmix->Fence().ok()) return Fail("fence failed");

  int result = 0;
  if (layout.rank == 0) {
    auto address = job.pmix->Get(1, "bench.address", false);
    auto key = job.pmix->Get(1, "bench.key", false);
    if (!address.ok() || !key.ok()) return Fail("region not published");
    if (wanted("latency")) result = MeasureLatency(*job.transport);
    if (result == 0 && wanted("bandwidth")) result = MeasureBandwidth(*job.transport);
    if (result == 0 && wanted("rpc")) result = MeasureRoundTrips(*job.transport);
    if (result == 0 && wanted("pull")) result = MeasurePull(job, *address, *key);
    if (result == 0 && only == "slow") result = MeasureSlowCalls(*job.transport);
  }
  if (!job.pmix->Fence().ok()) return Fail("final fence failed");
  return result;
}
