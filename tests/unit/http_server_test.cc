// The dashboard's HTTP server against clients that misbehave: each test
// opens real TCP connections to a server on the loopback.
#include "dashboard/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/file_descriptor.h"

namespace sray::dashboard {
namespace {

using std::chrono::milliseconds;
using HttpTestClock = std::chrono::steady_clock;

// A client connection; reads give up after `patience`.
class RawHttpClient {
 public:
  explicit RawHttpClient(int port) : socket_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ =
        ::connect(socket_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }

  [[nodiscard]] bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    return ::send(socket_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

  // What arrives until the server closes, `bytes_wanted` arrived, or `patience` passed.
  std::string Receive(milliseconds patience, std::size_t bytes_wanted = SIZE_MAX) {
    std::string received;
    const auto deadline = HttpTestClock::now() + patience;
    while (received.size() < bytes_wanted) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - HttpTestClock::now()).count();
      if (left <= 0) break;
      pollfd polled{socket_.get(), POLLIN, 0};
      if (::poll(&polled, 1, static_cast<int>(left)) <= 0) break;
      char piece[4096];
      const ssize_t got = ::recv(socket_.get(), piece, sizeof(piece), 0);
      if (got <= 0) {
        closed_ = true;
        break;
      }
      received.append(piece, static_cast<std::size_t>(got));
    }
    return received;
  }

  // One whole response (with a Content-Length) or what came.
  std::string ReceiveResponse(milliseconds patience) {
    std::string received;
    const auto deadline = HttpTestClock::now() + patience;
    while (HttpTestClock::now() < deadline && !closed_) {
      const std::size_t head_end = received.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const std::size_t length_at = received.find("Content-Length: ");
        const std::size_t length =
            std::stoul(received.substr(length_at + 16, received.find("\r\n", length_at)));
        if (received.size() >= head_end + 4 + length) return received;
      }
      received += Receive(milliseconds(20), 1);
    }
    return received;
  }

  // Ends the client's side (a half-close): the server still answers.
  void EndSending() { ::shutdown(socket_.get(), SHUT_WR); }

  // True if the server closed the connection within `patience`.
  bool ClosedWithin(milliseconds patience) {
    Receive(patience);
    return closed_;
  }

 private:
  FileDescriptor socket_;
  bool connected_ = false;
  bool closed_ = false;
};

// A server whose `admit` answers requests without "Authorization: yes" 401,
// and whose handlers wait while `hold` is set.
class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options) {
    options.admit = [](const HttpRequest& request) -> std::optional<HttpResponse> {
      if (request.path == "/big") {
        HttpResponse big;
        big.body = std::string(16 * 1024, 'x');
        return big;
      }
      if (request.Header("Authorization") == "yes") return std::nullopt;
      HttpResponse refused;
      refused.status = 401;
      refused.body = "no\n";
      return refused;
    };
    options.serve = [this](const HttpRequest& request) {
      if (request.path == "/throws") throw std::runtime_error("the handler broke");
      if (request.path == "/throws-anything") throw 42;
      {
        std::unique_lock lock(mutex_);
        ++serving_;
        changed_.notify_all();
        changed_.wait(lock, [this] { return !hold_; });
        --serving_;
      }
      HttpResponse response;
      response.body = "served " + request.path + "\n";
      return response;
    };
    options.common_headers = {{"X-Test", "1"}};
    auto server = HttpServer::Listen(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
  }

  void TearDown() override {
    Release();
    if (server_) {
      EXPECT_TRUE(server_->Stop(std::chrono::seconds(10)));
    }
  }

  void Hold() {
    std::lock_guard lock(mutex_);
    hold_ = true;
  }
  void Release() {
    std::lock_guard lock(mutex_);
    hold_ = false;
    changed_.notify_all();
  }
  bool WaitForServing(int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(5), [&] { return serving_ >= count; });
  }

  std::unique_ptr<HttpServer> server_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool hold_ = false;  // by mutex_
  int serving_ = 0;    // by mutex_
};

constexpr const char* kAuthorizedGet = "GET /data HTTP/1.1\r\nAuthorization: yes\r\n\r\n";

