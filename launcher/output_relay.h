#pragma once

// What `sray run` writes to its own standard output and error (its ranks'
// lines and its own messages), in the order written, without ever blocking
// the launcher: a reader that stops reading (`sray run ... | less` left at
// its first page, a terminal stopped by Ctrl-S) used to hold the launcher in
// write(2), where it handled neither Ctrl-C nor its ranks' ends.
//
// Each target is written through a non-blocking description of its own where
// the target can block (a pipe or a terminal, reopened through /proc so that
// the shell's description keeps its flags); a socket with MSG_DONTWAIT; a
// regular file as it is. What a target cannot take yet waits here; past
// kFullBytes the caller stops reading its ranks (Full), so a slow reader
// slows the ranks as a blocking write did, and nothing is dropped unless
// the target fails (its reader is gone) or the caller gives up (Drain).
//
// The caller blocks SIGPIPE: a pipe with no reader must fail the write.
//
// Thread-safety: none; one thread (the launcher's event loop) uses it.

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace sray::launcher {

class OutputRelay {
 public:
  static constexpr std::size_t kFullBytes = std::size_t{1} << 20;

  OutputRelay() = default;
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;
  ~OutputRelay();

  // Queues `text` for `target` (a descriptor of this process, e.g.
  // STDOUT_FILENO) after everything queued before, and writes what can go now.
  void Write(int target, std::string_view text);

  // Writes what the targets take now without waiting.
  void Flush();

  [[nodiscard]] bool Empty() const { return queued_bytes_ == 0; }
  [[nodiscard]] bool Full() const { return queued_bytes_ >= kFullBytes; }

  // The descriptor to poll for POLLOUT before the next Flush can write
  // anything; -1 when nothing waits.
  [[nodiscard]] int WaitingDescriptor() const;

  enum class DrainEnd { kWritten, kDeadline, kStopReadable };
  // Writes until nothing waits, `deadline` passes, or `stop` (a descriptor
  // polled for POLLIN, e.g. a signalfd; -1 for none) becomes readable.
  // What is left is dropped unless the end is kWritten.
  DrainEnd Drain(std::optional<std::chrono::steady_clock::time_point> deadline, int stop);

  [[nodiscard]] std::size_t DroppedBytes() const { return dropped_bytes_; }

 private:
  enum class Mode {
    kOwnDescription,  // a non-blocking description of the target's pipe or terminal
    kSocket,          // send(MSG_DONTWAIT)
    kAsIs,            // a regular file, /dev/null: writes do not wait
    kPollFirst,       // no description of its own: poll, then at most PIPE_BUF bytes
    kFailed,          // closed, or its reader is gone: what it is sent is dropped
  };
  struct Target {
    Mode mode = Mode::kFailed;
    int descriptor = -1;  // what is written to; owned when kOwnDescription
  };
  struct Chunk {
    int target = -1;
    std::string bytes;
    std::size_t written = 0;
  };

  Target& TargetFor(int target);
  // Writes part of the first chunk: > 0 bytes written, 0 when the target
  // cannot take any now, -1 when it failed (its chunks are then dropped).
  long WriteSome(Chunk& chunk);
  void DropQueuedFor(int target);
  void DropAll();

  std::map<int, Target> targets_;
  std::deque<Chunk> queue_;
  std::size_t queued_bytes_ = 0;
  std::size_t dropped_bytes_ = 0;
};

}  // namespace sray::launcher
