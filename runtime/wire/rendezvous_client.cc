#include "wire/rendezvous_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/file_descriptor.h"

namespace sray::wire::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;

int MillisecondsUntil(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

// 0 when `fd` became ready for `events` before `deadline`, else the errno
// (ETIMEDOUT when the time ran out).
int WaitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    if (Clock::now() >= deadline) return ETIMEDOUT;
    pollfd watched{.fd = fd, .events = events, .revents = 0};
    const int ready = ::poll(&watched, 1, MillisecondsUntil(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (ready > 0) return 0;
  }
}

Result<std::unique_ptr<FileDescriptor>> Connect(const std::string& host, std::uint16_t port,
                                                Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int resolved = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (resolved != 0)
    return Status::Unavailable("cannot resolve " + host + ": " + ::gai_strerror(resolved));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  int last_error = EHOSTUNREACH;
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    auto socket = std::make_unique<FileDescriptor>(
        ::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 address->ai_protocol));
    if (socket->get() < 0) {
      last_error = errno;
      continue;
    }
    if (::connect(socket->get(), address->ai_addr, address->ai_addrlen) == 0) return socket;
    if (errno != EINPROGRESS) {
      last_error = errno;
      continue;
    }
    last_error = WaitFor(socket->get(), POLLOUT, deadline);
    if (last_error == 0) {
      socklen_t length = sizeof last_error;
      if (::getsockopt(socket->get(), SOL_SOCKET, SO_ERROR, &last_error, &length) != 0)
        last_error = errno;
      if (last_error == 0) return socket;
    }
  }
  return Status::FromErrno(last_error, "cannot connect to " + host + ":" + service);
}

// How long a rank whose sending failed still listens for srun's reason.
constexpr auto kRefusalGrace = std::chrono::seconds(1);

// srun's whole answer on `fd`, read until `deadline`.
Result<Answer> ReadAnswer(int fd, const ExchangeRequest& request, Clock::time_point deadline,
                          const std::string& where, Clock::time_point start) {
  Bytes received;
  std::byte buffer[64 * 1024];
  while (true) {
    const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
    if (got > 0) {
      received.insert(received.end(), buffer, buffer + got);
      auto answer = DecodeAnswer(received, request.size);
      if (!answer.ok()) return answer.status().WithContext("cannot read the answer of " + where);
      if (answer->has_value()) return std::move(answer).value().value();
      continue;
    }
    if (got == 0) {
      return Status::Unavailable(
          where +
          " closed the connection before answering: srun ended (see its output), or this "
          "rank's values took longer than " +
          std::to_string(kContributionPatience.count()) +
          " s to arrive; if srun still runs, the network between this node and srun's host "
          "drops connections: run with --ray-cluster=wireup=pmix");
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::FromErrno(errno, "cannot read the answer of " + where);
    const int error = WaitFor(fd, POLLIN, deadline);
    if (error == ETIMEDOUT) {
      const auto waited =
          std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
      return Status::DeadlineExceeded("not every rank of the step reached its wire-up within " +
                                      std::to_string(waited) + " s (" + where +
                                      " is waiting for them): a task that did not start or ended "
                                      "before sray::Init; see the step's other output");
    }
    if (error != 0) return Status::FromErrno(error, "cannot read the answer of " + where);
  }
}

}  // namespace

Result<std::vector<Bytes>> ExchangeThroughSrun(const ExchangeRequest& request) {
  const auto start = Clock::now();
  const auto deadline = start + request.timeout;
  const std::string where =
      "srun's rendezvous at " + request.host + ":" + std::to_string(request.invitation.port);
  auto socket = Connect(request.host, request.invitation.port,
                        std::min(deadline, start + request.connect_timeout));
  if (!socket.ok()) {
    return Status::Unavailable(
        "cannot reach " + where + ": " + socket.status().message() +
        ": the step's nodes must reach the host srun runs on; where a firewall "
        "stops them, run with --ray-cluster=wireup=pmix");
  }
  const int fd = (*socket)->get();

  Contribution contribution{.token = request.invitation.token,
                            .rank = request.rank,
                            .size = request.size,
                            .values = request.values};
  const Bytes outgoing = EncodeContribution(contribution);
  std::size_t sent = 0;
  Status sending = Status::Ok();
  while (sent < outgoing.size()) {
    const ssize_t wrote = ::send(fd, outgoing.data() + sent, outgoing.size() - sent, MSG_NOSIGNAL);
    if (wrote >= 0) {
      sent += static_cast<std::size_t>(wrote);
      continue;
    }
    if (errno == EINTR) continue;
    const int error = errno == EAGAIN ? WaitFor(fd, POLLOUT, deadline) : errno;
    if (error != 0) {
      sending = Status::FromErrno(error, "cannot send this rank's values to " + where);
      break;
    }
  }
  // A refusal may come before the whole contribution went (srun refuses on
  // the token alone): then its reason is what to say.
  auto answer = ReadAnswer(
      fd, request, sending.ok() ? deadline : std::min(deadline, Clock::now() + kRefusalGrace),
      where, start);
  if (!sending.ok() && (!answer.ok() || !answer->refusal)) return sending;
  if (!answer.ok()) return answer.status();
  if (answer->refusal) {
    return Status::InvalidArgument(where + " refused rank " + std::to_string(request.rank) + ": " +
                                   *answer->refusal);
  }
  return std::move(answer->values);
}

}  // namespace sray::wire::rendezvous
