#include "dashboard/dashboard_server.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <httplib.h>

#include "common/broken_pipe.h"
#include "common/thread_name.h"
#include "common/whole_number.h"
#include "dashboard/dashboard_page.h"

namespace sray::dashboard {
namespace {

// Browsers logged in at once; a further login ends the oldest session.
constexpr std::size_t kSessionsKept = 64;
// Requests are few (a page polling three endpoints, a Prometheus scrape):
// four threads, not httplib's default of one per core and more.
constexpr std::size_t kServerThreads = 4;
// An idle keep-alive connection holds a server thread: a page polling every
// 2 s over two connections kept both threads of a smaller pool for ever, and
// its third request (on a third connection) was never answered. Idle
// connections now close after a second.
constexpr time_t kKeepAliveSeconds = 1;
// How often the accepting thread looks up from a quiet socket. httplib's
// stop() relies on shutdown() waking a blocked accept(), which gVisor (the
// sandbox of some GPU clouds) does not do: the job then never ended, its
// driver waiting for the server at Shutdown. Polling with this timeout, the
// thread sees the stop within one interval wherever it runs.
constexpr time_t kStopCheckMicroseconds = 100'000;

// Compares in time that does not depend on where they differ.
bool SameSecret(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (std::size_t index = 0; index < given.size(); ++index) {
    difference |= static_cast<unsigned char>(given[index] ^ expected[index]);
  }
  return difference == 0;
}

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or empty.
std::string CookieValue(const std::string& header, const std::string& name) {
  std::size_t position = 0;
  while (position < header.size()) {
    const std::size_t end = std::min(header.find(';', position), header.size());
    std::string pair = header.substr(position, end - position);
    const std::size_t first = pair.find_first_not_of(' ');
    if (first != std::string::npos) pair.erase(0, first);
    if (pair.size() > name.size() && pair.compare(0, name.size(), name) == 0 &&
        pair[name.size()] == '=') {
      return pair.substr(name.size() + 1);
    }
    position = end + 1;
  }
  return {};
}

void Secure(httplib::Response& response) {
  response.set_header("Cache-Control", "no-store");
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_header("X-Frame-Options", "DENY");
}

}  // namespace

namespace {

class ServingDashboard final : public DashboardServer {
 public:
  explicit ServingDashboard(DashboardOptions options) : options_(std::move(options)) {}
  ~ServingDashboard() override {
    while (!Stop(std::chrono::seconds(1))) {
    }
  }

  bool Stop(std::chrono::milliseconds patience) override {
    if (!thread_.joinable()) return true;
    // stop() is lost on a server not yet running: repeat until it ended.
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!listening_ended_.load()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      server_.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    thread_.join();
    return true;
  }
  ServingDashboard(const ServingDashboard&) = delete;
  ServingDashboard& operator=(const ServingDashboard&) = delete;

