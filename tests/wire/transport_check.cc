// A job-wide check of wire-up and transport, run on every rank of a step by
// the integration tests (under srun and under `sray run`):
//
//   transport_check alltoall         every rank calls every rank; replies verified
//   transport_check bulk BYTES       rank 0 -> last rank: rendezvous AM and RMA pull,
//                                    verified by checksum
//   transport_check peer-death       every rank calls the last rank until it dies;
//                                    survivors report the error and exit 1
//   transport_check intruder         a transport without the job secret gets nothing served
//   transport_check abort            rank 1 calls PMIx_Abort(5); everyone else waits
//   transport_check fence            fences are barriers (rank 1 arrives late)
//   transport_check fence-timeout    a fence rank 1 never joins fails after 2 s
//
// Prints "rank R: ..." lines; exits 0 on success.

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/huge_page_buffer.h"
#include "wire/bootstrap.h"

namespace {

using sray::Result;
using sray::Status;
using sray::transport::Bytes;

constexpr std::uint32_t kEcho = 1;
constexpr std::uint32_t kChecksum = 2;
constexpr std::uint32_t kStatistics = 3;

using sray::transport::BytesOf;
using sray::transport::TextOf;

// Fletcher-style checksum over 64-bit words: fast and order-sensitive.
std::uint64_t Checksum(std::span<const std::byte> data) {
  std::uint64_t sum_a = 1;
  std::uint64_t sum_b = 0;
  std::size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, data.data() + i, 8);
    sum_a += word;
    sum_b += sum_a;
  }
  for (; i < data.size(); ++i) {
    sum_a += std::to_integer<std::uint64_t>(data[i]);
    sum_b += sum_a;
  }
  return sum_a ^ (sum_b << 1);
}

void FillPattern(std::span<std::byte> data, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    const std::uint64_t word = generator();
    std::memcpy(data.data() + i, &word, 8);
  }
  for (; i < data.size(); ++i) data[i] = std::byte{0x5a};
}

Bytes NumberBytes(std::uint64_t value) {
  Bytes bytes(8);
  std::memcpy(bytes.data(), &value, 8);
  return bytes;
}

std::uint64_t BytesNumber(std::span<const std::byte> bytes) {
  std::uint64_t value = 0;
  if (bytes.size() == 8) std::memcpy(&value, bytes.data(), 8);
  return value;
}

int Fail(std::uint32_t rank, const std::string& what) {
  std::cout << "rank " << rank << ": FAIL: " << what << std::endl;
  return 1;
}

// The ranks that have called this one's echo: the peer-death victim waits
// for every survivor's first call before it says it is ready to die, so no
// survivor's first connection is attempted to a dead process (that fails
// with a connection error, not the peer failure the test is about).
struct EchoCallers {
  std::mutex mutex;
  std::condition_variable changed;
  std::set<std::uint32_t> ranks;
};
EchoCallers echo_callers;

void RegisterHandlers(sray::wire::WiredJob& job) {
  auto& transport = *job.transport;
  transport.RegisterRequestHandler(
      kEcho, [&transport](std::uint32_t source, std::span<const std::byte> payload) {
        {
          std::lock_guard lock(echo_callers.mutex);
          echo_callers.ranks.insert(source);
        }
        echo_callers.changed.notify_all();
        std::string reply = "echo from " + std::to_string(transport.rank()) + " to " +
                            std::to_string(source) + ": ";
        reply.append(TextOf(payload));
        return Result<Bytes>(BytesOf(reply));
      });
  transport.RegisterRequestHandler(kChecksum,
                                   [](std::uint32_t, std::span<const std::byte> payload) {
                                     return Result<Bytes>(NumberBytes(Checksum(payload)));
                                   });
  transport.RegisterRequestHandler(
      kStatistics, [&transport](std::uint32_t, std::span<const std::byte>) {
        return Result<Bytes>(NumberBytes(transport.statistics().rejected_frames));
      });
}

int AllToAll(sray::wire::WiredJob& job) {
  const auto& layout = job.pmix->layout();
  for (std::uint32_t peer = 0; peer < layout.size; ++peer) {
    const std::string message = "hello " + std::to_string(layout.rank);
    auto reply = job.transport->Call(peer, kEcho, BytesOf(message));
    if (!reply.ok()) return Fail(layout.rank, reply.status().message());
    const std::string expected =
        "echo from " + std::to_string(peer) + " to " + std::to_string(layout.rank) + ": " + message;
    if (TextOf(*reply) != expected)
      return Fail(layout.rank, "wrong reply '" + std::string(TextOf(*reply)) + "'");
  }
  std::cout << "rank " << layout.rank << " (node " << layout.node_id << " of " << layout.num_nodes
            << ", local rank " << layout.local_rank << " of " << layout.local_size
            << "): all-to-all ok with " << layout.size << " ranks" << std::endl;
  return 0;
}

