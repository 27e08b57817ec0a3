#include "core/actor_host.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/task_execution.h"

namespace sray::core {

ActorHost::ActorHost(internal::ActorInstance instance, std::uint64_t actor_id, std::int32_t incarnation,
                     std::uint32_t max_concurrency, StoreAccess& store, std::uint32_t node_id,
                     transport::Transport& transport, std::uint32_t manager, CallerLearner learn_caller,
                     ServedBefore served_before)
    : instance_(std::move(instance)),
      actor_id_(actor_id),
      incarnation_(incarnation),
      max_concurrency_(std::max<std::uint32_t>(1, max_concurrency)),
      store_(store),
      node_id_(node_id),
      transport_(transport),
      learn_caller_(std::move(learn_caller)),
      served_before_(std::move(served_before)),
      manager_(manager) {}

void ActorHost::Accept(std::uint32_t caller, transport::Bytes call) {
  bool was_empty = false;
  {
    std::lock_guard lock(mutex_);
    was_empty = incoming_.empty();
    incoming_.push_back(Incoming{caller, std::move(call)});
  }
  if (was_empty) arrived_.notify_one();
}

void ActorHost::SortIncoming(std::unique_lock<std::mutex>& lock) {
  std::vector<Incoming> batch;
  batch.swap(incoming_);
  lock.unlock();
  std::vector<std::pair<std::uint32_t, Pending>> decoded;
  decoded.reserve(batch.size());
  for (auto& incoming : batch) {
    auto spec = Decode<TaskSpec>(incoming.bytes, "actor call");
    if (!spec.ok()) continue;  // only processes with the job secret send; nothing to answer
    if (!spec->caller_address.empty()) learn_caller_(incoming.caller, spec->caller_address);
    if (spec->actor_id != actor_id_) {
      if (served_before_(spec->actor_id)) continue;
      transport_.Post(incoming.caller, kActorCallDone,
                      Encode(FailedOutcome(*spec, OutcomeKind::kSystemError,
                                           "the worker it reached serves actor " +
                                               std::to_string(actor_id_) + ", not " +
                                               std::to_string(spec->actor_id))));
      continue;
    }
    // Sent to an earlier incarnation that lived in this process: its caller
    // hears from the head that it was lost (a restart may run here).
    if (spec->incarnation != incarnation_) continue;
    decoded.emplace_back(incoming.caller, Pending{std::move(spec).value(), incoming.caller});
  }
  lock.lock();
  for (auto& [caller, call] : decoded) {
    CallerQueue& queue = callers_[caller];
    if (call.spec.sequence != queue.next) {
      queue.early.emplace(call.spec.sequence, std::move(call));
      continue;
    }
    ready_.push_back(std::move(call));
    ++queue.next;
    for (auto early = queue.early.begin();
         early != queue.early.end() && early->first == queue.next; early = queue.early.erase(early)) {
      ready_.push_back(std::move(early->second));
      ++queue.next;
    }
  }
  if (ready_.size() > 1 && max_concurrency_ > 1) arrived_.notify_all();
}

namespace {
constexpr auto kTallyInterval = std::chrono::milliseconds(250);
}  // namespace

void ActorHost::SendTally() {
  if (!tally_changed_) return;
  ActorCallTally tally{.actor_id = actor_id_, .incarnation = incarnation_, .methods = {}};
  std::unordered_map<std::string, std::uint64_t> queued;
  for (const Pending& pending : ready_) ++queued[pending.spec.function];
  for (const auto& [caller, queue] : callers_) {
    for (const auto& [sequence, pending] : queue.early) ++queued[pending.spec.function];
  }
  for (const auto& [function, counts] : methods_) {
    FunctionTasks method = counts;
    method.function = function;
    if (auto found = queued.find(function); found != queued.end()) method.queued = found->second;
    tally.methods.push_back(std::move(method));
  }
  // A one-way post only queues: fine under the lock.
  transport_.Post(manager_, kActorCallTally, Encode(tally));
  tally_changed_ = false;
  last_tally_ = std::chrono::steady_clock::now();
}

void ActorHost::MarkTallyChanged() {
  if (tally_changed_) return;
  tally_changed_ = true;
  tally_wanted_.notify_one();
}

// Its own thread: a call that runs for an hour shows as running, and a
// busy actor's counts stay at most 250 ms old, whatever the callers do.
void ActorHost::SendTallies() {
  std::unique_lock lock(mutex_);
  while (!retired_) {
    tally_wanted_.wait(lock, [&] { return tally_changed_ || retired_; });
    const auto due = last_tally_ + kTallyInterval;
    if (!retired_ && std::chrono::steady_clock::now() < due) {
      tally_wanted_.wait_until(lock, due);
      continue;
    }
    SendTally();
  }
  SendTally();  // the last counts, before the worker's kActorRetired
}

bool ActorHost::Retire() {
  {
    std::lock_guard lock(mutex_);
    if (running_ > 0) return false;
    retired_ = true;
  }
  arrived_.notify_all();
  tally_wanted_.notify_all();
  return true;
}

void ActorHost::RunCalls() {
  std::unique_lock lock(mutex_);
  while (true) {
    arrived_.wait(lock, [&] { return !ready_.empty() || !incoming_.empty() || retired_; });
    if (retired_) return;
    if (!incoming_.empty()) {
      SortIncoming(lock);
      MarkTallyChanged();  // more queued
      continue;
    }
    Pending call = std::move(ready_.front());
    ready_.pop_front();
    // A reference into an unordered_map stays valid while others insert.
    FunctionTasks& counts = methods_[call.spec.function];
    ++counts.running;
    ++running_;
    MarkTallyChanged();
    lock.unlock();
    const TaskOutcome outcome = ExecuteActorCall(call.spec, store_, node_id_, instance_);
    transport::Bytes answer = Encode(outcome);
    lock.lock();
    --running_;
    --counts.running;
    ++(HoldsValue(static_cast<OutcomeKind>(outcome.kind)) ? counts.finished : counts.failed);
    MarkTallyChanged();
    lock.unlock();
    // Sent from here when the progress thread sleeps: waking it to send cost
    // each call one more wake-up before its caller heard (docs/benchmarks.md,
    // "Calls whose handler takes long"). Outside mutex_: this thread may wait
    // for the worker's lock, which the progress thread holds while a handler
    // waits for mutex_ (Accept). Counted as done first, so that a Kill sent
    // once the caller has its answer finds no call running and retires the
    // actor; this thread sends before it sees the retirement, and Serve
    // returns only after, so every answer still goes out before the
    // worker's kActorRetired. On this process's own endpoint: dropped, not
    // a crash, if the caller died.
    transport_.Post(call.caller, kActorCallDone, std::move(answer), /*send_here=*/true);
    lock.lock();
  }
}

void ActorHost::Serve() {
  std::vector<std::thread> more;
  more.emplace_back([this] { SendTallies(); });
  for (std::uint32_t index = 1; index < max_concurrency_; ++index) {
    more.emplace_back([this] { RunCalls(); });
  }
  RunCalls();
  for (auto& thread : more) thread.join();
}

}  // namespace sray::core
