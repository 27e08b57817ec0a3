#pragma once

// What `sray run` writes to its own standard output and error (its ranks'
// lines and its own messages) without ever blocking the launcher: a reader
// that stops reading (`sray run ... | less` left at its first page, a
// terminal stopped by Ctrl-S) used to hold the launcher in write(2), where it
// handled neither Ctrl-C nor its ranks' ends.
//
// Each target is written through a non-blocking description of its own where
// the target can block (a pipe or a terminal, reopened through /proc so that
// the shell's description keeps its flags); a socket with MSG_DONTWAIT; a
// regular file as it is. What a target cannot take yet waits here, in one
// queue per file: writes to targets that are the same file (`2>&1`) keep
// their order, and a stalled standard output does not hold back standard
// error on a terminal. Past kFullBytes in all the caller stops reading its
// ranks (Full), so a slow reader slows the ranks as a blocking write did;
// nothing is dropped unless a target fails (its reader is gone) or the caller
// gives up (Drain).
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
#include <vector>

#include <sys/types.h>

namespace sray::launcher {

class OutputRelay {
 public:
  static constexpr std::size_t kFullBytes = std::size_t{1} << 20;
  // Beyond this, what is written is dropped (DroppedBytes): the caller
  // reads its ranks past kFullBytes only once they ended, and something
  // that outlived them (in another session, unkillable) could write on.
  static constexpr std::size_t kMostHeldBytes = 4 * kFullBytes;

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

  // The descriptors to poll for POLLOUT before the next Flush can write
  // more: one per file with output waiting; none when nothing waits.
  [[nodiscard]] std::vector<int> WaitingDescriptors() const;

  enum class DrainEnd { kWritten, kDeadline, kStopReadable };
  // Writes until nothing waits, `deadline` passes, or `stop` (a descriptor
  // polled for POLLIN, e.g. a signalfd; -1 for none) becomes readable.
  // What is left is dropped unless the end is kWritten (DroppedBytes).
  DrainEnd Drain(std::optional<std::chrono::steady_clock::time_point> deadline, int stop);

  [[nodiscard]] std::size_t DroppedBytes() const { return dropped_bytes_; }
  // A target's reader went away (EPIPE: `sray run ... | head`): what a
  // program in a pipeline takes as SIGPIPE.
  [[nodiscard]] bool ReaderGone() const { return reader_gone_; }

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
    std::size_t queue = 0;  // index in queues_: one per file
  };
  struct Chunk {
    int target = -1;
    std::string bytes;
    std::size_t written = 0;
  };
  // The file a queue writes to, as fstat names it.
  struct FileIdentity {
    dev_t device = 0;
    ino_t inode = 0;
    bool operator==(const FileIdentity&) const = default;
  };
  struct Queue {
    FileIdentity file;
    std::deque<Chunk> chunks;
  };

  Target& TargetFor(int target);
  // Writes part of `chunk`: > 0 bytes written, 0 when the target cannot
  // take any now, -1 when it failed (its chunks are then dropped).
  long WriteSome(Chunk& chunk);
  void FlushQueue(Queue& queue);
  void DropQueuedFor(int target);
  void DropAll();

  std::map<int, Target> targets_;
  std::vector<Queue> queues_;
  std::size_t queued_bytes_ = 0;
  std::size_t dropped_bytes_ = 0;
  bool reader_gone_ = false;
};

}  // namespace sray::launcher
