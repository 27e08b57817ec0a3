#include "dashboard/dashboard_address.h"

#include <charconv>
#include <string_view>

namespace sray::dashboard {

std::optional<UrlAddress> ParseDashboardUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return std::nullopt;
  const std::string_view rest = std::string_view(url).substr(kScheme.size());
  const std::string_view authority = rest.substr(0, rest.find('/'));
  const auto colon = authority.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == authority.size()) return std::nullopt;
  const std::string_view host = authority.substr(0, colon);
  // "http://[::1]" has no port: its last colon is inside the brackets.
  if (host.find('[') != std::string_view::npos && !host.ends_with(']')) return std::nullopt;
  const std::string_view digits = authority.substr(colon + 1);
  int port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return UrlAddress{.host = std::string(host), .port = port};
}

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

bool IsLoopbackHost(const std::string& host) {
  const bool ipv4_loopback =
      host.starts_with("127.") && host.find_first_not_of("0123456789.") == std::string::npos;
  return ipv4_loopback || host == "[::1]" || host == "::1" || host == "localhost";
}

std::string DashboardUrl(const std::string& host, int port, const std::string& machine_name) {
  std::string reached = host;
  if (IsWildcardHost(host)) {
    reached = machine_name;
  } else if (host.find(':') != std::string::npos && host.front() != '[') {
    reached = "[" + host + "]";
  }
  return "http://" + reached + ":" + std::to_string(port) + "/";
}

std::string DashboardLocalUrl(const std::string& host, int port) {
  if (host == "::" || host == "[::]") return DashboardUrl("::1", port, "");
  if (IsWildcardHost(host)) return DashboardUrl("127.0.0.1", port, "");
  return DashboardUrl(host, port, "");
}

std::string SshTunnelCommand(const std::string& local_url, const std::string& machine_name) {
  const std::optional<UrlAddress> address = ParseDashboardUrl(local_url);
  if (!address || IsWildcardHost(address->host)) return {};
  const std::string port = std::to_string(address->port);
  return "ssh -L " + port + ":" + address->host + ":" + port + " " + machine_name;
}

}  // namespace sray::dashboard
