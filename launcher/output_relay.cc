#include "output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace sray::launcher {
namespace {

// Chunks are appended to while below this, so that a burst of short lines
// is a few writes rather than one per line.
constexpr std::size_t kChunkBytes = 64 * 1024;

}  // namespace

OutputRelay::~OutputRelay() {
  for (auto& [number, target] : targets_) {
    if (target.mode == Mode::kOwnDescription) ::close(target.descriptor);
  }
}

OutputRelay::Target& OutputRelay::TargetFor(int target) {
  auto found = targets_.find(target);
  if (found != targets_.end()) return found->second;
  Target opened;
  struct stat status {};
  const int flags = ::fcntl(target, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY || ::fstat(target, &status) != 0) {
    // Closed, or a descriptor only for reading (a standard output closed
    // by the caller and its number reused by a pipe's read end).
    opened = {.mode = Mode::kFailed, .descriptor = -1, .queue = 0};
  } else if (S_ISSOCK(status.st_mode)) {
    opened = {.mode = Mode::kSocket, .descriptor = target, .queue = 0};
  } else if (!S_ISFIFO(status.st_mode) && ::isatty(target) != 1) {
    opened = {.mode = Mode::kAsIs, .descriptor = target, .queue = 0};
  } else {
    // A description of our own: O_NONBLOCK on the inherited one would reach
    // every process that shares it (the shell, the programs beside us in
    // a pipeline), which expect blocking writes.
    const std::string path = "/proc/self/fd/" + std::to_string(target);
    const int own = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    opened = own >= 0 ? Target{.mode = Mode::kOwnDescription, .descriptor = own, .queue = 0}
                      : Target{.mode = Mode::kPollFirst, .descriptor = target, .queue = 0};
  }
  if (opened.mode != Mode::kFailed) {
    const FileIdentity file{.device = status.st_dev, .inode = status.st_ino};
    const auto same = std::find_if(queues_.begin(), queues_.end(),
                                   [&file](const Queue& queue) { return queue.file == file; });
    opened.queue = static_cast<std::size_t>(same - queues_.begin());
    if (same == queues_.end()) queues_.push_back({.file = file, .chunks = {}});
  }
  return targets_.emplace(target, opened).first->second;
}

long OutputRelay::WriteSome(Chunk& chunk) {
  Target& target = TargetFor(chunk.target);
  const char* data = chunk.bytes.data() + chunk.written;
  const std::size_t size = chunk.bytes.size() - chunk.written;
  for (;;) {
    ssize_t written = -1;
    switch (target.mode) {
      case Mode::kFailed: return -1;
      case Mode::kSocket:
        written = ::send(target.descriptor, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
      case Mode::kPollFirst: {
        // Room for PIPE_BUF bytes is what POLLOUT promises on a pipe.
        pollfd ready{.fd = target.descriptor, .events = POLLOUT, .revents = 0};
        if (::poll(&ready, 1, 0) <= 0) return 0;
        written = ::write(target.descriptor, data, std::min<std::size_t>(size, PIPE_BUF));
        break;
      }
      case Mode::kOwnDescription:
      case Mode::kAsIs: written = ::write(target.descriptor, data, size); break;
    }
    if (written >= 0) return static_cast<long>(written);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    // The reader is gone (EPIPE), the terminal hung up (EIO), the file
    // system is full: nothing sensible is left to do with this output.
    if (errno == EPIPE) reader_gone_ = true;
    if (target.mode == Mode::kOwnDescription) ::close(target.descriptor);
    target = {.mode = Mode::kFailed, .descriptor = -1};
    return -1;
  }
}

void OutputRelay::Write(int target, std::string_view text) {
  if (text.empty()) return;
  const Target& to = TargetFor(target);
  if (to.mode == Mode::kFailed || queued_bytes_ >= kMostHeldBytes) {
    dropped_bytes_ += text.size();
    return;
  }
  std::deque<Chunk>& chunks = queues_[to.queue].chunks;
  if (!chunks.empty() && chunks.back().target == target &&
      chunks.back().bytes.size() < kChunkBytes) {
    chunks.back().bytes.append(text);
  } else {
    chunks.push_back({.target = target, .bytes = std::string(text), .written = 0});
  }
  queued_bytes_ += text.size();
  FlushQueue(queues_[to.queue]);
}

void OutputRelay::FlushQueue(Queue& queue) {
  while (!queue.chunks.empty()) {
    Chunk& chunk = queue.chunks.front();
    const long written = WriteSome(chunk);
    if (written == 0) return;
    if (written < 0) {
      DropQueuedFor(chunk.target);
      continue;
    }
    chunk.written += static_cast<std::size_t>(written);
    queued_bytes_ -= static_cast<std::size_t>(written);
    if (chunk.written == chunk.bytes.size()) queue.chunks.pop_front();
  }
}

void OutputRelay::Flush() {
  for (Queue& queue : queues_) FlushQueue(queue);
}

std::vector<int> OutputRelay::WaitingDescriptors() const {
  std::vector<int> waiting;
  for (const Queue& queue : queues_) {
    if (queue.chunks.empty()) continue;
    const auto found = targets_.find(queue.chunks.front().target);
    if (found != targets_.end()) waiting.push_back(found->second.descriptor);
  }
  return waiting;
}

OutputRelay::DrainEnd OutputRelay::Drain(
    std::optional<std::chrono::steady_clock::time_point> deadline, int stop) {
  for (;;) {
    Flush();
    if (Empty()) return DrainEnd::kWritten;
    int timeout_ms = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        DropAll();
        return DrainEnd::kDeadline;
      }
      timeout_ms = static_cast<int>(std::min<long long>(left.count(), INT_MAX));
    }
    std::vector<pollfd> descriptors;
    for (const int waiting : WaitingDescriptors()) {
      descriptors.push_back({.fd = waiting, .events = POLLOUT, .revents = 0});
    }
    if (stop >= 0) descriptors.push_back({.fd = stop, .events = POLLIN, .revents = 0});
    if (::poll(descriptors.data(), descriptors.size(), timeout_ms) < 0 && errno != EINTR) {
      DropAll();
      return DrainEnd::kDeadline;
    }
    if (stop >= 0 && descriptors.back().revents != 0) {
      Flush();  // what the other targets take now is not lost
      DropAll();
      return DrainEnd::kStopReadable;
    }
  }
}

void OutputRelay::DropQueuedFor(int target) {
  for (Queue& queue : queues_) {
    for (auto chunk = queue.chunks.begin(); chunk != queue.chunks.end();) {
      if (chunk->target != target) {
        ++chunk;
        continue;
      }
      const std::size_t left = chunk->bytes.size() - chunk->written;
      queued_bytes_ -= left;
      dropped_bytes_ += left;
      chunk = queue.chunks.erase(chunk);
    }
  }
}

void OutputRelay::DropAll() {
  dropped_bytes_ += queued_bytes_;
  queued_bytes_ = 0;
  for (Queue& queue : queues_) queue.chunks.clear();
}

}  // namespace sray::launcher
