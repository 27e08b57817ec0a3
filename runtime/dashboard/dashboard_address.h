#pragma once

// The dashboard's addresses as the driver writes them (the jobs file's url
// and local_url, its own message) and as the tools read them back: one
// writer and one reader, so that what one writes the other understands.
// Pure functions of their arguments; thread-safe.

#include <optional>
#include <string>

namespace sray::dashboard {

// HOST and PORT of "http://HOST:PORT[/...]". HOST as written: a bracketed
// IPv6 address keeps its brackets, an older file's "http://:::P" gives
// "::", an empty one "". Nothing for any other text.
struct UrlAddress {
  std::string host;
  int port = 0;
};
std::optional<UrlAddress> ParseDashboardUrl(const std::string& url);

// A host that means every interface: "", 0.0.0.0, :: or [::].
bool IsWildcardHost(const std::string& host);
// 127.x.y.z, [::1], ::1 or localhost: reached on this machine only.
bool IsLoopbackHost(const std::string& host);

// The address a server bound to `host` and `port` is reached at: a wildcard
// by `machine_name`, the machine's name (every interface of it listens;
// "http://0.0.0.0:P/" read on another machine is that machine), an IPv6
// address in brackets.
std::string DashboardUrl(const std::string& host, int port, const std::string& machine_name);
// The address the same server is reached at from its own machine: a
// wildcard by the loopback (127.0.0.1, or [::1] for ::), so that the tools
// on the head need no lookup of the machine's own name (which fails on
// hosts whose name does not resolve); any other host as DashboardUrl.
std::string DashboardLocalUrl(const std::string& host, int port);

// "ssh -L P:HOST:P MACHINE": the tunnel that brings a dashboard at
// `local_url` (as its own machine reaches it) to another machine's port P;
// empty when `local_url` is not a dashboard address.
std::string SshTunnelCommand(const std::string& local_url, const std::string& machine_name);

}  // namespace sray::dashboard
