// The dashboard server over real HTTP (cpp-httplib's client), on a fixed
// snapshot: who gets in, what the API and metrics say, and the jobs file.

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "dashboard/dashboard_module.h"
#include "dashboard/dashboard_server.h"
#include "dashboard/jobs_file.h"

namespace sray::dashboard {
namespace {

ClusterSnapshot TwoNodes() {
  ClusterSnapshot snapshot;
  snapshot.job_id = "1234";
  snapshot.step_id = "0";
  snapshot.events.push_back({.unix_time = 150,
                             .node = 1,
                             .kind = "worker_exited",
                             .message = "worker process 77 of node 1 ended: signal 9 (Killed)"});
  snapshot.nodes.push_back(NodeSnapshot{
      .node_id = 0,
      .hostname = "n1",
      .total = {{"CPU", 4}, {"GPU", 1}},
      .available = {{"CPU", 1.5}, {"GPU", 1}},
      .queued_tasks = 3,
      .worker_processes = 4,
      .store_capacity = 1 << 20,
      .store_in_memory = 4096,
      .store_spilled = 0,
      .store_objects = 2,
      .load_average_1m = 0.75,
      .memory_total_bytes = std::uint64_t{8} << 30,
      .memory_available_bytes = std::uint64_t{5} << 30,
      .resident_bytes = 64 << 20,
      .tasks =
          {{.function = "square", .queued = 5, .running = 2, .finished = 40, .failed = 1},
           {.function = "Counter::Create", .queued = 0, .running = 0, .finished = 0, .failed = 1}},
      .error = ""});
  snapshot.nodes.push_back(NodeSnapshot{.node_id = 1,
                                        .hostname = "n2",
                                        .total = {},
                                        .available = {},
                                        .queued_tasks = 0,
                                        .worker_processes = 0,
                                        .store_capacity = 0,
                                        .store_in_memory = 0,
                                        .store_spilled = 0,
                                        .store_objects = 0,
                                        .tasks = {},
                                        .error = "no reply from rank 2"});
  snapshot.nodes.push_back(NodeSnapshot{
      .node_id = 2,
      .hostname = "n3",
      .total = {{"CPU", 2}},
      .available = {{"CPU", 2}},
      .queued_tasks = 0,
      .worker_processes = 1,
      .store_capacity = 1 << 20,
      .store_in_memory = 1000,
      .store_spilled = 500,
      .store_objects = 3,
      .tasks = {{.function = "square", .queued = 1, .running = 1, .finished = 2, .failed = 0}},
      .error = ""});
  snapshot.actors.push_back(ActorSnapshot{.id = 1,
                                          .name = "counter",
                                          .class_name = "Counter::Create",
                                          .state = "alive",
                                          .node = 2,
                                          .worker = 1073872896,
                                          .hostname = "n3",
                                          .pid = 4242,
                                          .restarts = 1,
                                          .max_restarts = 3,
                                          .resources = {{"CPU", 1}},
                                          .placement_group = 0,
                                          .cause = "its process (pid 4100) on node 2 ended"});
  snapshot.actors.push_back(ActorSnapshot{.id = 2,
                                          .name = "",
                                          .class_name = "Counter::Create",
                                          .state = "dead",
                                          .node = 0,
                                          .worker = 0,
                                          .hostname = "",
                                          .pid = 0,
                                          .restarts = 0,
                                          .max_restarts = 0,
                                          .resources = {},
                                          .placement_group = 7,
                                          .cause = "its constructor threw"});
  snapshot.actors_total = 5;
  snapshot.placement_groups.push_back(
      PlacementGroupSnapshot{.id = 7,
                             .name = "trainers",
                             .strategy = "STRICT_SPREAD",
                             .state = "placed",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                             .bundle_nodes = {0, 2}});
  snapshot.placement_groups_total = 1;
  return snapshot;
}

std::vector<TrainingRunSnapshot> OneRun() {
  TrainingRunSnapshot run;
  run.name = "mnist";
  run.state = "running";
  run.num_workers = 2;
  run.restarts = 1;
  run.points.push_back(TrainingPoint{.report = 1,
                                     .attempt = 0,
                                     .unix_time = 100,
                                     .samples_per_second = 900,
                                     .metrics = {{"loss", 0.9}, {"accuracy", 0.7}},
                                     .checkpoint = "checkpoint_000000"});
  run.points.push_back(TrainingPoint{.report = 2,
                                     .attempt = 1,
                                     .unix_time = 160,
                                     .samples_per_second = 0,
                                     .metrics = {{"loss", 0.5}, {"accuracy", 0.8}},
                                     .checkpoint = ""});
  return {run};
}

// The session a login page stores in its tab.
std::string SessionIn(const std::string& login_page) {
  const std::string before = "sessionStorage.setItem(\"sray_session\", \"";
  const std::size_t start = login_page.find(before);
  if (start == std::string::npos) return {};
  const std::size_t end = login_page.find('"', start + before.size());
  return login_page.substr(start + before.size(), end - start - before.size());
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DashboardOptions options;
    options.token = "secret-token";
    options.snapshot = [this]() -> Result<ClusterSnapshot> {
      if (!source_error_.empty()) return Status::Unavailable(source_error_);
      return TwoNodes();
    };
    options.training = [] { return OneRun(); };
    options.log_index = []() -> Result<std::vector<LogFileEntry>> {
      return std::vector<LogFileEntry>{{.node = 0, .worker = 7, .bytes = 12},
                                       {.node = 1, .worker = 9, .bytes = 0}};
    };
    options.log_read = [](std::uint32_t node, std::uint32_t worker, std::int64_t offset,
                          std::uint64_t) -> Result<LogChunk> {
      if (worker != 7) return Status::NotFound("worker " + std::to_string(worker) + " has no log");
      return LogChunk{.node = node,
                      .worker = worker,
                      .offset = offset < 0 ? 0 : static_cast<std::uint64_t>(offset),
                      .size = 12,
                      .data = "line\n\xff bad\n"};
    };
    auto server = DashboardServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }

  httplib::Result GetWith(const std::string& path, const httplib::Headers& headers) {
    return client_->Get(path, headers);
  }
  httplib::Result GetWithToken(const std::string& path) {
    return client_->Get(path, {{"Authorization", "Bearer secret-token"}});
  }

  std::string source_error_;
  std::unique_ptr<DashboardServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DashboardTest, ListensOnTheLoopbackOnAFreePort) {
  EXPECT_EQ(server_->host(), "127.0.0.1");
  EXPECT_GT(server_->port(), 0);
  EXPECT_EQ(server_->Url(), "http://127.0.0.1:" + std::to_string(server_->port()) + "/");
}

TEST_F(DashboardTest, EveryPathAnswers401WithoutTheRightToken) {
  for (const std::string path :
       {"/api/nodes", "/api/job", "/api/tasks", "/api/actors", "/api/placement_groups",
        "/api/objects", "/api/logs", "/api/logs/0/7", "/metrics", "/anything"}) {
    auto missing = GetWith(path, {});
    ASSERT_TRUE(missing) << path;
    EXPECT_EQ(missing->status, 401) << path;
    EXPECT_NE(missing->body.find("needs the job's token"), std::string::npos);
    EXPECT_EQ(missing->get_header_value("Cache-Control"), "no-store");
    auto wrong = GetWith(path, {{"Authorization", "Bearer secret-tokem"}});
    EXPECT_EQ(wrong->status, 401) << path;
    auto empty = GetWith(path, {{"Authorization", "Bearer "}});
    EXPECT_EQ(empty->status, 401) << path;
    // Cookies open nothing: browsers send them to every port of the host.
    auto cookie = GetWith(path, {{"Cookie", "sray_1234_0=secret-token"}});
    EXPECT_EQ(cookie->status, 401) << path;
  }
}

// The page holds no data and is served to anyone; it asks the API with the
// session its tab keeps, which a cookie-less origin-bound store holds.
TEST_F(DashboardTest, ThePageIsServedWithoutLoginAndHoldsNoSecret) {
  auto page = GetWith("/", {});
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  EXPECT_EQ(page->body.find("secret-token"), std::string::npos);
  EXPECT_NE(page->body.find("sessionStorage.getItem(\"sray_session\")"), std::string::npos);
  EXPECT_NE(page->body.find("sray login JOB"), std::string::npos) << "says how to log in";
  for (const std::string part :
       {"<table id=\"nodes\">", "<table id=\"tasks\">", "<table id=\"actors\">",
        "<table id=\"groups\">", "<select id=\"log-file\">", "<ul id=\"events\">"}) {
    EXPECT_NE(page->body.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(client_->Post("/", "", "text/plain")->status, 401);
}

TEST_F(DashboardTest, TheApiDescribesEveryNode) {
  auto response = GetWithToken("/api/nodes");
  ASSERT_TRUE(response);
  ASSERT_EQ(response->status, 200);
  EXPECT_EQ(response->get_header_value("Cache-Control"), "no-store");
  const auto json = nlohmann::json::parse(response->body);
  EXPECT_EQ(json["job_id"], "1234");
  ASSERT_EQ(json["nodes"].size(), 3U);
  EXPECT_EQ(json["nodes"][0]["resources_available"]["CPU"], 1.5);
  EXPECT_EQ(json["nodes"][0]["queued_tasks"], 3);
  EXPECT_EQ(json["nodes"][0]["object_store"]["in_memory_bytes"], 4096);
  EXPECT_EQ(json["nodes"][0]["load"]["load_average_1m"], 0.75);
  EXPECT_EQ(json["nodes"][0]["load"]["memory_available_bytes"], std::uint64_t{5} << 30);
  EXPECT_EQ(json["nodes"][0]["load"]["memory_total_bytes"], std::uint64_t{8} << 30);
  EXPECT_EQ(json["nodes"][0]["load"]["sray_resident_bytes"], 64 << 20);
  EXPECT_EQ(json["nodes"][1]["error"], "no reply from rank 2");
  auto job = GetWithToken("/api/job");
  EXPECT_EQ(nlohmann::json::parse(job->body)["nodes"], 3);
}

TEST_F(DashboardTest, MetricsAreLabelledWithJobStepAndNode) {
  auto response = GetWithToken("/metrics");
  ASSERT_TRUE(response);
  ASSERT_EQ(response->status, 200);
  EXPECT_NE(response->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  const std::string& text = response->body;
  EXPECT_NE(text.find("# TYPE sray_node_queued_tasks gauge\n"), std::string::npos);
  EXPECT_NE(text.find("sray_node_resource_available{job=\"1234\",step=\"0\",node=\"0\",resource="
                      "\"CPU\"} 1.5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sray_node_load_average_1m{job=\"1234\",step=\"0\",node=\"0\"} 0.75\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sray_node_resident_bytes{job=\"1234\",step=\"0\",node=\"0\"} 67108864\n"),
            std::string::npos);
  // An unknown load average has no sample.
  EXPECT_EQ(text.find("sray_node_load_average_1m{job=\"1234\",step=\"0\",node=\"2\"}"),
            std::string::npos);
  // A node that did not answer has no samples rather than zeros.
  EXPECT_EQ(text.find("node=\"1\""), std::string::npos);
}

TEST_F(DashboardTest, TasksAreCountedByStateByFunctionAndByNode) {
  auto response = GetWithToken("/api/tasks");
  ASSERT_TRUE(response);
  ASSERT_EQ(response->status, 200);
  const auto tasks = nlohmann::json::parse(response->body);
  EXPECT_EQ(tasks["by_state"],
            nlohmann::json({{"queued", 6}, {"running", 3}, {"finished", 42}, {"failed", 2}}));
  ASSERT_EQ(tasks["by_function"].size(), 2U);
  EXPECT_EQ(tasks["by_function"][0]["function"], "Counter::Create");  // sorted by name
  EXPECT_EQ(tasks["by_function"][1]["function"], "square");
  EXPECT_EQ(tasks["by_function"][1]["queued"], 6);
  EXPECT_EQ(tasks["by_function"][1]["finished"], 42);
  ASSERT_EQ(tasks["by_node"].size(), 3U);
  EXPECT_EQ(tasks["by_node"][0]["failed"], 2);
  EXPECT_EQ(tasks["by_node"][1]["error"], "no reply from rank 2");
  EXPECT_EQ(tasks["by_node"][2]["running"], 1);
  EXPECT_EQ(GetWith("/api/tasks", {})->status, 401);
}

TEST_F(DashboardTest, ActorsShowStateNodeLogAndRestarts) {
  auto response = GetWithToken("/api/actors");
  ASSERT_EQ(response->status, 200);
  const auto actors = nlohmann::json::parse(response->body);
  EXPECT_EQ(actors["total"], 5);
  EXPECT_EQ(actors["listed_by_state"], nlohmann::json({{"alive", 1}, {"dead", 1}}));
  ASSERT_EQ(actors["actors"].size(), 2U);
  const auto& counter = actors["actors"][0];
  EXPECT_EQ(counter["name"], "counter");
  EXPECT_EQ(counter["class"], "Counter::Create");
  EXPECT_EQ(counter["node"], 2);
  EXPECT_EQ(counter["worker"], 1073872896);
  EXPECT_EQ(counter["pid"], 4242);
  EXPECT_EQ(counter["restarts"], 1);
  EXPECT_EQ(counter["max_restarts"], 3);
  EXPECT_EQ(counter["resources"]["CPU"], 1);
  EXPECT_FALSE(counter.contains("placement_group"));
  EXPECT_EQ(actors["actors"][1]["placement_group"], 7);
  EXPECT_EQ(actors["actors"][1]["cause"], "its constructor threw");
}

TEST_F(DashboardTest, PlacementGroupsAndObjectsAreListed) {
  auto groups = nlohmann::json::parse(GetWithToken("/api/placement_groups")->body);
  EXPECT_EQ(groups["total"], 1);
  ASSERT_EQ(groups["placement_groups"].size(), 1U);
  EXPECT_EQ(groups["placement_groups"][0]["strategy"], "STRICT_SPREAD");
  EXPECT_EQ(groups["placement_groups"][0]["bundle_nodes"], nlohmann::json({0, 2}));
  EXPECT_EQ(groups["placement_groups"][0]["bundles"][1]["CPU"], 1);
  auto objects = nlohmann::json::parse(GetWithToken("/api/objects")->body);
  EXPECT_EQ(objects["objects"], 5);
  EXPECT_EQ(objects["in_memory_bytes"], 5096);
  EXPECT_EQ(objects["spilled_bytes"], 500);
  ASSERT_EQ(objects["nodes"].size(), 3U);
  EXPECT_EQ(objects["nodes"][2]["spilled_bytes"], 500);
  EXPECT_EQ(objects["nodes"][1]["error"], "no reply from rank 2");
}

TEST_F(DashboardTest, MetricsCountTasksActorsAndPlacementGroups) {
  const std::string text = GetWithToken("/metrics")->body;
  const std::string labels = "job=\"1234\",step=\"0\"";
  for (const std::string& sample :
       {"sray_tasks{" + labels + ",function=\"square\",state=\"queued\"} 6\n",
        "sray_tasks{" + labels + ",function=\"square\",state=\"running\"} 3\n",
        "sray_task_attempts_total{" + labels + ",function=\"square\",state=\"finished\"} 42\n",
        "sray_task_attempts_total{" + labels +
            ",function=\"Counter::Create\",state=\"failed\"} 1\n",
        "sray_actors{" + labels + ",state=\"alive\"} 1\n",
        "sray_actors{" + labels + ",state=\"restarting\"} 0\n",
        "sray_placement_groups{" + labels + ",state=\"placed\"} 1\n"}) {
    EXPECT_NE(text.find(sample), std::string::npos) << sample << " not in\n" << text;
  }
  EXPECT_NE(text.find("# TYPE sray_task_attempts_total counter\n"), std::string::npos);
}

TEST_F(DashboardTest, TheTrainingApiHasEveryReportOfEveryRun) {
  auto response = GetWithToken("/api/training");
  ASSERT_TRUE(response);
  ASSERT_EQ(response->status, 200);
  const auto runs = nlohmann::json::parse(response->body)["runs"];
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0]["name"], "mnist");
  EXPECT_EQ(runs[0]["restarts"], 1);
  ASSERT_EQ(runs[0]["points"].size(), 2U);
  EXPECT_EQ(runs[0]["points"][0]["metrics"]["loss"], 0.9);
  EXPECT_EQ(runs[0]["points"][0]["samples_per_second"], 900);
  EXPECT_EQ(runs[0]["points"][0]["checkpoint"], "checkpoint_000000");
  EXPECT_FALSE(runs[0]["points"][1].contains("samples_per_second"));  // not known
  EXPECT_EQ(GetWith("/api/training", {})->status, 401);
}

TEST_F(DashboardTest, LogsAreListedAndReadWithTextThatIsNotUtf8Replaced) {
  auto listed = GetWithToken("/api/logs");
  ASSERT_EQ(listed->status, 200);
  const auto logs = nlohmann::json::parse(listed->body)["logs"];
  ASSERT_EQ(logs.size(), 2U);
  EXPECT_EQ(logs[0]["worker"], 7);
  auto read = GetWithToken("/api/logs/0/7?offset=3");
  ASSERT_EQ(read->status, 200);
  const auto chunk = nlohmann::json::parse(read->body);
  EXPECT_EQ(chunk["offset"], 3);
  EXPECT_EQ(chunk["data"], "line\n\xef\xbf\xbd bad\n");
  EXPECT_EQ(GetWithToken("/api/logs/0/8")->status, 404);
  EXPECT_EQ(GetWithToken("/api/logs/0/7?offset=x")->status, 400);
  EXPECT_EQ(GetWith("/api/logs/0/7", {})->status, 401);
}

TEST_F(DashboardTest, EventsOfNodesAndTrainingRunsComeInTimeOrder) {
  auto response = GetWithToken("/api/events");
  ASSERT_EQ(response->status, 200);
  const auto events = nlohmann::json::parse(response->body)["events"];
  std::vector<std::string> kinds;
  for (const auto& event : events) kinds.push_back(event["kind"]);
  // The run started at 0, the worker died at 150, the run restarted at 160.
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"training_started", "worker_exited", "training_restarted"}));
  EXPECT_EQ(events[1]["node"], 1);
  EXPECT_FALSE(events[0].contains("node"));
}