TEST_F(HttpServerTest, AnswersWithLengthCommonHeadersAndKeepsTheConnection) {
  StartServer({});
  RawHttpClient client(server_->port());
  ASSERT_TRUE(client.connected());
  for (int request = 0; request < 2; ++request) {
    ASSERT_TRUE(client.Send(kAuthorizedGet));
    const std::string response = client.ReceiveResponse(std::chrono::seconds(5));
    EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0U) << response;
    EXPECT_NE(response.find("Content-Length: 13\r\n"), std::string::npos) << response;
    EXPECT_NE(response.find("Connection: keep-alive\r\n"), std::string::npos) << response;
    EXPECT_NE(response.find("X-Test: 1\r\n"), std::string::npos) << response;
    EXPECT_NE(response.find("\r\n\r\nserved /data\n"), std::string::npos) << response;
  }
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer({});
  RawHttpClient client(server_->port());
  ASSERT_TRUE(
      client.Send(std::string(kAuthorizedGet) +
                  "GET /second HTTP/1.1\r\nAuthorization: yes\r\nConnection: close\r\n\r\n"));
  const std::string both = client.Receive(std::chrono::seconds(5));
  const std::size_t first = both.find("served /data");
  const std::size_t second = both.find("served /second");
  ASSERT_NE(first, std::string::npos) << both;
  ASSERT_NE(second, std::string::npos) << both;
  EXPECT_LT(first, second);
  EXPECT_NE(both.find("Connection: close\r\n"), std::string::npos);
}

// The memory a client can make the server hold is bounded: headers that
// never end are refused once past the limit, and the connection closed.
TEST_F(HttpServerTest, AnEndlessHeadIsRefusedAndTheConnectionClosed) {
  StartServer({});
  RawHttpClient client(server_->port());
  std::string flood = "GET / HTTP/1.1\r\n";
  while (flood.size() < 256 * 1024) flood += "X-Flood: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
  client.Send(flood);  // the server may close before it took everything
  const std::string response = client.Receive(std::chrono::seconds(5));
  EXPECT_EQ(response.rfind("HTTP/1.1 431 ", 0), 0U) << response.substr(0, 200);
  EXPECT_NE(response.find("larger than 16384 bytes"), std::string::npos);
  EXPECT_NE(response.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(5)));
}

