#pragma once
// An HTTP/1.1 request as the dashboard reads it, and the parser of its head.
// The bytes come from anyone who can connect to the dashboard's port (every
// user of the head node at the default address), before any token is
// checked: the parser bounds everything it keeps (the head's size, the
// number of headers, the body) and answers what it refuses with the status
// a client expects.
//
// Pure functions and values: thread-compatible.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sray::dashboard {

struct HttpRequest {
  std::string method;                                        // as sent: GET, POST, ...
  std::string path;                                          // percent-decoded, without the query
  std::map<std::string, std::string> query;                  // decoded; the first of a name
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  bool keep_alive = true;

  // The first header of this name (any case), or empty.
  [[nodiscard]] std::string Header(std::string_view name) const;
  // The query parameter, or empty.
  [[nodiscard]] std::string Query(const std::string& name) const;
};

struct HttpRequestLimits {
  std::size_t max_head_bytes = 16 * 1024;  // request line and headers
  std::size_t max_headers = 64;
  std::size_t max_body_bytes = 4096;  // the dashboard takes no real bodies
};

// What the bytes received so far on a connection amount to.
struct HttpParse {
  enum class Outcome {
    kNeedMore,  // no complete request yet, and nothing wrong so far
    kRequest,   // `request` is complete; it took `consumed` bytes
    kRefused,   // the bytes are not a request this server takes: answer
                // `status` with `reason` and close the connection
  };
  Outcome outcome = Outcome::kNeedMore;
  // kNeedMore: the head is complete and its body still coming (a caller
  // that parses again only when a line ends must parse again for any byte).
  bool head_complete = false;
  HttpRequest request;
  std::size_t consumed = 0;
  int status = 0;
  std::string reason;
};

HttpParse ParseHttpRequest(std::string_view received, const HttpRequestLimits& limits = {});

// Decodes %XX (and '+' as a space where `plus_is_space`); nullopt for a
// malformed escape.
std::optional<std::string> PercentDecoded(std::string_view text, bool plus_is_space);

}  // namespace sray::dashboard