  Status Listen() {
    server_.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
    server_.set_keep_alive_timeout(kKeepAliveSeconds);
    server_.set_idle_interval(0, kStopCheckMicroseconds);
    // httplib sets SO_REUSEPORT by default, which lets a second server (a
    // second job given the same dashboard=HOST:PORT) listen on the port too
    // and take half the requests: only SO_REUSEADDR here, so it fails.
    server_.set_socket_options([](socket_t socket) {
      const int yes = 1;
      ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    server_.set_pre_routing_handler(
        [this](const httplib::Request& request, httplib::Response& response) {
          Secure(response);
          if (request.path == "/login" || Authorized(request)) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          response.status = 401;
          response.set_header("WWW-Authenticate", "Bearer");
          response.set_content(
              "sray: this dashboard needs the job's token: open a login link ('sray login "
              "JOB' prints one), or send 'Authorization: Bearer TOKEN' (the token is in "
              "~/.sray/jobs/JOB.STEP.json)\n",
              "text/plain");
          return httplib::Server::HandlerResponse::Handled;
        });
    server_.Get("/login", [this](const httplib::Request& request, httplib::Response& response) {
      if (!UseLoginCode(request.get_param_value("code"))) {
        response.status = 401;
        response.set_content(
            "sray: this login link is unknown, used already or expired: send the job's token as "
            "a bearer header (it is in ~/.sray/jobs/JOB.STEP.json), or run 'sray login JOB' for a "
            "new link\n",
            "text/plain");
        return;
      }
      // The cookie names a session of this server, not the token: a cookie
      // that leaks (a browser profile, a proxy's log) opens nothing once the
      // job ends, and never reaches the API of another step.
      auto session = NewSession();
      if (!session.ok()) return Unavailable(response, session.status());
      response.set_header("Set-Cookie", options_.cookie_name + "=" + *session +
                                            "; Path=/; HttpOnly; SameSite=Strict");
      response.set_redirect("/", 303);
    });
    server_.Get("/", [](const httplib::Request&, httplib::Response& response) {
      response.set_header("Content-Security-Policy",
                          "default-src 'self'; script-src 'unsafe-inline' 'self'; "
                          "style-src 'unsafe-inline' 'self'");
      response.set_content(std::string(kDashboardPage), "text/html; charset=utf-8");
    });
    server_.Get("/api/nodes", [this](const httplib::Request&, httplib::Response& response) {
      Answer(response, &NodesJson, "application/json");
    });
    server_.Get("/api/job", [this](const httplib::Request&, httplib::Response& response) {
      Answer(response, &JobJson, "application/json");
    });
    server_.Get("/api/tasks", [this](const httplib::Request&, httplib::Response& response) {
      Answer(response, &TasksJson, "application/json");
    });
    server_.Get("/api/actors", [this](const httplib::Request&, httplib::Response& response) {
      Answer(response, &ActorsJson, "application/json");
    });
    server_.Get("/api/placement_groups",
                [this](const httplib::Request&, httplib::Response& response) {
                  Answer(response, &PlacementGroupsJson, "application/json");
                });
    server_.Get("/api/objects", [this](const httplib::Request&, httplib::Response& response) {
      Answer(response, &ObjectsJson, "application/json");
    });
    server_.Get("/api/logs", [this](const httplib::Request&, httplib::Response& response) {
      auto files = options_.log_index
                       ? options_.log_index()
                       : Result<std::vector<LogFileEntry>>(std::vector<LogFileEntry>());
      if (!files.ok()) return Unavailable(response, files.status());
      response.set_content(LogIndexJson(*files), "application/json");
    });
    server_.Get(R"(/api/logs/(\d+)/(\d+))", [this](const httplib::Request& request,
                                                   httplib::Response& response) {
      const auto node = WholeNumber<std::uint32_t>(request.matches[1].str());
      const auto worker = WholeNumber<std::uint32_t>(request.matches[2].str());
      const auto offset = request.has_param("offset")
                              ? WholeNumber<std::int64_t>(request.get_param_value("offset"))
                              : std::optional<std::int64_t>(-1);
      if (!node || !worker || !offset || !options_.log_read) {
        response.status = 400;
        response.set_content("sray: use /api/logs/NODE/WORKER[?offset=BYTES]\n", "text/plain");
        return;
      }
      auto chunk = options_.log_read(*node, *worker, *offset, 256 * 1024);
      if (!chunk.ok()) return Unavailable(response, chunk.status());
      response.set_content(LogChunkJson(*chunk), "application/json");
    });
    server_.Get("/api/events", [this](const httplib::Request&, httplib::Response& response) {
      const auto runs = Training();
      Answer(
          response, [&runs](const ClusterSnapshot& snapshot) { return EventsJson(snapshot, runs); },
          "application/json");
    });
    server_.Get("/api/training", [this](const httplib::Request&, httplib::Response& response) {
      response.set_content(TrainingJson(Training()), "application/json");
    });
    // A fresh one-time login link, for `sray login`: the driver's output may
    // be a file other users can read, so it carries no link there. Only the
    // token itself (the jobs file is the job user's alone) mints one; a
    // browser's cookie does not, so a leaked session cannot make more.
    server_.Post("/api/login_link", [this](const httplib::Request& request,
                                           httplib::Response& response) {
      if (!HasBearerToken(request)) {
        response.status = 403;
        response.set_content(
            "sray: login links are given for the job's token only: send 'Authorization: Bearer "
            "TOKEN' (it is in ~/.sray/jobs/JOB.STEP.json), or run 'sray login JOB'\n",
            "text/plain");
        return;
      }
      auto code = NewLoginCode();
      if (!code.ok()) return Unavailable(response, code.status());
      response.set_content(nlohmann::json{{"url", UrlOf(*code)}}.dump(), "application/json");
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
      const auto runs = Training();
      Answer(
          response,
          [&runs](const ClusterSnapshot& snapshot) { return MetricsText(snapshot, runs); },
          "text/plain; version=0.0.4; charset=utf-8");
    });

    if (options_.port == 0) {
      port_ = server_.bind_to_any_port(options_.host);
    } else if (server_.bind_to_port(options_.host, options_.port)) {
      port_ = options_.port;
    }
    if (port_ <= 0) {
      return Status::Unavailable("cannot listen on " + options_.host + ":" +
                                 std::to_string(options_.port) +
                                 " (taken, or not an address of this node): pick another with "
                                 "dashboard=HOST:PORT, or dashboard=off");
    }
    thread_ = std::thread([this] {
      NameThisThread("sray-dashboard");
      server_.listen_after_bind();
      listening_ended_.store(true);
    });
    // httplib's stop() does nothing before the server runs, and the thread
    // would then listen for ever: running before Start returns.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!server_.is_running()) {
      return Status::Internal("the dashboard's server did not start within 10 s");
    }
    return Status::Ok();
  }

  [[nodiscard]] const std::string& host() const override { return options_.host; }
  [[nodiscard]] int port() const override { return port_; }
  [[nodiscard]] std::string Url() const override {
    return "http://" + options_.host + ":" + std::to_string(port_) + "/";
  }
  [[nodiscard]] std::string UrlOf(const std::string& login_code) const {
    return Url() + "login?code=" + login_code;
  }

  std::string NewLoginUrl() override {
    auto code = NewLoginCode();
    if (!code.ok()) return Url();
    return UrlOf(*code);
  }

  Result<std::string> NewLoginCode() {
    auto code = RandomSecret(16);
    if (!code.ok()) return code.status();
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(login_codes_, [&](const auto& entry) { return entry.second < now; });
    login_codes_[*code] = now + options_.login_link_lifetime;
    return code;
  }

 private:
  bool HasBearerToken(const httplib::Request& request) const {
    const std::string authorization = request.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    return authorization.rfind(kBearer, 0) == 0 &&
           SameSecret(authorization.substr(kBearer.size()), options_.token);
  }

  bool Authorized(const httplib::Request& request) const {
    if (HasBearerToken(request)) return true;
    const std::string cookie =
        CookieValue(request.get_header_value("Cookie"), options_.cookie_name);
    if (cookie.empty()) return false;
    std::lock_guard lock(mutex_);
    bool known = false;
    for (const std::string& session : sessions_) known |= SameSecret(cookie, session);
    return known;
  }

  Result<std::string> NewSession() {
    auto session = RandomSecret(32);
    if (!session.ok()) return session.status();
    std::lock_guard lock(mutex_);
    if (sessions_.size() == kSessionsKept) sessions_.pop_front();
    sessions_.push_back(*session);
    return session;
  }

  bool UseLoginCode(const std::string& code) {
    std::lock_guard lock(mutex_);
    auto found = login_codes_.find(code);
    if (found == login_codes_.end()) return false;
    const bool fresh = found->second >= std::chrono::steady_clock::now();
    login_codes_.erase(found);
    return fresh;
  }

  static void Unavailable(httplib::Response& response, const Status& status) {
    response.status = status.code() == StatusCode::kNotFound ? 404 : 503;
    response.set_content("sray: " + status.message() + "\n", "text/plain");
  }

  std::vector<TrainingRunSnapshot> Training() const {
    return options_.training ? options_.training() : std::vector<TrainingRunSnapshot>();
  }

  void Answer(httplib::Response& response,
              const std::function<std::string(const ClusterSnapshot&)>& render,
              const char* content_type) {
    auto snapshot = options_.snapshot ? options_.snapshot()
                                      : Result<ClusterSnapshot>(Status::Unavailable("no source"));
    if (!snapshot.ok()) {
      response.status = 503;
      response.set_content(
          "sray: the job's state is not available: " + snapshot.status().message() + "\n",
          "text/plain");
      return;
    }
    response.set_content(render(*snapshot), content_type);
  }

  const DashboardOptions options_;
  httplib::Server server_;
  std::thread thread_;
  std::atomic<bool> listening_ended_{false};
  int port_ = -1;
  mutable std::mutex mutex_;
  std::map<std::string, std::chrono::steady_clock::time_point> login_codes_;  // by mutex_
  std::deque<std::string> sessions_;  // the logged-in browsers' cookies, oldest first; by mutex_
};

}  // namespace

Result<std::unique_ptr<DashboardServer>> DashboardServer::Start(DashboardOptions options) {
  if (options.token.empty() || options.cookie_name.empty()) {
    return Status::InvalidArgument("the dashboard needs a token and a cookie name");
  }
  // httplib::Server's constructor sets SIGPIPE to SIG_IGN for the whole
  // process, the user's driver: programs it starts would inherit that.
  std::unique_ptr<ServingDashboard> server;
  {
    const SigpipeDispositionKept kept;
    server = std::make_unique<ServingDashboard>(std::move(options));
  }
  const Status started = server->Listen();
  if (!started.ok()) return started;
  return std::unique_ptr<DashboardServer>(std::move(server));
}

}  // namespace sray::dashboard
