#pragma once

// The job's dashboard: an HTTP server (dashboard/http_server.h) on the head
// node that serves a read-only JSON API (/api/...) and Prometheus metrics
// (/metrics) to requests that carry the job's token, or a session a one-time
// login link gave a browser tab (a random id of this server, never the
// token), as 'Authorization: Bearer ...'; and the page (/), which holds no
// data, to anyone. Nothing served runs code or changes the job. Binds to the
// head's loopback by default.
//
// Thread-safety: NewLoginUrl may be called from any thread; requests are
// served on the server's own threads, which call `snapshot`.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "dashboard/cluster_snapshot.h"

namespace sray::dashboard {

struct DashboardOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  std::string token;
  // How long a login link may wait to be opened.
  std::chrono::milliseconds login_link_lifetime = std::chrono::minutes(10);
  // Called for every API request, on a server thread; may block.
  std::function<Result<ClusterSnapshot>()> snapshot;
  std::function<std::vector<TrainingRunSnapshot>()> training;
  // Workers' log files, and a piece of one (offset < 0: its end).
  std::function<Result<std::vector<LogFileEntry>>()> log_index;
  std::function<Result<LogChunk>(std::uint32_t node, std::uint32_t worker, std::int64_t offset,
                                 std::uint64_t max_bytes)>
      log_read;
};

// The server as the runtime sees it. Its implementation lives in
// libsray_dashboard.so, which only the
// head loads (dashboard_module.h): every rank and worker loads libsray, and
// only the head needs the server. (When the server was cpp-httplib with
// OpenSSL behind it, linking it into libsray cost each process about 4 ms of
// CPU at its start.)

class DashboardServer {
 public:
  // Listening when it returns; an error names the address and the fix.
  // Defined where the server is built in (the module, the unit tests).
  static Result<std::unique_ptr<DashboardServer>> Start(DashboardOptions options);
  // Stops serving and joins the server's threads, however long that takes:
  // call Stop first where the wait must be bounded.
  virtual ~DashboardServer() = default;
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  [[nodiscard]] virtual const std::string& host() const = 0;
  [[nodiscard]] virtual int port() const = 0;
  // http://HOST:PORT/ (dashboard_address.h: DashboardUrl)
  [[nodiscard]] virtual std::string Url() const = 0;
  // From this machine (DashboardLocalUrl).
  [[nodiscard]] virtual std::string LocalUrl() const = 0;
  // A link that logs one browser tab in once, within the
  // options' login_link_lifetime.
  virtual std::string NewLoginUrl() = 0;
  // Stops serving; true once the server's threads have ended, false if
  // they had not within `patience`. Then destroying this object would wait
  // for them: a caller that must not hang (the job's end) lets it go instead.
  virtual bool Stop(std::chrono::milliseconds patience) = 0;

 protected:
  DashboardServer() = default;
};

// A fresh random secret: `bytes` bytes from getrandom, as hex.
Result<std::string> RandomSecret(std::size_t bytes);

}  // namespace sray::dashboard
