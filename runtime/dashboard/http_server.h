#pragma once
// The dashboard's HTTP/1.1 server, built to stay answerable for the token's
// holder while anyone who can reach the port misbehaves (at the default
// 127.0.0.1, every user of the head node):
// - one thread does all socket I/O with poll() and never waits on a client;
// - a request must arrive whole within `limits` (head size, header count,
//   body) and within `request_deadline` of its first byte, a new connection
//   must start one within `request_deadline`, and a response must be taken
//   within `write_deadline`, or the connection ends;
// - at `max_connections`, a new connection closes the one that has waited
//   longest (for a request, or for its client to take a response), so slow,
//   idle or non-reading clients cannot shut out a new one, however many
//   they open;
// - `admit` runs on the I/O thread (the token check): what it answers is
//   answered there, and only what it lets through waits for one of the few
//   `handler_threads` that run `serve`, so clients without the token never
//   hold a handler thread.
// The cpp-httplib server it replaced read headers without limit and gave
// each connection a thread for as long as the client kept sending.
//
// Thread-safety: Stop and port may be called from any thread; `admit` is
// called on the I/O thread, `serve` on the handler threads, concurrently.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "dashboard/http_request.h"

namespace sray::dashboard {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  void SetHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

// The bytes of a response: status line, headers (with Content-Type,
// Content-Length and Connection), blank line, body (not for a HEAD request).
std::string SerializedResponse(const HttpResponse& response, bool keep_alive, bool head = false);

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  std::size_t handler_threads = 4;
  std::size_t max_connections = 64;
  // Admitted requests waiting for a handler thread; more are answered 503.
  std::size_t max_waiting_requests = 32;
  // From a connection's start to its first byte, and from a request's first
  // byte to its end.
  std::chrono::milliseconds request_deadline = std::chrono::seconds(10);
  // How long a connection may stay open between requests.
  std::chrono::milliseconds keep_alive = std::chrono::seconds(5);
  // For writing one response, however slowly the client takes it.
  std::chrono::milliseconds write_deadline = std::chrono::seconds(30);
  HttpRequestLimits limits;
  // Added to every response, the server's own refusals included.
  std::vector<std::pair<std::string, std::string>> common_headers;
  // On the I/O thread, for every request: an answer, or nullopt to pass it
  // to `serve`. Must not block.
  std::function<std::optional<HttpResponse>(const HttpRequest&)> admit;
  // On a handler thread; may block (it asks the nodes).
  std::function<HttpResponse(const HttpRequest&)> serve;
};

class HttpServer {
 public:
  // Listening and serving when it returns; an error names the address and why.
  static Result<std::unique_ptr<HttpServer>> Listen(HttpServerOptions options);

  // Stops and waits for the threads, however long a handler takes.
  virtual ~HttpServer() = default;
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] virtual int port() const = 0;
  // Stops accepting and serving; true once every thread has ended, false if
  // they had not within `patience` (a handler still asking a hung node).
  virtual bool Stop(std::chrono::milliseconds patience) = 0;

 protected:
  HttpServer() = default;
};

}  // namespace sray::dashboard