TEST_F(DashboardTest, MetricsCarryEachRunsLastReport) {
  const std::string text = GetWithToken("/metrics")->body;
  EXPECT_NE(
      text.find(
          "sray_training_metric{job=\"1234\",step=\"0\",run=\"mnist\",metric=\"loss\"} 0.5\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("sray_training_reports{job=\"1234\",step=\"0\",run=\"mnist\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("sray_training_restarts{job=\"1234\",step=\"0\",run=\"mnist\"} 1\n"),
            std::string::npos);
}

TEST_F(DashboardTest, ALoginLinkGivesItsTabASessionOnceAndTheSessionOpensTheApi) {
  const std::string link = server_->NewLoginUrl();
  const std::string path = link.substr(link.find("/login"));
  auto first = GetWith(path, {});
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  EXPECT_FALSE(first->has_header("Set-Cookie"));
  const std::string session = SessionIn(first->body);
  EXPECT_EQ(session.size(), 64U) << first->body;
  EXPECT_EQ(session.find("secret-token"), std::string::npos) << "the session is not the token";
  EXPECT_NE(first->body.find("location.replace(\"/\")"), std::string::npos) << first->body;
  auto again = GetWith(path, {});
  EXPECT_EQ(again->status, 401);  // used up
  EXPECT_EQ(GetWith("/api/nodes", {{"Authorization", "Bearer " + session}})->status, 200);
  EXPECT_EQ(GetWith("/api/nodes", {{"Cookie", "sray_session=" + session}})->status, 401);
  // Sessions are bounded: 64 later logins end the first one.
  for (int login = 0; login < 64; ++login) {
    const std::string another = server_->NewLoginUrl();
    EXPECT_EQ(GetWith(another.substr(another.find("/login")), {})->status, 200);
  }
  EXPECT_EQ(GetWith("/api/nodes", {{"Authorization", "Bearer " + session}})->status, 401);
  EXPECT_EQ(GetWith("/login?code=00ff", {})->status, 401);
  EXPECT_EQ(GetWith("/login", {})->status, 401);
}

TEST_F(DashboardTest, OnlyTheTokenMintsLoginLinksAndEachWorksOnce) {
  EXPECT_EQ(client_->Post("/api/login_link", "", "text/plain")->status, 403);
  EXPECT_EQ(
      client_->Post("/api/login_link", {{"Authorization", "Bearer secret-tokem"}}, "", "text/plain")
          ->status,
      403);
  auto minted =
      client_->Post("/api/login_link", {{"Authorization", "Bearer secret-token"}}, "", "text/plain");
  ASSERT_TRUE(minted);
  ASSERT_EQ(minted->status, 200) << minted->body;
  const std::string link = nlohmann::json::parse(minted->body).at("url").get<std::string>();
  ASSERT_EQ(link.rfind(server_->Url() + "login?code=", 0), 0U) << link;
  auto login = GetWith(link.substr(link.find("/login")), {});
  ASSERT_EQ(login->status, 200);
  const std::string session = SessionIn(login->body);
  EXPECT_EQ(GetWith(link.substr(link.find("/login")), {})->status, 401);
  // A logged-in tab reads the job but cannot mint further links.
  EXPECT_EQ(GetWith("/api/nodes", {{"Authorization", "Bearer " + session}})->status, 200);
  auto from_session =
      client_->Post("/api/login_link", {{"Authorization", "Bearer " + session}}, "", "text/plain");
  EXPECT_EQ(from_session->status, 403);
  EXPECT_NE(from_session->body.find("sray login"), std::string::npos) << from_session->body;
  // The API is read-only, to the token too.
  auto post =
      client_->Post("/api/nodes", {{"Authorization", "Bearer secret-token"}}, "", "text/plain");
  EXPECT_EQ(post->status, 405);
}

// A TCP connection to the dashboard that sends what it is told, slowly.
class DashboardSlowClient {
 public:
  explicit DashboardSlowClient(int port)
      : socket_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)::connect(socket_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  ~DashboardSlowClient() { ::close(socket_); }
  DashboardSlowClient(const DashboardSlowClient&) = delete;
  DashboardSlowClient& operator=(const DashboardSlowClient&) = delete;
  void Send(const std::string& bytes) {
    (void)::send(socket_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  // Blocks until the server took it all, or closed the connection.
  void SendAll(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t wrote = ::send(socket_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (wrote <= 0) return;
      sent += static_cast<std::size_t>(wrote);
    }
  }
  std::string ReceiveAll() {
    timeval patience{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(socket_, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
    std::string received;
    char piece[4096];
    ssize_t got = 0;
    while ((got = ::recv(socket_, piece, sizeof(piece), 0)) > 0) {
      received.append(piece, static_cast<std::size_t>(got));
    }
    return received;
  }

 private:
  int socket_;
};

// Clients without the token that send a request a byte at a time, more of
// them than the server has threads or keeps connections, do not shut the
// token's holder out (cpp-httplib's server gave each a thread while it sent).
TEST_F(DashboardTest, SlowClientsWithoutTheTokenDoNotShutOutItsHolder) {
  std::vector<std::unique_ptr<DashboardSlowClient>> slow;
  for (int index = 0; index < 80; ++index) {
    slow.push_back(std::make_unique<DashboardSlowClient>(server_->port()));
    slow.back()->Send("GET /api/nodes HTTP/1.1\r\nX-Slow: ");
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done.load()) {
      for (auto& client : slow) client->Send("a");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  httplib::Client holder("127.0.0.1", server_->port());
  holder.set_read_timeout(3, 0);
  const auto started = std::chrono::steady_clock::now();
  auto response = holder.Get("/api/nodes", {{"Authorization", "Bearer secret-token"}});
  const auto took = std::chrono::steady_clock::now() - started;
  done.store(true);
  trickle.join();
  ASSERT_TRUE(response) << "no answer: " << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 200);
  EXPECT_LT(took, std::chrono::seconds(2));
}

// Headers are bounded before the token is checked: a client cannot make the
// job's driver hold more than a request's worth of them.
TEST_F(DashboardTest, AnEndlessRequestHeadIsRefusedWith431) {
  DashboardSlowClient client(server_->port());
  std::string flood = "GET /api/nodes HTTP/1.1\r\n";
  while (flood.size() < 1024 * 1024) flood += "X-Flood: " + std::string(100, 'a') + "\r\n";
  std::thread sender([&] { client.SendAll(flood); });
  const std::string response = client.ReceiveAll();
  sender.join();
  EXPECT_EQ(response.rfind("HTTP/1.1 431 ", 0), 0U) << response.substr(0, 300);
  EXPECT_NE(response.find("sray: the dashboard refused the request: the request's head is larger "
                          "than 16384 bytes"),
            std::string::npos)
      << response.substr(0, 300);
}

// HEAD is answered as GET is, without the body: to the token, and to the page.
TEST_F(DashboardTest, HeadIsAnsweredAsGetWithoutTheBody) {
  auto head = client_->Head("/api/nodes", {{"Authorization", "Bearer secret-token"}});
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_NE(head->get_header_value("Content-Length"), "0");
  EXPECT_EQ(client_->Head("/api/nodes")->status, 401);
  EXPECT_EQ(client_->Head("/")->status, 200);
}

TEST_F(DashboardTest, AStateThatCannotBeGatheredIs503WithTheReason) {
  source_error_ = "node 2 is gone";
  auto response = GetWithToken("/api/nodes");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 503);
  EXPECT_NE(response->body.find("node 2 is gone"), std::string::npos);
}

TEST_F(DashboardTest, ATakenPortIsAClearError) {
  DashboardOptions options;
  options.port = server_->port();
  options.token = "t";
  auto second = DashboardServer::Start(std::move(options));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("dashboard=HOST:PORT, or dashboard=off"),
            std::string::npos)
      << second.status().message();
}

TEST(DashboardLogin, AnExpiredLinkIsRefusedAndSaysSo) {
  DashboardOptions options;
  options.token = "secret-token";
  options.login_link_lifetime = std::chrono::milliseconds(100);
  auto server = DashboardServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().message();
  httplib::Client client("127.0.0.1", (*server)->port());
  const std::string fresh = (*server)->NewLoginUrl();
  const std::string stale = (*server)->NewLoginUrl();
  EXPECT_EQ(client.Get(fresh.substr(fresh.find("/login")))->status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto expired = client.Get(stale.substr(stale.find("/login")));
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, 401);
  EXPECT_NE(expired->body.find("expired"), std::string::npos) << expired->body;
  EXPECT_NE(expired->body.find("sray login"), std::string::npos) << expired->body;
}

// The job's end must not wait for ever on a request that never finishes
// (a snapshot stuck on a node): Stop gives up after its patience, and ends
// the server once the request is done.
TEST(DashboardStopPatience, StopGivesUpWhileARequestIsStuckAndSucceedsAfterIt) {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false;
  bool released = false;
  DashboardOptions options;
  options.token = "secret-token";
  options.snapshot = [&]() -> Result<ClusterSnapshot> {
    std::unique_lock lock(mutex);
    entered = true;
    changed.notify_all();
    changed.wait(lock, [&] { return released; });
    return Status::Unavailable("released");
  };
  auto server = DashboardServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::thread request([port = (*server)->port()] {
    httplib::Client client("127.0.0.1", port);
    (void)client.Get("/api/nodes", {{"Authorization", "Bearer secret-token"}});
  });
  bool stuck = false;
  {
    std::unique_lock lock(mutex);
    stuck = changed.wait_for(lock, std::chrono::seconds(10), [&] { return entered; });
  }
  if (stuck) {
    const auto started = std::chrono::steady_clock::now();
    EXPECT_FALSE((*server)->Stop(std::chrono::milliseconds(200)));
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  } else {
    ADD_FAILURE() << "the request never reached the snapshot";
  }
  {
    std::lock_guard lock(mutex);
    released = true;
  }
  changed.notify_all();
  EXPECT_TRUE((*server)->Stop(std::chrono::seconds(10)));
  request.join();
}

TEST(JobsFile, IsPrivateToTheUserAndGoesWithTheStep) {
  const auto home = std::filesystem::temp_directory_path() /
                    ("sray-jobs-file-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(home);
  std::filesystem::path path;
  {
    auto file = JobsFile::Write(home, JobsFileContent{.job_id = "77",
                                                      .step_id = "1",
                                                      .url = "http://n1:5/",
                                                      .local_url = "http://127.0.0.1:5/",
                                                      .token = "abc",
                                                      .head_hostname = "n1",
                                                      .pid = 42,
                                                      .cluster = "sray"});
    ASSERT_TRUE(file.ok()) << file.status().message();
    path = (*file)->path();
    EXPECT_EQ(path, home / ".sray" / "jobs" / "77.1.json");
    struct stat info {};
    ASSERT_EQ(::stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600U);
    ASSERT_EQ(::stat((home / ".sray" / "jobs").c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700U);
    std::ifstream input(path);
    const auto json = nlohmann::json::parse(input);
    EXPECT_EQ(json["token"], "abc");
    EXPECT_EQ(json["url"], "http://n1:5/");
    ASSERT_EQ(ListJobs(home).size(), 1U);
    EXPECT_EQ(ListJobs(home).front().local_url, "http://127.0.0.1:5/") << "read back as written";
    EXPECT_EQ(ListJobs(home).front().cluster, "sray") << "read back as written";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  // A jobs directory others can enter is refused, not used.
  std::filesystem::permissions(home / ".sray" / "jobs", std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  auto refused = JobsFile::Write(home, JobsFileContent{.job_id = "77",
                                                       .step_id = "2",
                                                       .url = "",
                                                       .local_url = "",
                                                       .token = "",
                                                       .head_hostname = "",
                                                       .pid = 0,
                                                       .cluster = ""});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not a directory private to this user"),
            std::string::npos);
  std::filesystem::remove_all(home);
}

// A hand-edited file or another version's, a FIFO named *.json: skipped,
// where they threw out of every tool ("unexpected error") or hung it.
TEST(JobsFile, FilesThatAreNotJobsFilesAreSkipped) {
  const auto home = std::filesystem::temp_directory_path() /
                    ("sray-jobs-list-test-" + std::to_string(::getpid()));
  const auto jobs = home / ".sray" / "jobs";
  std::filesystem::create_directories(jobs);
  std::ofstream(jobs / "typed.0.json")
      << R"({"job_id": 5, "step_id": "0", "url": "http://h:1/", "token": "t", "pid": "x"})";
  std::ofstream(jobs / "list.0.json") << "[1, 2]";
  ASSERT_EQ(::mkfifo((jobs / "fifo.0.json").c_str(), 0600), 0);
  std::ofstream(jobs / "good.0.json")
      << R"({"job_id": "good", "step_id": "0", "url": "http://h:1/",)"
      << R"( "token": "t", "head_hostname": "h", "pid": "not a number"})";
  std::vector<JobsFileContent> listed;
  ASSERT_NO_THROW(listed = ListJobs(home));
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].job_id, "good");
  EXPECT_EQ(listed[0].pid, 0);
  std::filesystem::remove_all(home);
}

// A driver started with HOME=/elsewhere wrote its jobs file there; the
// cleanup after it was killed (slurmstepd's user child, the launcher) looked
// in its own home, and `sray status` listed the dead job for ever.
TEST(JobsFile, TheCleanupFindsAKilledDriversFileUnderTheHomeItNoted) {
  const auto root = std::filesystem::temp_directory_path() /
                    ("sray-noted-home-test-" + std::to_string(::getpid()));
  const auto session = root / "session";
  const auto driver_home = root / "elsewhere";
  std::filesystem::create_directories(session);
  std::filesystem::create_directories(driver_home);
  RemoveNotedJobsFile(session, "78", "0");  // no note: nothing to do, nothing fails
  ASSERT_TRUE(NoteJobsFileHome(session, driver_home).ok());
  // What a driver killed before its JobsFile went leaves.
  const std::filesystem::path path = driver_home / ".sray" / "jobs" / "78.0.json";
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << R"({"job_id": "78", "step_id": "0"})";
  RemoveNotedJobsFile(session, "77", "0");  // another step's: stays
  EXPECT_TRUE(std::filesystem::exists(path));
  RemoveNotedJobsFile(session, "78", "0");
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(root);
}

// The server's module is looked for beside the library (here the test
// program, which has none beside it): its absence is said with the path and
// the fix, and asked again it is said again, not a crash.
TEST(DashboardModule, AMissingModuleIsNamedWithItsPathAndTheFix) {
  DashboardOptions options;
  options.token = "t";
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto server = StartDashboardServer(options);
    ASSERT_FALSE(server.ok());
    const std::string& message = server.status().message();
    const auto expected_path =
        (std::filesystem::canonical("/proc/self/exe").parent_path() / kDashboardModuleName)
            .string();
    EXPECT_NE(message.find("cannot load the dashboard's module: " + expected_path),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("reinstall sray (libsray_dashboard.so belongs beside libsray.so), or "
                           "set dashboard=off"),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace sray::dashboard
