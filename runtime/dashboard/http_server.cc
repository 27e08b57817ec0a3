#include "dashboard/http_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/file_descriptor.h"
#include "common/thread_name.h"

namespace sray::dashboard {
namespace {

using Clock = std::chrono::steady_clock;

// How often the I/O thread looks up from quiet sockets at the latest. Its
// eventfd wakes it for a stop or a handler's answer; the timeout also bounds
// the wait where a sandbox (gVisor) drops such a wake-up.
constexpr auto kLongestPoll = std::chrono::milliseconds(100);
constexpr std::size_t kReadPiece = 16 * 1024;
constexpr int kAcceptsPerRound = 8;
constexpr auto kLongestDrain = std::chrono::seconds(2);

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 303: return "See Other";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

HttpResponse TextResponse(int status, std::string text) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(text);
  return response;
}

struct Connection {
  // kDraining: the last response is out and the sending side shut; what
  // the client still sends is read and dropped until it closes, so the
  // close does not reset the connection before the client read the answer.
  enum class State { kReading, kServing, kWriting, kDraining };

  Connection(std::uint64_t connection_id, int fd) : id(connection_id), socket(fd) {}

  const std::uint64_t id;
  FileDescriptor socket;
  State state = State::kReading;
  std::string received;
  std::size_t parsed = 0;  // bytes of `received` taken by requests already answered
  // Whether a request has begun since the connection started or its last
  // answer: until then it is idle, and may be closed at `deadline` quietly.
  bool request_started = false;
  // A head has arrived and its body is still coming: parse again for any byte.
  bool head_complete = false;
  // The client sent its last byte (a half-close): what it sent is answered,
  // then the connection ends.
  bool peer_closed = false;
  // For eviction: when it began to wait for a request, or last took bytes of
  // a response; the one waiting longest goes first.
  Clock::time_point waiting_since;
  Clock::time_point deadline;
  std::string to_send;
  std::size_t sent = 0;
  bool close_after_sending = false;
};

class PollingHttpServer final : public HttpServer {
 public:
  PollingHttpServer(HttpServerOptions options, FileDescriptor listening, FileDescriptor wake,
                    int port)
      : options_(std::move(options)),
        listening_(std::move(listening)),
        wake_(std::move(wake)),
        port_(port) {}

  ~PollingHttpServer() override {
    while (!Stop(std::chrono::seconds(1))) {
    }
  }

  Status Start() {
    try {
      for (std::size_t index = 0; index < options_.handler_threads; ++index) {
        handlers_.emplace_back([this] { RunHandler(); });
      }
      io_thread_ = std::thread([this] { RunIo(); });
    } catch (const std::system_error& error) {
      // No I/O thread to end the handlers: end them here.
      stopping_.store(true);
      {
        std::lock_guard lock(queue_mutex_);
        queue_changed_.notify_all();
      }
      for (std::thread& handler : handlers_) handler.join();
      ended_.store(true);
      return Status::Unavailable(std::string("the dashboard cannot start its threads: ") +
                                 error.what());
    }
    return Status::Ok();
  }

  [[nodiscard]] int port() const override { return port_; }

  bool Stop(std::chrono::milliseconds patience) override {
    stopping_.store(true);
    Wake();
    {
      std::lock_guard lock(queue_mutex_);
      queue_changed_.notify_all();
    }
    const auto deadline = Clock::now() + patience;
    while (!ended_.load()) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard lock(stop_mutex_);
    if (io_thread_.joinable()) io_thread_.join();
    return true;
  }

 private:
  struct Job {
    std::uint64_t connection;
    HttpRequest request;
  };
  struct Answer {
    std::uint64_t connection;
    HttpResponse response;
    bool keep_alive;
    bool head;
  };

  void Wake() {
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
  }

  // --- handler threads ---

