#include "dashboard/dashboard_server.h"

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/host_name.h"
#include "common/whole_number.h"
#include "dashboard/dashboard_address.h"
#include "dashboard/dashboard_page.h"
#include "dashboard/http_server.h"

namespace sray::dashboard {

namespace {

// Browsers logged in at once; a further login ends the oldest session.
constexpr std::size_t kSessionsKept = 64;
// Requests are few (a page polling a few endpoints, a Prometheus scrape),
// and each may wait up to 5 s for a hung node: four handler threads.
constexpr std::size_t kHandlerThreads = 4;

// Compares in time that does not depend on where they differ.
bool SameSecret(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (std::size_t index = 0; index < given.size(); ++index) {
    difference |= static_cast<unsigned char>(given[index] ^ expected[index]);
  }
  return difference == 0;
}

HttpResponse Text(int status, std::string text) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(text);
  return response;
}

HttpResponse Json(std::string body) {
  HttpResponse response;
  response.content_type = "application/json";
  response.body = std::move(body);
  return response;
}

// "/api/logs/NODE/WORKER": the two numbers, or nullopt.
std::optional<std::pair<std::uint32_t, std::uint32_t>> LogPath(const std::string& path) {
  constexpr std::string_view kPrefix = "/api/logs/";
  if (path.rfind(kPrefix, 0) != 0) return std::nullopt;
  const std::string rest = path.substr(kPrefix.size());
  const std::size_t slash = rest.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const auto node = WholeNumber<std::uint32_t>(rest.substr(0, slash));
  const auto worker = WholeNumber<std::uint32_t>(rest.substr(slash + 1));
  if (!node || !worker) return std::nullopt;
  return std::pair(*node, *worker);
}

// What the login link answers: a page that keeps the session in this tab's
// sessionStorage and opens the dashboard. The session is hex (RandomSecret).
std::string LoginPage(const std::string& session) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sray "
         "login</title></head><body><p>logging in</p><script>\n"
         "sessionStorage.setItem(\"sray_session\", \"" +
         session + "\");\nlocation.replace(\"/\");\n</script></body></html>\n";
}

class ServingDashboard final : public DashboardServer {
 public:
  explicit ServingDashboard(DashboardOptions options) : options_(std::move(options)) {}
  ~ServingDashboard() override {
    while (!Stop(std::chrono::seconds(1))) {
    }
  }
  ServingDashboard(const ServingDashboard&) = delete;
  ServingDashboard& operator=(const ServingDashboard&) = delete;

  bool Stop(std::chrono::milliseconds patience) override {
    return server_ == nullptr || server_->Stop(patience);
  }

  Status Listen() {
    HttpServerOptions http;
    http.host = options_.host;
    http.port = options_.port;
    http.handler_threads = kHandlerThreads;
    http.common_headers = {{"Cache-Control", "no-store"},
                           {"X-Content-Type-Options", "nosniff"},
                           {"X-Frame-Options", "DENY"},
                           {"Referrer-Policy", "no-referrer"}};
    http.admit = [this](const HttpRequest& request) { return Admit(request); };
    http.serve = [this](const HttpRequest& request) { return Serve(request); };
    auto server = HttpServer::Listen(std::move(http));
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    return Status::Ok();
  }

  [[nodiscard]] const std::string& host() const override { return options_.host; }
  [[nodiscard]] int port() const override { return server_ ? server_->port() : -1; }
  [[nodiscard]] std::string Url() const override {
    return DashboardUrl(options_.host, port(), HostName());
  }
  [[nodiscard]] std::string LocalUrl() const override {
    return DashboardLocalUrl(options_.host, port());
  }
  [[nodiscard]] std::string UrlOf(const std::string& login_code) const {
    return Url() + "login?code=" + login_code;
  }

  std::string NewLoginUrl() override {
    auto code = NewLoginCode();
    if (!code.ok()) return Url();
    return UrlOf(*code);
  }

