#include "wire/rendezvous_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <list>
#include <optional>
#include <system_error>
#include <vector>

#include "common/thread_name.h"

namespace sray::wire::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;

// Compares in time that does not depend on where the tokens differ.
bool SameToken(const Token& left, const Token& right) {
  unsigned difference = 0;
  for (std::size_t index = 0; index < left.size(); ++index) {
    difference |= static_cast<unsigned>(left[index] ^ right[index]);
  }
  return difference == 0;
}

Result<int> Listen() {
  // One IPv6 socket also takes IPv4 where the host allows it; a host without
  // IPv6 gets an IPv4 one.
  int descriptor = ::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (descriptor >= 0) {
    const int off = 0;
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    if (::setsockopt(descriptor, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0 ||
        ::bind(descriptor, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      ::close(descriptor);
      descriptor = -1;
    }
  }
  if (descriptor < 0) {
    descriptor = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (descriptor < 0) return Status::FromErrno(errno, "cannot make a socket");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(descriptor, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      const int error = errno;
      ::close(descriptor);
      return Status::FromErrno(error, "cannot bind a port");
    }
  }
  if (::listen(descriptor, SOMAXCONN) != 0) {
    const int error = errno;
    ::close(descriptor);
    return Status::FromErrno(error, "cannot listen");
  }
  return descriptor;
}

Result<std::uint16_t> PortOf(int descriptor) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(descriptor, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return Status::FromErrno(errno, "cannot read the listening port");
  }
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

// srun holds one connection per rank while the ranks wait for each other,
// beside its own (about one per task for their output): its soft limit of
// open files goes up as far as the hard limit allows. Returns how many
// connections that have not shown the token there is then room for.
Result<std::size_t> MakeRoomForConnections(std::uint32_t ranks) {
  constexpr rlim_t kSpare = 64;  // srun's own files and sockets
  constexpr rlim_t kFewestStrangers = 16;
  const rlim_t needed = 2 * static_cast<rlim_t>(ranks) + kSpare;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return Status::FromErrno(errno, "cannot read srun's limit of open files");
  const rlim_t wanted = needed + RendezvousServer::kMostUnfinishedConnections;
  if (limit.rlim_cur < wanted) {
    const rlim_t raised =
        limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
    if (raised > limit.rlim_cur) {
      limit.rlim_cur = raised;
      if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
        return Status::FromErrno(errno, "cannot raise srun's limit of open files");
    }
  }
  if (limit.rlim_cur < needed + kFewestStrangers) {
    return Status::ResourceExhausted(
        "srun may open at most " + std::to_string(limit.rlim_max) +
        " files (ulimit -Hn), and a step of " + std::to_string(ranks) + " ranks needs " +
        std::to_string(needed + kFewestStrangers) +
        ": raise the limit where srun runs, or run with --ray-cluster=wireup=pmix");
  }
  return std::min<std::size_t>(RendezvousServer::kMostUnfinishedConnections,
                               static_cast<std::size_t>(limit.rlim_cur - needed));
}

}  // namespace

// The server's state; touched only by its thread once started.
class RendezvousServer::Loop {
 public:
  Loop(const Token& token, int listen_fd, std::shared_ptr<std::atomic<std::size_t>> contributed)
      : token_(token), listen_fd_(listen_fd), contributed_count_(std::move(contributed)) {}
  ~Loop() {
    for (Connection& connection : connections_) ::close(connection.fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  void Run(int wake_fd) {
    std::vector<pollfd> watched;
    std::vector<Connection*> owners;
    while (true) {
      watched.clear();
      owners.clear();
      watched.push_back({.fd = wake_fd, .events = POLLIN, .revents = 0});
      const bool accepting = listen_fd_ >= 0 && Clock::now() >= accept_again_;
      watched.push_back(
          {.fd = listen_fd_, .events = static_cast<short>(accepting ? POLLIN : 0), .revents = 0});
      std::optional<Clock::time_point> soonest;
      if (listen_fd_ >= 0 && !accepting) soonest = accept_again_;
      for (Connection& connection : connections_) {
        const short events = connection.phase == Phase::kWriting ? POLLOUT : POLLIN;
        watched.push_back({.fd = connection.fd, .events = events, .revents = 0});
        owners.push_back(&connection);
        if (connection.phase == Phase::kReading || connection.phase == Phase::kDraining)
          soonest = std::min(soonest.value_or(connection.deadline), connection.deadline);
      }
      int wait_ms = -1;
      if (soonest) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(*soonest - Clock::now()).count();
        wait_ms = static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
      }
      const int ready = ::poll(watched.data(), watched.size(), wait_ms);
      if (ready < 0 && errno != EINTR) {
        // Nothing here can go on: the ranks learn it at once from their
        // connections' end, rather than at their timeout.
        for (Connection& connection : connections_) ::close(connection.fd);
        connections_.clear();
        if (listen_fd_ >= 0) ::close(listen_fd_);
        listen_fd_ = -1;
        return;
      }
      if (watched[0].revents != 0) return;
      if (watched[1].revents & POLLIN) Accept();
      for (std::size_t index = 2; index < watched.size(); ++index) {
        if (watched[index].revents != 0) Serve(*owners[index - 2], watched[index].revents);
      }
      const auto now = Clock::now();
      for (Connection& connection : connections_) {
        if ((connection.phase == Phase::kReading || connection.phase == Phase::kDraining) &&
            now >= connection.deadline) {
          connection.phase = Phase::kClosed;
        }
      }
      std::erase_if(connections_, [](const Connection& connection) {
        if (connection.phase != Phase::kClosed) return false;
        ::close(connection.fd);
        return true;
      });
    }
  }

 private:
  enum class Phase {
    kReading,   // until a whole contribution is in
    kWaiting,   // contributed; until every rank has
    kWriting,   // the answer (table or refusal), then closed
    kDraining,  // a refusal sent: what the peer still sends is read and
                // dropped for a moment, so that closing does not reset the
                // connection before the peer has read why
    kClosed,
  };
  struct Connection {
    int fd = -1;
    Phase phase = Phase::kReading;
    Clock::time_point deadline;
    Bytes received;
    bool authenticated = false;  // its first bytes carried the step's token
    bool refused = false;        // its answer is a refusal
    std::shared_ptr<const Bytes> answer;
    std::size_t sent = 0;
  };

  void Accept() {
    // A few at a time, so that connections accepted in one round are read
    // in the next before a flood of others could make them the oldest.
    // Only connections that have not shown the token are capped: those that
    // have are ranks of this step, at most one each.
    const std::size_t earlier = connections_.size();
    std::size_t strangers = static_cast<std::size_t>(
        std::count_if(connections_.begin(), connections_.end(), [](const Connection& connection) {
          return connection.phase == Phase::kReading && !connection.authenticated;
        }));
    for (std::size_t accepted = 0; accepted < kMostAcceptsAtOnce; ++accepted) {
      if (strangers >= most_strangers_) {
        // Without one to make room, the rest wait in the backlog.
        if (!CloseOldestStranger(earlier)) return;
        --strangers;
      }
      const int descriptor = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (descriptor < 0) {
        // Out of descriptors or memory: the listener stays readable, so
        // wait a moment for connections to end rather than spin.
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          accept_again_ = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      ++strangers;
      Connection& added = connections_.emplace_back();
      added.fd = descriptor;
      // Until it shows the token: a rank sends it as it connects.
      added.deadline = Clock::now() + kTokenPatience;
    }
  }

  // Closes the oldest of the first `among` connections that has not shown
  // the token (a rank sends it as it connects, so one that old is not a
  // rank; connections accepted in this round, which nobody has read yet, are
  // not among them). False when there is none.
  bool CloseOldestStranger(std::size_t among) {
    std::size_t index = 0;
    for (Connection& connection : connections_) {
      if (index++ == among) break;
      if (connection.phase == Phase::kReading && !connection.authenticated) {
        connection.phase = Phase::kClosed;
        return true;
      }
    }
    return false;
  }

  void Serve(Connection& connection, short revents) {
    switch (connection.phase) {
      case Phase::kReading: Read(connection); return;
      case Phase::kWaiting: {
        // A contributor says nothing more until it has its answer: anything
        // here is its end (it gave up, or died), and its values stay.
        std::byte extra{};
        if (::recv(connection.fd, &extra, 1, 0) != -1 || (errno != EAGAIN && errno != EINTR)) {
          connection.phase = Phase::kClosed;
        }
        return;
      }
      case Phase::kWriting: Write(connection, revents); return;
      case Phase::kDraining: {
        std::byte dropped[4096];
        ssize_t got = 0;
        while ((got = ::recv(connection.fd, dropped, sizeof dropped, 0)) > 0) {
        }
        if (got == 0 || (errno != EAGAIN && errno != EINTR)) connection.phase = Phase::kClosed;
        return;
      }
      case Phase::kClosed: return;
    }
  }

  void Read(Connection& connection) {
    std::byte buffer[64 * 1024];
    while (true) {
      // Until the token checks out, no more than the token is read: a peer
      // without it gets srun to hold 40 bytes, not a contribution's megabyte.
      const std::size_t wanted = connection.authenticated
                                     ? sizeof buffer
                                     : kContributionTokenEnd - connection.received.size();
      const ssize_t got = ::recv(connection.fd, buffer, wanted, 0);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        connection.phase = Phase::kClosed;
        return;
      }
      if (got < 0) break;
      connection.received.insert(connection.received.end(), buffer, buffer + got);
      if (!connection.authenticated) {
        auto token = ContributionToken(connection.received);
        if (!token.ok()) {
          connection.phase = Phase::kClosed;  // not sray talking: nothing to explain
          return;
        }
        if (!token->has_value()) continue;
        if (!SameToken(**token, token_)) {
          Refuse(connection,
                 "the token does not match this step's: the contribution came from another step");
          return;
        }
        connection.authenticated = true;
        connection.deadline = Clock::now() + kContributionPatience;
      }
      if (connection.received.size() > kContributionHeaderSize + kMostValueBytes) break;
    }
    if (!connection.authenticated) return;
    auto decoded = DecodeContribution(connection.received);
    if (!decoded.ok()) {
      // It showed the token: a rank of this step, told why.
      Refuse(connection, decoded.status().message() +
                             ": this sray differs from srun's plugin, or the rank "
                             "publishes too much; check both are the same install");
      return;
    }
    if (!decoded->has_value()) return;
    Contribution& contribution = **decoded;
    connection.received = Bytes();
    if (size_ == 0) {
      size_ = contribution.size;
      values_.resize(size_);
      auto room = MakeRoomForConnections(size_);
      descriptors_ = room.status();
      if (room.ok()) most_strangers_ = *room;
    }
    if (!descriptors_.ok()) {
      Refuse(connection, descriptors_.message());
      return;
    }
    if (contribution.size != size_) {
      Refuse(connection, "rank " + std::to_string(contribution.rank) + " says the step has " +
                             std::to_string(contribution.size) + " ranks, an earlier one said " +
                             std::to_string(size_));
      return;
    }
    std::optional<Bytes>& slot = values_[contribution.rank];
    if (slot) {
      Refuse(connection,
             "rank " + std::to_string(contribution.rank) +
                 " has contributed already: two processes claim one rank (a task that ran a second "
                 "sray program?); run one sray program per task, or start the second one with its "
                 "own srun");
      return;
    }
    slot = std::move(contribution.values);
    ++contributed_;
    contributed_count_->store(contributed_);
    connection.phase = Phase::kWaiting;
    if (contributed_ < size_) return;
    std::vector<Bytes> values;
    values.reserve(size_);
    for (std::optional<Bytes>& each : values_) values.push_back(std::move(*each));
    const auto table = std::make_shared<const Bytes>(EncodeTable(values));
    // Every rank is in: nobody has anything more to send, so the port need
    // not stay open for the rest of the step.
    ::close(listen_fd_);
    listen_fd_ = -1;
    for (Connection& waiting : connections_) {
      if (waiting.phase == Phase::kWaiting) StartWriting(waiting, table);
    }
  }

  void Refuse(Connection& connection, const std::string& why) {
    connection.refused = true;
    StartWriting(connection, std::make_shared<const Bytes>(EncodeRefusal(why)));
  }

  void StartWriting(Connection& connection, std::shared_ptr<const Bytes> answer) {
    connection.answer = std::move(answer);
    connection.sent = 0;
    connection.phase = Phase::kWriting;
    Write(connection, POLLOUT);
  }

  static void Write(Connection& connection, short revents) {
    if (revents & (POLLERR | POLLHUP)) {
      connection.phase = Phase::kClosed;
      return;
    }
    const Bytes& answer = *connection.answer;
    while (connection.sent < answer.size()) {
      const ssize_t sent = ::send(connection.fd, answer.data() + connection.sent,
                                  answer.size() - connection.sent, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        connection.phase = Phase::kClosed;
        return;
      }
      connection.sent += static_cast<std::size_t>(sent);
    }
    if (!connection.refused) {
      connection.phase = Phase::kClosed;
      return;
    }
    ::shutdown(connection.fd, SHUT_WR);
    connection.phase = Phase::kDraining;
    connection.deadline = Clock::now() + std::chrono::seconds(1);
  }

  const Token token_;
  int listen_fd_;  // -1 once every rank has contributed
  std::list<Connection> connections_;
  std::uint32_t size_ = 0;                    // from the first contribution; all must agree
  Status descriptors_;                        // whether srun may hold a connection per rank
  std::size_t most_strangers_ = kMostUnfinishedConnections;  // see MakeRoomForConnections
  std::vector<std::optional<Bytes>> values_;  // by rank
  std::size_t contributed_ = 0;
  const std::shared_ptr<std::atomic<std::size_t>> contributed_count_;
  Clock::time_point accept_again_;
};

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(const Token& token) {
  auto listening = Listen();
  if (!listening.ok()) return listening.status().WithContext("cannot start srun's rendezvous");
  auto contributed = std::make_shared<std::atomic<std::size_t>>(0);
  auto loop = std::make_unique<Loop>(token, *listening, contributed);
  auto port = PortOf(*listening);
  if (!port.ok()) return port.status().WithContext("cannot start srun's rendezvous");
  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return Status::FromErrno(errno, "cannot start srun's rendezvous: no eventfd");
  try {
    return std::unique_ptr<RendezvousServer>(
        new RendezvousServer(std::move(loop), std::move(contributed), wake_fd, *port));
  } catch (const std::system_error& error) {
    ::close(wake_fd);
    return Status::Internal(std::string("cannot start srun's rendezvous: no thread: ") +
                            error.what());
  }
}

RendezvousServer::RendezvousServer(std::unique_ptr<Loop> loop,
                                   std::shared_ptr<std::atomic<std::size_t>> contributed,
                                   int wake_fd, std::uint16_t port)
    : loop_(std::move(loop)),
      contributed_(std::move(contributed)),
      wake_fd_(wake_fd),
      port_(port),
      owner_(::getpid()) {
  thread_ = std::thread([this] {
    NameThisThread("sray-rendezvous");
    loop_->Run(wake_fd_);
  });
}

RendezvousServer::~RendezvousServer() {
  if (::getpid() != owner_) {
    // A forked copy of srun (a prolog or epilog script that failed to exec
    // and exits) has no server thread: waking the eventfd it shares would
    // stop the parent's, and joining would wait for nothing. Its copies of
    // the sockets close with it.
    thread_.detach();
    // The copy of the loop may be mid-change: leave it, as the thread.
    (void)loop_.release();
    return;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  loop_.reset();
  ::close(wake_fd_);
}

}  // namespace sray::wire::rendezvous
