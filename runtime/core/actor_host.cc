#include "core/actor_host.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/task_execution.h"

namespace sray::core {

ActorHost::ActorHost(std::shared_ptr<void> instance, std::uint64_t actor_id,
                     std::uint32_t max_concurrency, StoreAccess& store, std::uint32_t node_id)
    : instance_(std::move(instance)),
      actor_id_(actor_id),
      max_concurrency_(std::max<std::uint32_t>(1, max_concurrency)),
      store_(store),
      node_id_(node_id) {}

void ActorHost::Accept(std::uint32_t caller, TaskSpec spec, transport::Responder responder) {
  std::size_t released = 0;
  {
    std::lock_guard lock(mutex_);
    CallerQueue& queue = callers_[caller];
    if (spec.sequence != queue.next) {
      queue.early.emplace(spec.sequence, Pending{std::move(spec), std::move(responder)});
      return;
    }
    ready_.push_back(Pending{std::move(spec), std::move(responder)});
    ++queue.next;
    ++released;
    for (auto early = queue.early.begin();
         early != queue.early.end() && early->first == queue.next; early = queue.early.erase(early)) {
      ready_.push_back(std::move(early->second));
      ++queue.next;
      ++released;
    }
  }
  if (released == 1) {
    arrived_.notify_one();
  } else {
    arrived_.notify_all();
  }
}

void ActorHost::RunCalls() {
  std::unique_lock lock(mutex_);
  while (true) {
    arrived_.wait(lock, [&] { return !ready_.empty(); });
    Pending call = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    const TaskOutcome outcome = ExecuteActorCall(call.spec, store_, node_id_, instance_.get());
    call.responder.Reply(Encode(outcome));
    lock.lock();
  }
}

void ActorHost::Serve() {
  std::vector<std::thread> more;
  for (std::uint32_t index = 1; index < max_concurrency_; ++index) {
    more.emplace_back([this] { RunCalls(); });
  }
  RunCalls();
  for (auto& thread : more) thread.join();  // not reached: RunCalls never returns
  std::abort();
}

}  // namespace sray::core