 private:
  // On the server's I/O thread: what needs no node (the page, logins, the
  // token check) is answered here; the rest, authorized, goes to Serve.
  std::optional<HttpResponse> Admit(const HttpRequest& request) {
    // HEAD is answered as GET is, without the body (the server leaves it out).
    const bool get = request.method == "GET" || request.method == "HEAD";
    if (request.path == "/" && get) {
      // The page holds no data (it asks the API with the tab's session), so
      // it needs no login: a tab without a session says how to get one.
      HttpResponse page = Text(200, std::string(kDashboardPage));
      page.content_type = "text/html; charset=utf-8";
      page.SetHeader("Content-Security-Policy",
                     "default-src 'self'; script-src 'unsafe-inline' 'self'; "
                     "style-src 'unsafe-inline' 'self'");
      return page;
    }
    if (request.path == "/login" && get) return Login(request);
    if (request.path == "/api/login_link" && request.method == "POST") return LoginLink(request);
    if (!Authorized(request)) {
      HttpResponse refused =
          Text(401,
               "sray: this dashboard needs the job's token: open a login link ('sray login "
               "JOB' prints one), or send 'Authorization: Bearer TOKEN' (the token is in "
               "~/.sray/jobs/JOB.STEP.json)\n");
      refused.SetHeader("WWW-Authenticate", "Bearer");
      return refused;
    }
    if (!get) {
      HttpResponse refused = Text(405, "sray: the dashboard's API is read-only: use GET\n");
      refused.SetHeader("Allow", "GET");
      return refused;
    }
    return std::nullopt;
  }

  HttpResponse Login(const HttpRequest& request) {
    if (!UseLoginCode(request.Query("code"))) {
      return Text(401,
                  "sray: this login link is unknown, used already or expired: send the job's "
                  "token as a bearer header (it is in ~/.sray/jobs/JOB.STEP.json), or run 'sray "
                  "login JOB' for a new link\n");
    }
    // A session of this server, not the token: one that leaks (a browser
    // profile) opens nothing once the job ends, and never another step. It
    // lives in the tab's sessionStorage, not a cookie: browsers send a
    // host's cookies to every port of it, where another user may listen.
    auto session = NewSession();
    if (!session.ok()) return Unavailable(session.status());
    HttpResponse page = Text(200, LoginPage(*session));
    page.content_type = "text/html; charset=utf-8";
    page.SetHeader("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'");
    return page;
  }

  // A fresh one-time login link, for `sray login`: the driver's output may
  // be a file other users can read, so it carries no link there. Only the
  // token itself (the jobs file is the job user's alone) mints one; a
  // browser's session does not, so a leaked session cannot make more.
  HttpResponse LoginLink(const HttpRequest& request) {
    if (!HasToken(request)) {
      return Text(403,
                  "sray: login links are given for the job's token only: send 'Authorization: "
                  "Bearer TOKEN' (it is in ~/.sray/jobs/JOB.STEP.json), or run 'sray login "
                  "JOB'\n");
    }
    auto code = NewLoginCode();
    if (!code.ok()) return Unavailable(code.status());
    return Json(nlohmann::json{{"url", UrlOf(*code)}}.dump());
  }

