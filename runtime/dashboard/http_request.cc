#include "dashboard/http_request.h"

#include <algorithm>
#include <cctype>

#include "common/hex.h"
#include "common/whole_number.h"

namespace sray::dashboard {
namespace {

char Lower(char character) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
}

bool SameIgnoringCase(std::string_view left, std::string_view right) {
  return left.size() == right.size() &&
         std::equal(left.begin(), left.end(), right.begin(),
                    [](char a, char b) { return Lower(a) == Lower(b); });
}

// RFC 9110's token characters: what a method and a header name are made of.
bool IsToken(std::string_view text) {
  static constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char character) {
    return std::isalnum(static_cast<unsigned char>(character)) != 0 ||
           kSymbols.find(character) != std::string_view::npos;
  });
}

std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Whether the comma-separated header value lists `option` (any case).
bool Lists(std::string_view value, std::string_view option) {
  while (!value.empty()) {
    const std::size_t comma = std::min(value.find(','), value.size());
    if (SameIgnoringCase(Trimmed(value.substr(0, comma)), option)) return true;
    value.remove_prefix(std::min(comma + 1, value.size()));
  }
  return false;
}

HttpParse Refused(int status, std::string reason) {
  HttpParse parse;
  parse.outcome = HttpParse::Outcome::kRefused;
  parse.status = status;
  parse.reason = std::move(reason);
  return parse;
}

}  // namespace

std::optional<std::string> PercentDecoded(std::string_view text, bool plus_is_space) {
  std::string decoded;
  decoded.reserve(text.size());
  for (std::size_t index = 0; index < text.size(); ++index) {
    const char character = text[index];
    if (character == '%') {
      if (index + 2 >= text.size()) return std::nullopt;
      const int high = HexDigitValue(text[index + 1]);
      const int low = HexDigitValue(text[index + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      decoded.push_back(static_cast<char>(high * 16 + low));
      index += 2;
    } else if (character == '+' && plus_is_space) {
      decoded.push_back(' ');
    } else {
      decoded.push_back(character);
    }
  }
  return decoded;
}

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [header_name, value] : headers) {
    if (SameIgnoringCase(header_name, name)) return value;
  }
  return {};
}

std::string HttpRequest::Query(const std::string& name) const {
  const auto found = query.find(name);
  return found == query.end() ? std::string() : found->second;
}

HttpParse ParseHttpRequest(std::string_view received, const HttpRequestLimits& limits) {
  // Blank lines before a request are allowed (RFC 9112, 2.2).
  std::size_t start = 0;
  while (start < received.size() && (received[start] == '\r' || received[start] == '\n')) {
    ++start;
  }
  // The head ends at an empty line; lines may end in CRLF or a bare LF.
  std::size_t head_end = std::string_view::npos;
  std::size_t body_start = 0;
  for (std::size_t newline = received.find('\n', start); newline != std::string_view::npos;
       newline = received.find('\n', newline + 1)) {
    if (newline + 1 < received.size() && received[newline + 1] == '\n') {
      head_end = newline + 1;
      body_start = newline + 2;
      break;
    }
    if (newline + 2 < received.size() && received[newline + 1] == '\r' &&
        received[newline + 2] == '\n') {
      head_end = newline + 1;
      body_start = newline + 3;
      break;
    }
    if (newline > limits.max_head_bytes) break;
  }
  // Blank lines before the request count: a client sending nothing else
  // must not be read for ever.
  const std::size_t head_bytes = head_end == std::string_view::npos ? received.size() : head_end;
  if (head_bytes > limits.max_head_bytes) {
    return Refused(431, "the request's head is larger than " +
                            std::to_string(limits.max_head_bytes) + " bytes");
  }
  if (head_end == std::string_view::npos) return {};

  HttpParse parse;
  HttpRequest& request = parse.request;
  std::string_view head = received.substr(start, head_end - start);
  auto next_line = [&head]() {
    const std::size_t newline = head.find('\n');
    std::string_view line = head.substr(0, newline);
    head.remove_prefix(std::min(newline + 1, head.size()));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };

  // The request line: METHOD SP TARGET SP HTTP/1.x
  const std::string_view request_line = next_line();
  const std::size_t first_space = request_line.find(' ');
  const std::size_t last_space = request_line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) {
    return Refused(400, "the request line is not 'METHOD /PATH HTTP/1.1'");
  }
  const std::string_view method = request_line.substr(0, first_space);
  const std::string_view target =
      request_line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view version = request_line.substr(last_space + 1);
  if (!IsToken(method)) return Refused(400, "the request's method is not a word");
  if (target.empty() || target.front() != '/' ||
      target.find_first_of(" \t\r") != std::string_view::npos) {
    return Refused(400, "the request's target is not a path starting with '/'");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return version.rfind("HTTP/", 0) == 0
               ? Refused(505, "this server speaks HTTP/1.1 and HTTP/1.0 only")
               : Refused(400, "the request line does not end in an HTTP version");
  }
  request.method = std::string(method);
  const std::size_t question = target.find('?');
  auto path = PercentDecoded(target.substr(0, question), false);
  if (!path) return Refused(400, "the request's path has a malformed %-escape");
  request.path = std::move(*path);
  if (question != std::string_view::npos) {
    std::string_view query = target.substr(question + 1);
    while (!query.empty()) {
      const std::size_t ampersand = std::min(query.find('&'), query.size());
      const std::string_view pair = query.substr(0, ampersand);
      query.remove_prefix(std::min(ampersand + 1, query.size()));
      if (pair.empty()) continue;
      const std::size_t equals = pair.find('=');
      auto name = PercentDecoded(pair.substr(0, equals), true);
      auto value = PercentDecoded(
          equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1), true);
      if (!name || !value) return Refused(400, "the request's query has a malformed %-escape");
      request.query.emplace(std::move(*name), std::move(*value));
    }
  }

  while (!head.empty()) {
    const std::string_view line = next_line();
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      return Refused(400, "a header is folded over lines, which HTTP/1.1 no longer allows");
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Refused(400, "a header line is not 'Name: value'");
    }
    if (request.headers.size() == limits.max_headers) {
      return Refused(
          431, "the request has more than " + std::to_string(limits.max_headers) + " headers");
    }
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), Lower);
    request.headers.emplace_back(std::move(name), std::string(Trimmed(line.substr(colon + 1))));
  }

  if (!request.Header("transfer-encoding").empty()) {
    return Refused(501, "this server takes no chunked or encoded request bodies");
  }
  std::size_t body_bytes = 0;
  bool length_seen = false;
  for (const auto& [name, value] : request.headers) {
    if (name != "content-length") continue;
    const auto length = WholeNumber<std::size_t>(value);
    if (!length || (length_seen && *length != body_bytes)) {
      return Refused(400, "the request's Content-Length is not one whole number");
    }
    length_seen = true;
    body_bytes = *length;
  }
  if (body_bytes > limits.max_body_bytes) {
    return Refused(413, "the request's body is larger than " +
                            std::to_string(limits.max_body_bytes) + " bytes");
  }
  if (received.size() - body_start < body_bytes) {
    HttpParse waiting;
    waiting.head_complete = true;
    return waiting;
  }
  request.body = std::string(received.substr(body_start, body_bytes));

  const std::string connection = request.Header("connection");
  request.keep_alive =
      version == "HTTP/1.1" ? !Lists(connection, "close") : Lists(connection, "keep-alive");
  parse.outcome = HttpParse::Outcome::kRequest;
  parse.consumed = body_start + body_bytes;
  return parse;
}

}  // namespace sray::dashboard