int Bulk(sray::wire::WiredJob& job, std::size_t bytes) {
  const auto& layout = job.pmix->layout();
  const std::uint32_t last = layout.size - 1;
  // Huge pages, as the transport's own receive buffers: a gibibyte faulted in
  // 4 KiB at a time took about 3 s on the test machines, on each side.
  sray::HugePageBuffer data;
  std::unique_ptr<sray::transport::RegisteredMemory> region;
  if (layout.rank == 0) {
    data = sray::HugePageBuffer(bytes);
    FillPattern({data.data(), data.size()}, 42);
    const std::uint64_t expected = Checksum({data.data(), data.size()});
    const auto started = std::chrono::steady_clock::now();
    auto remote =
        job.transport->Call(last, kChecksum, {data.data(), data.size()}, std::chrono::minutes(5));
    if (!remote.ok()) return Fail(0, remote.status().message());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (BytesNumber(*remote) != expected) return Fail(0, "rendezvous checksum mismatch");
    std::cout << "rank 0: rendezvous send of " << bytes << " bytes to " << job.Describe(last)
              << " verified (" << static_cast<double>(bytes) / seconds / 1e9 << " GB/s)"
              << std::endl;
    auto mapped = job.transport->Register(data.data(), data.size());
    if (!mapped.ok()) return Fail(0, mapped.status().message());
    region = std::move(mapped).value();
    auto address = NumberBytes(reinterpret_cast<std::uintptr_t>(data.data()));
    if (auto s = job.pmix->Put(sray::wire::Scope::kGlobal, "check.address", address); !s.ok())
      return Fail(0, s.message());
    if (auto s = job.pmix->Put(sray::wire::Scope::kGlobal, "check.key", region->packed_key());
        !s.ok())
      return Fail(0, s.message());
    if (auto s = job.pmix->Put(sray::wire::Scope::kGlobal, "check.sum", NumberBytes(expected));
        !s.ok())
      return Fail(0, s.message());
  }
  if (auto s = job.pmix->Commit(); !s.ok()) return Fail(layout.rank, s.message());
  if (auto s = job.pmix->Fence(); !s.ok()) return Fail(layout.rank, s.message());
  if (layout.rank == last && last != 0) {
    auto address = job.pmix->Get(0, "check.address", false);
    auto key = job.pmix->Get(0, "check.key", false);
    auto sum = job.pmix->Get(0, "check.sum", false);
    if (!address.ok() || !key.ok() || !sum.ok()) return Fail(last, "region not published");
    sray::HugePageBuffer copy(bytes);
    const auto started = std::chrono::steady_clock::now();
    auto pulled = job.transport->Pull(0, BytesNumber(*address), *key, copy.data(), copy.size(),
                                      std::chrono::minutes(5));
    if (!pulled.ok()) return Fail(last, pulled.message());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (Checksum({copy.data(), copy.size()}) != BytesNumber(*sum))
      return Fail(last, "RMA pull checksum mismatch");
    std::cout << "rank " << last << ": RMA pull of " << bytes << " bytes from rank 0 verified ("
              << static_cast<double>(bytes) / seconds / 1e9 << " GB/s)" << std::endl;
  }
  // Rank 0's memory must stay registered until the pull is done.
  if (auto s = job.pmix->Fence(); !s.ok()) return Fail(layout.rank, s.message());
  return 0;
}

