#include "transport/ucx_status.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

#include "common/log.h"

namespace sray::transport {
namespace {

thread_local UcxLogCapture* current_capture = nullptr;

// Set by a hidden attach line: the "failed to connect to remote FIFO" line
// that UCX prints next for the same attach is hidden too.
thread_local bool hid_attach_to_ending_peer = false;

// UCX's lines when it attaches to a peer's shared-memory queue and the peer
// is exiting or gone. Over posix shared memory UCX opens /proc/PID/fd/N:
// "Permission denied" once the peer's fd table is no longer readable, "No
// such file or directory" once it ended. Over System V shared memory it
// calls shmat on the peer's segment, which UCX marks for removal at once,
// so the segment's id is invalid from the peer's end ("Invalid argument",
// or "Identifier removed"). UCX makes such connects itself inside progress,
// answering a peer's wire-up, so no call of sray's has a Status for them;
// the endpoint then fails, and sray reports a dead peer its own way. Seen
// when a driver returned with tasks in flight. Any other reason (too many
// open files, no memory, a permission) is printed.
bool IsAttachToEndingPeer(std::string_view text) {
  const bool posix_peer_gone =
      text.starts_with("open(file_name=/proc/") &&
      (text.ends_with("Permission denied") || text.ends_with("No such file or directory"));
  // Not UCX's "shmat(shmid=N) returned unexpected error" of its own segment.
  const bool sysv_peer_gone =
      text.starts_with("shmat(shmid=") && text.find(") failed: ") != std::string_view::npos &&
      (text.ends_with("Invalid argument") || text.ends_with("Identifier removed"));
  if (posix_peer_gone || sysv_peer_gone) {
    hid_attach_to_ending_peer = true;
    return true;
  }
  const bool follows = hid_attach_to_ending_peer;
  hid_attach_to_ending_peer = false;
  return follows && text.starts_with("mm ep failed to connect to remote FIFO");
}

// Errors only: warnings of a call that then succeeds would have no Status
// to go into, and fatal lines precede UCX's own abort. UCX hands its
// printf-style format and arguments through (the format attribute).
__attribute__((format(printf, 6, 0))) ucs_log_func_rc_t KeepInCapture(
    const char* /*file*/, unsigned /*line*/, const char* /*function*/, ucs_log_level_t level,
    const ucs_log_component_config_t* /*component*/, const char* format, va_list arguments) {
  if (level != UCS_LOG_LEVEL_ERROR) return UCS_LOG_FUNC_RC_CONTINUE;
  // UCX's own printing may still follow, and its formats use %m.
  const int saved_errno = errno;
  char text[512];
  va_list copy;
  va_copy(copy, arguments);
  const int written = std::vsnprintf(text, sizeof text, format, copy);
  va_end(copy);
  ucs_log_func_rc_t outcome = UCS_LOG_FUNC_RC_STOP;
  if (written <= 0) {
    outcome = UCS_LOG_FUNC_RC_CONTINUE;
  } else {
    try {
      if (current_capture != nullptr) {
        current_capture->Keep(text);
      } else if (IsAttachToEndingPeer(text)) {
        // Noise of a peer's end, not a fault of this process.
        if (LogEnabled(LogLevel::kDebug)) {
          Log(LogLevel::kDebug, std::string("UCX, attaching to a peer that is ending: ") + text);
        }
      } else {
        outcome = UCS_LOG_FUNC_RC_CONTINUE;
      }
    } catch (...) {
      // No exception may cross UCX's C frames: printed as UCX would.
      outcome = UCS_LOG_FUNC_RC_CONTINUE;
    }
  }
  errno = saved_errno;
  return outcome;
}

}  // namespace

Status FromUcs(ucs_status_t status, std::string_view what) {
  if (status == UCS_OK || status == UCS_INPROGRESS) return Status::Ok();
  std::string message = std::string(what) + ": " + ucs_status_string(status);
  switch (status) {
    case UCS_ERR_INVALID_PARAM: return Status::InvalidArgument(std::move(message));
    case UCS_ERR_NO_ELEM:
    case UCS_ERR_NO_DEVICE: return Status::NotFound(std::move(message));
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_CANCELED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED: return Status::Unavailable(std::move(message));
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE: return Status::IoError(std::move(message));
    default: return Status::Internal(std::move(message));
  }
}

Status FromUcs(ucs_status_t status, std::string_view what, const UcxLogCapture& capture) {
  if (capture.messages().empty()) return FromUcs(status, what);
  return FromUcs(status, std::string(what) + " (UCX: " + capture.messages() + ")");
}

UcxLogCapture::UcxLogCapture() : outer_(current_capture) {
  InstallUcxLogCapture();
  current_capture = this;
}

UcxLogCapture::~UcxLogCapture() {
  current_capture = outer_;
}

void UcxLogCapture::Keep(std::string_view message) {
  // Bounded: a storm of lines must not grow a Status without end.
  if (messages_.size() > 2048) return;
  if (!messages_.empty()) messages_ += "; ";
  messages_ += message;
}

void InstallUcxLogCapture() {
  static std::once_flag installed;
  std::call_once(installed, [] { ucs_log_push_handler(&KeepInCapture); });
}

}  // namespace sray::transport