  // On a handler thread: the API, which asks the nodes.
  HttpResponse Serve(const HttpRequest& request) {
    const std::string& path = request.path;
    if (path == "/api/nodes") return Answer(&NodesJson, "application/json");
    if (path == "/api/job") return Answer(&JobJson, "application/json");
    if (path == "/api/tasks") return Answer(&TasksJson, "application/json");
    if (path == "/api/actors") return Answer(&ActorsJson, "application/json");
    if (path == "/api/placement_groups") return Answer(&PlacementGroupsJson, "application/json");
    if (path == "/api/objects") return Answer(&ObjectsJson, "application/json");
    if (path == "/api/logs") {
      auto files = options_.log_index
                       ? options_.log_index()
                       : Result<std::vector<LogFileEntry>>(std::vector<LogFileEntry>());
      if (!files.ok()) return Unavailable(files.status());
      return Json(LogIndexJson(*files));
    }
    if (path.rfind("/api/logs/", 0) == 0) {
      const auto log = LogPath(path);
      const auto offset = request.query.contains("offset")
                              ? WholeNumber<std::int64_t>(request.Query("offset"))
                              : std::optional<std::int64_t>(-1);
      if (!log || !offset || !options_.log_read) {
        return Text(400, "sray: use /api/logs/NODE/WORKER[?offset=BYTES]\n");
      }
      auto chunk = options_.log_read(log->first, log->second, *offset, 256 * 1024);
      if (!chunk.ok()) return Unavailable(chunk.status());
      return Json(LogChunkJson(*chunk));
    }
    if (path == "/api/events") {
      const auto runs = Training();
      return Answer([&runs](const ClusterSnapshot& snapshot) { return EventsJson(snapshot, runs); },
                    "application/json");
    }
    if (path == "/api/training") return Json(TrainingJson(Training()));
    if (path == "/metrics") {
      const auto runs = Training();
      return Answer(
          [&runs](const ClusterSnapshot& snapshot) { return MetricsText(snapshot, runs); },
          "text/plain; version=0.0.4; charset=utf-8");
    }
    return Text(404, "sray: the dashboard has no " + path +
                         ": its API is /api/{nodes,job,tasks,actors,placement_groups,objects,"
                         "logs,events,training} and /metrics\n");
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

  static std::string BearerOf(const HttpRequest& request) {
    const std::string authorization = request.Header("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    return authorization.rfind(kBearer, 0) == 0 ? authorization.substr(kBearer.size())
                                                : std::string();
  }

  bool HasToken(const HttpRequest& request) const {
    return SameSecret(BearerOf(request), options_.token);
  }

  // The token, or a session a login link gave.
  bool Authorized(const HttpRequest& request) const {
    const std::string bearer = BearerOf(request);
    if (bearer.empty()) return false;
    if (SameSecret(bearer, options_.token)) return true;
    std::lock_guard lock(mutex_);
    bool known = false;
    for (const std::string& session : sessions_) known |= SameSecret(bearer, session);
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

  // Every code compared in full, in time that does not depend on where a
  // guess differs from one.
  bool UseLoginCode(const std::string& code) {
    std::lock_guard lock(mutex_);
    auto used = login_codes_.end();
    for (auto entry = login_codes_.begin(); entry != login_codes_.end(); ++entry) {
      if (SameSecret(code, entry->first)) used = entry;
    }
    if (used == login_codes_.end()) return false;
    const bool fresh = used->second >= std::chrono::steady_clock::now();
    login_codes_.erase(used);
    return fresh;
  }

  static HttpResponse Unavailable(const Status& status) {
    return Text(status.code() == StatusCode::kNotFound ? 404 : 503,
                "sray: " + status.message() + "\n");
  }

  std::vector<TrainingRunSnapshot> Training() const {
    return options_.training ? options_.training() : std::vector<TrainingRunSnapshot>();
  }

  HttpResponse Answer(const std::function<std::string(const ClusterSnapshot&)>& render,
                      const char* content_type) {
    auto snapshot = options_.snapshot ? options_.snapshot()
                                      : Result<ClusterSnapshot>(Status::Unavailable("no source"));
    if (!snapshot.ok()) {
      return Text(503,
                  "sray: the job's state is not available: " + snapshot.status().message() + "\n");
    }
    HttpResponse response = Text(200, render(*snapshot));
    response.content_type = content_type;
    return response;
  }

  const DashboardOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::chrono::steady_clock::time_point> login_codes_;  // by mutex_
  std::deque<std::string> sessions_;  // the logged-in tabs' sessions, oldest first; by mutex_
  // Last: destroyed (its threads stopped) before what they use.
  std::unique_ptr<HttpServer> server_;
};

}  // namespace

Result<std::unique_ptr<DashboardServer>> DashboardServer::Start(DashboardOptions options) {
  if (options.token.empty()) return Status::InvalidArgument("the dashboard needs a token");
  auto server = std::make_unique<ServingDashboard>(std::move(options));
  const Status started = server->Listen();
  if (!started.ok()) return started;
  return std::unique_ptr<DashboardServer>(std::move(server));
}

}  // namespace sray::dashboard