int PeerDeath(sray::wire::WiredJob& job) {
  const auto& layout = job.pmix->layout();
  const std::uint32_t victim = layout.size - 1;
  if (layout.rank == victim) {
    {
      std::unique_lock lock(echo_callers.mutex);
      if (!echo_callers.changed.wait_for(lock, std::chrono::minutes(1), [&] {
            return echo_callers.ranks.size() >= layout.size - 1;
          })) {
        return Fail(layout.rank, "not every survivor called the victim within a minute");
      }
    }
    std::cout << "rank " << victim << ": victim pid " << getpid() << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < deadline) {
    auto reply = job.transport->Call(victim, kEcho, BytesOf("ping"), std::chrono::seconds(30));
    if (!reply.ok()) {
      std::cout << "rank " << layout.rank << ": peer failure seen: " << reply.status().message()
                << std::endl;
      // A second call must fail at once, without a new connection attempt.
      const auto again_started = std::chrono::steady_clock::now();
      auto again = job.transport->Call(victim, kEcho, BytesOf("ping"), std::chrono::seconds(30));
      const auto again_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - again_started)
                                .count();
      // The time is printed for people; the test checks that the call
      // failed with the peer's failure (a new connection attempt would end
      // in a timeout error instead), not how long it took.
      std::cout << "rank " << layout.rank << ": next call " << (again.ok() ? "succeeded" : "failed")
                << " after " << again_ms << " ms"
                << (again.ok() ? std::string() : ": " + again.status().message()) << std::endl;
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Fail(layout.rank, "the victim never died");
}

int Intruder(sray::wire::WiredJob& job) {
  const auto& layout = job.pmix->layout();
  if (layout.rank == 1) {
    // A transport with its own random token: what a process outside the job
    // that somehow learned rank 0's address would have.
    sray::transport::TransportOptions options;
    options.rank = 999;
    std::random_device random;
    for (auto& byte : options.token) byte = static_cast<std::byte>(random());
    auto* wired = &job;
    const std::uint32_t my_node = layout.node_id;
    options.resolve_address = [wired, my_node](std::uint32_t rank) -> Result<Bytes> {
      auto location = wired->LocationOf(rank);
      if (!location.ok()) return location.status();
      return wired->values->Get(rank, location->node_id == my_node
                                          ? sray::wire::kFullAddressKey
                                          : sray::wire::kNetworkAddressKey);
    };
    auto intruder = sray::transport::Transport::Create(std::move(options));
    if (!intruder.ok()) return Fail(1, intruder.status().message());
    auto reply = (*intruder)->Call(0, kEcho, BytesOf("let me in"), std::chrono::seconds(3));
    if (reply.ok()) return Fail(1, "the intruder was served: " + std::string(TextOf(*reply)));
    std::cout << "rank 1: intruder refused: " << reply.status().message() << std::endl;
    auto rejected = job.transport->Call(0, kStatistics, {});
    if (!rejected.ok()) return Fail(1, rejected.status().message());
    if (BytesNumber(*rejected) == 0) return Fail(1, "rank 0 did not count a rejected frame");
    std::cout << "rank 1: rank 0 rejected " << BytesNumber(*rejected) << " frame(s)" << std::endl;
  }
  if (auto s = job.pmix->Fence(); !s.ok()) return Fail(layout.rank, s.message());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto job = sray::wire::WireUp();
  if (!job.ok()) {
    std::cerr << "sray: " << job.status().message() << std::endl;
    return 2;
  }
  RegisterHandlers(**job);
  // Nobody may call a handler before everyone registered them.
  if (auto s = (*job)->pmix->Fence(); !s.ok()) {
    std::cerr << "sray: " << s.message() << std::endl;
    return 2;
  }
  int result = 2;
  if (mode == "alltoall") {
    result = AllToAll(**job);
  } else if (mode == "bulk" && argc > 2) {
    result = Bulk(**job, std::stoull(argv[2]));
  } else if (mode == "fence-timeout") {
    // Rank 1 never reaches the fence: the others get an error, not a hang.
    auto& job_ref = **job;
    const auto rank = job_ref.pmix->layout().rank;
    if (rank == 1) {
      // Far past the others' timeout, however late they start theirs.
      std::this_thread::sleep_for(std::chrono::seconds(8));
      std::cout.flush();
      _exit(0);
    }
    auto fenced = job_ref.pmix->Fence(std::chrono::seconds(2));
    std::cout << "rank " << rank << ": " << (fenced.ok() ? "fence passed" : fenced.message())
              << std::endl;
    std::cout.flush();
    _exit(fenced.ok() ? 1 : 0);
  } else if (mode == "abort") {
    auto& job_ref = **job;
    if (job_ref.pmix->layout().rank == 1) {
      std::cout << "rank 1: aborting" << std::endl;
      (void)job_ref.pmix->Abort(5, "transport_check asked for it");
    }
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  } else if (mode == "fence") {
    // Rank 1 arrives 3 s late at each of two fences; nobody may leave a
    // fence before it arrives (regression: Slurm's PMIx let non-collecting
    // fences return at once).
    auto& job_ref = **job;
    const auto& layout = job_ref.pmix->layout();
    // Each rank times from when it left the wire-up fence, and ranks leave
    // it moments apart (rank 2, 1 ms after rank 1, once measured 999 ms; a
    // loaded machine can delay one by more): fence k counts as waited for
    // when it ends at least 3k seconds less 1 s after that (a fence that
    // does not wait ends within a few ms).
    constexpr std::int64_t kLateBy = 3000;
    constexpr std::int64_t kSkewAllowance = 1000;
    const auto started = std::chrono::steady_clock::now();
    for (int fence = 1; fence <= 2; ++fence) {
      if (layout.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(kLateBy));
      auto s = job_ref.pmix->Fence();
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
      // Rank 1's own wait proves nothing (it slept before the fence): it
      // says so instead of a line that could not fail.
      if (layout.rank == 1) {
        std::cout << "rank 1 arrived late at fence " << fence << (s.ok() ? "" : ": " + s.message())
                  << std::endl;
        continue;
      }
      std::cout << "rank " << layout.rank << " left fence " << fence << " after "
                << (waited >= kLateBy * fence - kSkewAllowance
                        ? "rank 1 arrived"
                        : "only " + std::to_string(waited) + " ms")
                << (s.ok() ? "" : ": " + s.message()) << std::endl;
    }
    result = 0;
  } else if (mode == "peer-death") {
    result = PeerDeath(**job);
  } else if (mode == "intruder") {
    result = Intruder(**job);
  } else {
    std::cerr << "usage: transport_check alltoall | bulk BYTES | peer-death | intruder"
              << std::endl;
    return 2;
  }
  if (result != 0) {
    // Exit without the orderly teardown: peers may be dead and the fence in
    // PMIx_Finalize would wait for them.
    std::cout.flush();
    _exit(result);
  }
  // Everyone finishes its calls before anyone tears its transport down.
  if (auto s = (*job)->pmix->Fence(); !s.ok()) return 2;
  return 0;
}
