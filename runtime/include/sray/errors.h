#pragma once

// Typed exceptions of sray's public C++ API. Internals use Status values; the
// API boundary converts a failed Status into one of these, keeping the original
// message (which already says what failed, why, and what to do).

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sray {

// Base of every exception sray throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The process was not started by `srun --ray-cluster` or `sray run`, or its
// launch environment is damaged.
class LaunchError : public Error {
 public:
  using Error::Error;
};

// Bad options or configuration.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Bytes that do not decode as the expected type.
class SerializationError : public Error {
 public:
  using Error::Error;
};

// Where a remote failure happened.
struct RemoteOrigin {
  std::string function;  // the task's registered name
  std::uint32_t node_id = 0;
  std::int64_t pid = 0;
};

// The task threw: the remote exception's type and message, and where.
class TaskError : public Error {
 public:
  TaskError(const std::string& what, std::string remote_type, std::string remote_message,
            RemoteOrigin origin)
      : Error(what),
        remote_type_(std::move(remote_type)),
        remote_message_(std::move(remote_message)),
        origin_(std::move(origin)) {}
  [[nodiscard]] const std::string& remote_type() const { return remote_type_; }
  [[nodiscard]] const std::string& remote_message() const { return remote_message_; }
  [[nodiscard]] const RemoteOrigin& origin() const { return origin_; }

 private:
  std::string remote_type_;
  std::string remote_message_;
  RemoteOrigin origin_;
};

// The worker running the task died, and no retry was left.
class WorkerDiedError : public Error {
 public:
  WorkerDiedError(const std::string& what, RemoteOrigin origin)
      : Error(what), origin_(std::move(origin)) {}
  [[nodiscard]] const RemoteOrigin& origin() const { return origin_; }

 private:
  RemoteOrigin origin_;
};

// The actor's process died: for good (no restart left, or killed), or while
// running this call when the call had no retry left.
class ActorDiedError : public Error {
 public:
  ActorDiedError(const std::string& what, std::string actor, RemoteOrigin origin)
      : Error(what), actor_(std::move(actor)), origin_(std::move(origin)) {}
  // Its name, or "anonymous actor <id>".
  [[nodiscard]] const std::string& actor() const { return actor_; }
  [[nodiscard]] const RemoteOrigin& origin() const { return origin_; }

 private:
  std::string actor_;
  RemoteOrigin origin_;
};

// An object's value is gone (its node or process failed) and cannot be
// recomputed.
class ObjectLostError : public Error {
 public:
  using Error::Error;
};

// Get or Wait ran past its timeout; the objects are still being computed.
class GetTimeoutError : public Error {
 public:
  using Error::Error;
};

// No node of the job could ever satisfy the task's resource request.
class InfeasibleResourcesError : public Error {
 public:
  using Error::Error;
};

// The object store could not hold the object, even after spilling.
class ObjectStoreFullError : public Error {
 public:
  using Error::Error;
};

// An ObjectRef that refers to nothing (default-constructed, or moved from)
// was given to Get, Wait or a task.
class EmptyObjectRefError : public Error {
 public:
  using Error::Error;
};

}  // namespace sray