  void RunHandler() {
    NameThisThread("sray-dash-work");
    while (true) {
      Job job;
      {
        std::unique_lock lock(queue_mutex_);
        queue_changed_.wait(lock, [this] { return stopping_.load() || !jobs_.empty(); });
        if (stopping_.load()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      HttpResponse response = Guarded([&] { return options_.serve(job.request); });
      {
        std::lock_guard lock(queue_mutex_);
        answers_.push_back(Answer{job.connection, std::move(response), job.request.keep_alive,
                                  job.request.method == "HEAD"});
      }
      Wake();
    }
  }

  // A callback's answer; anything it throws becomes a 500, never an end of
  // the user's driver.
  template <typename Callback>
  static auto Guarded(Callback&& callback) -> decltype(callback()) {
    const auto failed = [](const std::string& why) {
      return TextResponse(500, "sray: the dashboard failed to answer: " + why + "\n");
    };
    try {
      return callback();
    } catch (const std::exception& error) {
      return failed(error.what());
    } catch (...) {
      return failed("an unknown exception");
    }
  }

  // --- the I/O thread ---

  void RunIo() {
    NameThisThread("sray-dashboard");
    while (!stopping_.load()) {
      PollOnce();
      TakeAnswers();
      EndOverdue();
    }
    connections_.clear();
    for (std::thread& handler : handlers_) handler.join();
    ended_.store(true);
  }

  void PollOnce() {
    std::vector<pollfd> polled;
    std::vector<std::uint64_t> ids;
    const auto now = Clock::now();
    // Out of descriptors, the listening socket stays readable: it is left
    // out for a while instead of waking the loop at once, over and over.
    const bool accepting = now >= accepts_paused_until_;
    polled.push_back({accepting ? listening_.get() : -1, POLLIN, 0});
    polled.push_back({wake_.get(), POLLIN, 0});
    auto next_deadline = now + kLongestPoll;
    for (const auto& [id, connection] : connections_) {
      short events = 0;
      if (connection->state == Connection::State::kReading ||
          connection->state == Connection::State::kDraining) {
        events = POLLIN;
      }
      if (connection->state == Connection::State::kWriting) events = POLLOUT;
      if (events == 0) continue;
      polled.push_back({connection->socket.get(), events, 0});
      ids.push_back(id);
      next_deadline = std::min(next_deadline, connection->deadline);
    }
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - Clock::now());
    const int ready = ::poll(polled.data(), polled.size(),
                             static_cast<int>(std::max<std::int64_t>(0, wait.count() + 1)));
    if (ready <= 0) return;
    if ((polled[1].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      (void)!::read(wake_.get(), &count, sizeof(count));
    }
    for (std::size_t index = 2; index < polled.size(); ++index) {
      if (polled[index].revents == 0) continue;
      const auto found = connections_.find(ids[index - 2]);
      if (found == connections_.end()) continue;
      Connection& connection = *found->second;
      // Once a response is out, a request pipelined behind it is answered.
      bool keep = true;
      switch (connection.state) {
        case Connection::State::kReading: keep = ReadFrom(connection); break;
        case Connection::State::kWriting: keep = WriteTo(connection) && Advance(connection); break;
        case Connection::State::kDraining: keep = Drain(connection); break;
        case Connection::State::kServing: break;
      }
      if (!keep) connections_.erase(found);
    }
    if (accepting && (polled[0].revents & POLLIN) != 0) AcceptAll();
  }

  // A few at a time, each read at once: a flood of connections then cannot
  // push out one accepted just before it before its request was read.
  void AcceptAll() {
    for (int accepted = 0; accepted < kAcceptsPerRound; ++accepted) {
      const int fd = ::accept4(listening_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accepts_paused_until_ = Clock::now() + kLongestPoll;
        }
        return;  // EAGAIN: none left; a client that gave up (ECONNABORTED): the next poll
      }
      if (connections_.size() >= options_.max_connections && !EvictLongestWaiting()) {
        ::close(fd);  // every connection is being served: the client may retry
        continue;
      }
      const std::uint64_t id = next_id_++;
      auto connection = std::make_unique<Connection>(id, fd);
      connection->waiting_since = Clock::now();
      connection->deadline = connection->waiting_since + options_.request_deadline;
      if (ReadFrom(*connection)) connections_.emplace(id, std::move(connection));
    }
  }

  // Closes the connection that has waited longest, for its request or for
  // its client to take a response (one that sends slowly, or never reads
  // what it asked for): false if every connection waits for a handler.
  bool EvictLongestWaiting() {
    auto oldest = connections_.end();
    for (auto entry = connections_.begin(); entry != connections_.end(); ++entry) {
      if (entry->second->state == Connection::State::kServing) continue;
      if (oldest == connections_.end() ||
          entry->second->waiting_since < oldest->second->waiting_since) {
        oldest = entry;
      }
    }
    if (oldest == connections_.end()) return false;
    connections_.erase(oldest);
    return true;
  }

  [[nodiscard]] std::size_t MostBuffered() const {
    return options_.limits.max_head_bytes + options_.limits.max_body_bytes + 4;
  }

  // Reads what arrived and acts on whole requests; false to close.
  bool ReadFrom(Connection& connection) {
    char piece[kReadPiece];
    bool line_ended = false;
    while (connection.received.size() - connection.parsed <= MostBuffered()) {
      const ssize_t got = ::recv(connection.socket.get(), piece, sizeof(piece), 0);
      if (got == 0) {
        connection.peer_closed = true;
        line_ended = true;  // what came is all there is: look at it now
        break;
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return false;
      }
      if (!connection.request_started) {
        connection.request_started = true;
        connection.deadline = Clock::now() + options_.request_deadline;
      }
      line_ended |= std::memchr(piece, '\n', static_cast<std::size_t>(got)) != nullptr;
      connection.received.append(piece, static_cast<std::size_t>(got));
    }
    // Parsing only when a line ended (or a head is complete and its body
    // coming) keeps a client that sends a byte at a time from making each
    // byte cost a scan of everything before it.
    if (!line_ended && !connection.head_complete &&
        connection.received.size() - connection.parsed <= MostBuffered()) {
      return true;
    }
    return Advance(connection);
  }

  // Answers the whole requests buffered on the connection, in order, until
  // one waits for a handler or a response waits for its client; false to
  // close. A loop, not a recursion: a client may pipeline thousands.
  bool Advance(Connection& connection) {
    while (connection.state == Connection::State::kReading) {
      const std::string_view pending =
          std::string_view(connection.received).substr(connection.parsed);
      HttpParse parse = ParseHttpRequest(pending, options_.limits);
      connection.head_complete = parse.head_complete;
      if (parse.outcome == HttpParse::Outcome::kNeedMore) {
        Compact(connection);
        if (connection.peer_closed) return false;  // the client ended mid-request
        if (pending.size() > MostBuffered()) {
          // Cannot happen with the parser's limits; bounded all the same.
          return Send(connection,
                      TextResponse(431, "sray: the dashboard refused the request: too large\n"),
                      false, false);
        }
        return true;
      }
      if (parse.outcome == HttpParse::Outcome::kRefused) {
        return Send(connection,
                    TextResponse(parse.status,
                                 "sray: the dashboard refused the request: " + parse.reason + "\n"),
                    false, false);
      }
      connection.parsed += parse.consumed;
      const bool keep_alive = parse.request.keep_alive;
      const bool head = parse.request.method == "HEAD";
      std::optional<HttpResponse> answer = Guarded([&]() -> std::optional<HttpResponse> {
        return options_.admit ? options_.admit(parse.request) : std::nullopt;
      });
      if (!answer) {
        std::lock_guard lock(queue_mutex_);
        if (jobs_.size() >= options_.max_waiting_requests) {
          answer = TextResponse(
              503, "sray: the dashboard is busy with other requests: try again in a moment\n");
        } else {
          jobs_.push_back(Job{connection.id, std::move(parse.request)});
          queue_changed_.notify_one();
          connection.state = Connection::State::kServing;
          return true;
        }
      }
      if (!Send(connection, *answer, keep_alive, head)) return false;
    }
    return true;
  }

  // Drops the bytes of answered requests once they are most of the buffer:
  // pipelined requests cost one copy of what follows them, not one each.
  static void Compact(Connection& connection) {
    if (connection.parsed > 0 && connection.parsed * 2 >= connection.received.size()) {
      connection.received.erase(0, connection.parsed);
      connection.parsed = 0;
    }
  }

  // Starts sending a response; false to close.
  bool Send(Connection& connection, const HttpResponse& response, bool keep_alive, bool head) {
    HttpResponse complete = response;
    for (const auto& header : options_.common_headers) complete.headers.push_back(header);
    connection.to_send = SerializedResponse(complete, keep_alive, head);
    connection.sent = 0;
    connection.close_after_sending = !keep_alive;
    connection.state = Connection::State::kWriting;
    connection.waiting_since = Clock::now();
    connection.deadline = connection.waiting_since + options_.write_deadline;
    return WriteTo(connection);
  }

  // Writes what the socket takes, and goes on to the next request once the
  // response is out; false to close.
  bool WriteTo(Connection& connection) {
    const std::size_t before = connection.sent;
    while (connection.sent < connection.to_send.size()) {
      const ssize_t wrote =
          ::send(connection.socket.get(), connection.to_send.data() + connection.sent,
                 connection.to_send.size() - connection.sent, MSG_NOSIGNAL);
      if (wrote < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
        // Progress counts for eviction; the write deadline stays: a client
        // taking a byte now and then does not keep a connection for ever.
        if (connection.sent > before) connection.waiting_since = Clock::now();
        return true;
      }
      connection.sent += static_cast<std::size_t>(wrote);
    }
    if (connection.close_after_sending) {
      ::shutdown(connection.socket.get(), SHUT_WR);
      connection.state = Connection::State::kDraining;
      connection.deadline = Clock::now() + kLongestDrain;
      return Drain(connection);
    }
    connection.to_send.clear();
    connection.state = Connection::State::kReading;
    connection.waiting_since = Clock::now();
    connection.request_started = connection.received.size() > connection.parsed;
    connection.deadline =
        connection.waiting_since +
        (connection.request_started ? options_.request_deadline : options_.keep_alive);
    return true;
  }

  // Reads and drops what the client still sends; false once it closed.
  static bool Drain(Connection& connection) {
    char piece[kReadPiece];
    while (true) {
      const ssize_t got = ::recv(connection.socket.get(), piece, sizeof(piece), 0);
      if (got > 0) continue;
      if (got < 0 && errno == EINTR) continue;
      return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }

  void TakeAnswers() {
    std::deque<Answer> answers;
    {
      std::lock_guard lock(queue_mutex_);
      answers.swap(answers_);
    }
    for (Answer& answer : answers) {
      const auto found = connections_.find(answer.connection);
      if (found == connections_.end()) continue;
      Connection& connection = *found->second;
      // A request pipelined behind this one is answered next.
      const bool keep =
          Send(connection, answer.response, answer.keep_alive, answer.head) && Advance(connection);
      if (!keep) connections_.erase(found);
    }
  }

  void EndOverdue() {
    const auto now = Clock::now();
    std::erase_if(connections_, [&](const auto& entry) {
      const Connection& connection = *entry.second;
      return connection.state != Connection::State::kServing && connection.deadline <= now;
    });
  }

  const HttpServerOptions options_;
  FileDescriptor listening_;
  FileDescriptor wake_;  // an eventfd: a stop, or answers to send
  const int port_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> ended_{false};
  std::mutex stop_mutex_;  // Stop's join, from whichever thread calls it
  std::thread io_thread_;
  std::vector<std::thread> handlers_;  // joined by the I/O thread as it ends

  // The I/O thread's alone.
  std::map<std::uint64_t, std::unique_ptr<Connection>> connections_;
  std::uint64_t next_id_ = 1;
  Clock::time_point accepts_paused_until_;

  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<Job> jobs_;        // by queue_mutex_
  std::deque<Answer> answers_;  // by queue_mutex_
};

// "[::1]" names an IPv6 address in a URL; getaddrinfo wants it bare.
std::string BareHost(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

Result<FileDescriptor> ListeningSocket(const std::string& host, int port, int& bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const std::string bare = BareHost(host);
  const int looked_up = ::getaddrinfo(bare.c_str(), service.c_str(), &hints, &found);
  if (looked_up != 0) {
    return Status::Unavailable(std::string("it is not an address of this node (") +
                               ::gai_strerror(looked_up) + ")");
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  std::string why = "no address to bind";
  for (const addrinfo* address = found; address != nullptr; address = address->ai_next) {
    FileDescriptor socket(::socket(address->ai_family,
                                   address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                                   address->ai_protocol));
    if (socket.get() < 0) {
      why = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR only (not SO_REUSEPORT): a second job given the same
    // dashboard=HOST:PORT must fail, not take half the requests.
    const int yes = 1;
    ::setsockopt(socket.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(socket.get(), address->ai_addr, address->ai_addrlen) != 0 ||
        ::listen(socket.get(), 64) != 0) {
      why = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) {
      why = std::strerror(errno);
      continue;
    }
    bound_port = local.ss_family == AF_INET6
                     ? ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port)
                     : ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
    return socket;
  }
  return Status::Unavailable(why);
}

}  // namespace

std::string SerializedResponse(const HttpResponse& response, bool keep_alive, bool head) {
  std::string bytes =
      "HTTP/1.1 " + std::to_string(response.status) + " " + ReasonPhrase(response.status) + "\r\n";
  bytes += "Content-Type: " + response.content_type + "\r\n";
  bytes += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  bytes += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : response.headers) bytes += name + ": " + value + "\r\n";
  bytes += "\r\n";
  if (!head) bytes += response.body;
  return bytes;
}

Result<std::unique_ptr<HttpServer>> HttpServer::Listen(HttpServerOptions options) {
  if (!options.serve || options.handler_threads == 0 || options.max_connections == 0) {
    return Status::InvalidArgument(
        "the HTTP server needs a serve function, a handler thread and room for a connection");
  }
  int port = 0;
  auto listening = ListeningSocket(options.host, options.port, port);
  if (!listening.ok()) {
    return Status::Unavailable("cannot listen on " + options.host + ":" +
                               std::to_string(options.port) + ": " + listening.status().message() +
                               ": pick another with dashboard=HOST:PORT, or dashboard=off");
  }
  FileDescriptor wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (wake.get() < 0) {
    return Status::Unavailable(std::string("the dashboard cannot make an eventfd: ") +
                               std::strerror(errno));
  }
  auto server = std::make_unique<PollingHttpServer>(std::move(options), std::move(*listening),
                                                    std::move(wake), port);
  SRAY_RETURN_IF_ERROR(server->Start());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace sray::dashboard