TEST_F(HttpServerTest, ARequestNotWholeByItsDeadlineIsClosed) {
  HttpServerOptions options;
  options.request_deadline = milliseconds(300);
  StartServer(std::move(options));
  RawHttpClient client(server_->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nX-Slow: "));
  // A byte now and then does not extend it.
  const auto started = HttpTestClock::now();
  bool closed = false;
  while (!closed && HttpTestClock::now() - started < std::chrono::seconds(5)) {
    client.Send("a");
    closed = client.ClosedWithin(milliseconds(100));
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(HttpTestClock::now() - started, std::chrono::seconds(2));
}

TEST_F(HttpServerTest, AnIdleKeptConnectionIsClosedAfterTheKeepAlive) {
  HttpServerOptions options;
  options.keep_alive = milliseconds(200);
  StartServer(std::move(options));
  RawHttpClient client(server_->port());
  ASSERT_TRUE(client.Send(kAuthorizedGet));
  EXPECT_NE(client.ReceiveResponse(std::chrono::seconds(5)).find("200 OK"), std::string::npos);
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
}

// Slow clients holding every connection the server keeps do not shut out a
// new one: it closes the one that waited longest.
TEST_F(HttpServerTest, SlowClientsAtTheConnectionLimitDoNotShutOutANewOne) {
  HttpServerOptions options;
  options.max_connections = 8;
  StartServer(std::move(options));
  std::vector<std::unique_ptr<RawHttpClient>> slow;
  for (int index = 0; index < 20; ++index) {
    slow.push_back(std::make_unique<RawHttpClient>(server_->port()));
    ASSERT_TRUE(slow.back()->Send("GET / HTTP/1.1\r\nX-Slow: "));
  }
  RawHttpClient holder(server_->port());
  ASSERT_TRUE(holder.Send(kAuthorizedGet));
  const std::string response = holder.ReceiveResponse(std::chrono::seconds(5));
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0U) << response;
  int closed = 0;
  for (auto& client : slow) closed += client->ClosedWithin(milliseconds(50)) ? 1 : 0;
  EXPECT_GE(closed, 13) << "at most 8 kept at once, the newest waiters";
}

// Requests without the token are answered by `admit` on the I/O thread,
// even while every handler thread is busy.
TEST_F(HttpServerTest, RequestsAdmitRefusesNeverWaitForABusyHandler) {
  HttpServerOptions options;
  options.handler_threads = 2;
  StartServer(std::move(options));
  Hold();
  RawHttpClient first(server_->port());
  RawHttpClient second(server_->port());
  ASSERT_TRUE(first.Send(kAuthorizedGet));
  ASSERT_TRUE(second.Send(kAuthorizedGet));
  ASSERT_TRUE(WaitForServing(2));
  RawHttpClient stranger(server_->port());
  ASSERT_TRUE(stranger.Send("GET /data HTTP/1.1\r\n\r\n"));
  const std::string refused = stranger.ReceiveResponse(std::chrono::seconds(2));
  EXPECT_EQ(refused.rfind("HTTP/1.1 401 Unauthorized\r\n", 0), 0U) << refused;
  Release();
  EXPECT_NE(first.ReceiveResponse(std::chrono::seconds(5)).find("200 OK"), std::string::npos);
  EXPECT_NE(second.ReceiveResponse(std::chrono::seconds(5)).find("200 OK"), std::string::npos);
}

TEST_F(HttpServerTest, MoreAdmittedRequestsThanTheQueueHoldsAreAnswered503) {
  HttpServerOptions options;
  options.handler_threads = 1;
  options.max_waiting_requests = 1;
  StartServer(std::move(options));
  Hold();
  RawHttpClient busy(server_->port());
  ASSERT_TRUE(busy.Send(kAuthorizedGet));
  ASSERT_TRUE(WaitForServing(1));
  // One of these two waits for the handler; the other finds the queue full.
  RawHttpClient second(server_->port());
  RawHttpClient third(server_->port());
  ASSERT_TRUE(second.Send(kAuthorizedGet));
  ASSERT_TRUE(third.Send(kAuthorizedGet));
  std::string refused = third.ReceiveResponse(std::chrono::milliseconds(500));
  RawHttpClient* waiting = &second;
  if (refused.empty()) {
    refused = second.ReceiveResponse(std::chrono::seconds(2));
    waiting = &third;
  }
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 ", 0), 0U) << refused;
  EXPECT_NE(refused.find("busy"), std::string::npos) << refused;
  Release();
  EXPECT_NE(waiting->ReceiveResponse(std::chrono::seconds(5)).find("200 OK"), std::string::npos);
}

// Found by review: connections whose client asked for much and read
// nothing could not be closed to make room, and 64 of them shut every new
// client out.
TEST_F(HttpServerTest, ClientsThatNeverReadTheirResponsesDoNotShutOutANewOne) {
  HttpServerOptions options;
  options.max_connections = 4;
  StartServer(std::move(options));
  std::string requests;
  for (int request = 0; request < 1000; ++request) requests += "GET /big HTTP/1.1\r\n\r\n";
  std::vector<std::unique_ptr<RawHttpClient>> hoarders;
  for (int index = 0; index < 8; ++index) {
    hoarders.push_back(std::make_unique<RawHttpClient>(server_->port()));
    ASSERT_TRUE(hoarders.back()->Send(requests));
  }
  std::this_thread::sleep_for(milliseconds(200));
  RawHttpClient holder(server_->port());
  ASSERT_TRUE(holder.Send(kAuthorizedGet));
  const std::string response = holder.ReceiveResponse(std::chrono::seconds(3));
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0U) << response.substr(0, 200);
}

