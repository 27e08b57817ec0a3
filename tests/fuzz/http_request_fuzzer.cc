// libFuzzer target for the dashboard's request parser (dashboard/http_request):
// its bytes come from anyone who can connect to the dashboard's port, before
// any token is checked. Any bytes must parse, wait for more, or be refused
// with an HTTP status and a reason, never crash; a request must take no more
// than it was given, and the same request must come from exactly the bytes it
// took (what follows it, a pipelined request, must not change it).
//   cmake --preset fuzz && cmake --build --preset fuzz --target sray_http_request_fuzzer
//   build-fuzz/tests/sray_http_request_fuzzer tests/fuzz/corpus/http_request

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dashboard/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using sray::dashboard::HttpParse;
  sray::dashboard::HttpRequestLimits limits;
  limits.max_head_bytes = 2048;
  limits.max_headers = 8;
  limits.max_body_bytes = 64;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const HttpParse parse = sray::dashboard::ParseHttpRequest(bytes, limits);
  switch (parse.outcome) {
    case HttpParse::Outcome::kNeedMore:
      if (size > limits.max_head_bytes + limits.max_body_bytes + 4) std::abort();
      break;
    case HttpParse::Outcome::kRefused:
      if (parse.reason.empty()) std::abort();
      if (parse.status != 400 && parse.status != 413 && parse.status != 431 &&
          parse.status != 501 && parse.status != 505) {
        std::abort();
      }
      break;
    case HttpParse::Outcome::kRequest: {
      if (parse.consumed == 0 || parse.consumed > size) std::abort();
      if (parse.request.path.empty() || parse.request.path.front() != '/') std::abort();
      if (parse.request.headers.size() > limits.max_headers) std::abort();
      if (parse.request.body.size() > limits.max_body_bytes) std::abort();
      const HttpParse alone =
          sray::dashboard::ParseHttpRequest(bytes.substr(0, parse.consumed), limits);
      if (alone.outcome != HttpParse::Outcome::kRequest || alone.consumed != parse.consumed ||
          alone.request.path != parse.request.path ||
          alone.request.headers != parse.request.headers ||
          alone.request.body != parse.request.body) {
        std::abort();
      }
      break;
    }
  }
  return 0;
}
