#pragma once

// The one place where UCX status codes become sray Status values, and where
// UCX's own error lines become part of them.

#include <ucs/type/status.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace sray::transport {

Status FromUcs(ucs_status_t status, std::string_view what);

// UCX prints its errors itself, besides returning a status: a
// connect to a process that just ended prints "shmat ... failed" lines that
// the caller, who knows the peer is gone, would report differently or not at
// all. While a UcxLogCapture lives on a thread, UCX's error lines raised on
// that thread are kept in it instead of printed, and FromUcs with the
// capture adds them to the Status (warnings and debug lines print as
// before). Scopes nest (the innermost one keeps); other threads print as
// before. Not thread-safe: one per thread, on the stack.
class UcxLogCapture {
 public:
  UcxLogCapture();
  ~UcxLogCapture();
  UcxLogCapture(const UcxLogCapture&) = delete;
  UcxLogCapture& operator=(const UcxLogCapture&) = delete;

  // What UCX said, joined by "; "; empty when it said nothing.
  const std::string& messages() const { return messages_; }
  void Keep(std::string_view message);

 private:
  UcxLogCapture* outer_;
  std::string messages_;
};

// As FromUcs, with what UCX said while `capture` lived.
Status FromUcs(ucs_status_t status, std::string_view what, const UcxLogCapture& capture);

// Installs the handler behind UcxLogCapture into UCX's logging, once per
// process. UcxContext::Create calls it before ucp_init, so before UCX starts
// threads of its own (its handler list is not safe to change while another
// thread logs); a capture calls it too, for a process without a context.
void InstallUcxLogCapture();

}  // namespace sray::transport