TEST_F(HttpServerTest, ThousandsOfPipelinedRequestsAreAllAnswered) {
  StartServer({});
  RawHttpClient client(server_->port());
  std::string requests;
  constexpr int kRequests = 3000;
  for (int request = 0; request + 1 < kRequests; ++request) requests += "GET /x HTTP/1.1\r\n\r\n";
  requests += "GET /x HTTP/1.1\r\nConnection: close\r\n\r\n";
  std::thread sender([&] { client.Send(requests); });
  const std::string answers = client.Receive(std::chrono::seconds(10));
  sender.join();
  std::size_t count = 0;
  for (std::size_t at = answers.find("HTTP/1.1 401 "); at != std::string::npos;
       at = answers.find("HTTP/1.1 401 ", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, static_cast<std::size_t>(kRequests));
}

// Found by review: a request followed at once by the client's half-close
// (`nc -N`, `printf ... | nc`) was dropped unanswered.
TEST_F(HttpServerTest, ARequestBeforeTheClientsHalfCloseIsAnswered) {
  StartServer({});
  RawHttpClient client(server_->port());
  ASSERT_TRUE(client.Send(std::string(kAuthorizedGet) + kAuthorizedGet));
  client.EndSending();
  const std::string both = client.Receive(std::chrono::seconds(5));
  EXPECT_NE(both.find("served /data"), std::string::npos) << both;
  EXPECT_NE(both.find("served /data", both.find("served /data") + 1), std::string::npos) << both;
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(1)));
}

// A handler that throws answers 500 with the reason, and the server (the
// user's driver) goes on serving.
TEST_F(HttpServerTest, AHandlerThatThrowsAnswers500AndTheServerGoesOn) {
  StartServer({});
  RawHttpClient client(server_->port());
  ASSERT_TRUE(client.Send("GET /throws HTTP/1.1\r\nAuthorization: yes\r\n\r\n"));
  const std::string thrown = client.ReceiveResponse(std::chrono::seconds(5));
  EXPECT_EQ(thrown.rfind("HTTP/1.1 500 ", 0), 0U) << thrown;
  EXPECT_NE(thrown.find("the handler broke"), std::string::npos) << thrown;
  ASSERT_TRUE(client.Send("GET /throws-anything HTTP/1.1\r\nAuthorization: yes\r\n\r\n"));
  const std::string anything = client.ReceiveResponse(std::chrono::seconds(5));
  EXPECT_EQ(anything.rfind("HTTP/1.1 500 ", 0), 0U) << anything;
  EXPECT_NE(anything.find("an unknown exception"), std::string::npos) << anything;
  ASSERT_TRUE(client.Send(kAuthorizedGet));
  EXPECT_NE(client.ReceiveResponse(std::chrono::seconds(5)).find("served /data"),
            std::string::npos);
}

TEST_F(HttpServerTest, AHeadRequestGetsTheLengthWithoutTheBody) {
  StartServer({});
  RawHttpClient client(server_->port());
  ASSERT_TRUE(client.Send("HEAD /data HTTP/1.1\r\nAuthorization: yes\r\n\r\n" +
                          std::string(kAuthorizedGet)));
  const std::string answers = client.Receive(std::chrono::milliseconds(500));
  const std::size_t second = answers.find("HTTP/1.1 200 OK", 1);
  ASSERT_NE(second, std::string::npos) << answers;
  const std::string head = answers.substr(0, second);
  EXPECT_NE(head.find("Content-Length: 13\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("served"), std::string::npos) << head;
  EXPECT_NE(answers.find("served /data", second), std::string::npos) << answers;
}

TEST_F(HttpServerTest, StopGivesUpOnABlockedHandlerAndEndsOnceItReturns) {
  StartServer({});
  Hold();
  RawHttpClient client(server_->port());
  ASSERT_TRUE(client.Send(kAuthorizedGet));
  ASSERT_TRUE(WaitForServing(1));
  EXPECT_FALSE(server_->Stop(milliseconds(200)));
  Release();
  EXPECT_TRUE(server_->Stop(std::chrono::seconds(5)));
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(1)));
}

TEST(HttpServerListen, ATakenPortNamesTheAddressAndTheFix) {
  HttpServerOptions options;
  options.serve = [](const HttpRequest&) { return HttpResponse{}; };
  auto first = HttpServer::Listen(options);
  ASSERT_TRUE(first.ok()) << first.status().message();
  options.port = (*first)->port();
  auto second = HttpServer::Listen(options);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(
      second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(options.port) +
                                     ": Address already in use"),
      std::string::npos)
      << second.status().message();
  options.host = "no-such-host.invalid";
  options.port = 0;
  auto unknown = HttpServer::Listen(options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("not an address of this node"), std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace sray::dashboard
