#include "core/borrow_links.h"

#include <chrono>
#include <thread>
#include <utility>

#include "core/node_fence.h"

namespace sray::core {
namespace {

// A borrower's registration is answered by a live owner within a round
// trip; a minute covers an owner busy under load.
constexpr std::chrono::seconds kRegisterTimeout{60};

}  // namespace

TransportBorrowLinks::TransportBorrowLinks(transport::Transport& transport,
                                           std::shared_ptr<transport::AddressBook> book)
    : transport_(transport), book_(std::move(book)) {
  auto address = transport_.LocalAddress(false);
  if (address.ok()) own_address_ = std::string(transport::TextOf(*address));
}

void NoteOwnerAddress(transport::AddressBook& book, std::uint32_t own_rank,
                      const ContainedRef& reference) {
  const auto rank = static_cast<std::uint32_t>(reference.id.owner);
  if (reference.owner_address.empty() || rank == own_rank || book.Find(rank)) return;
  book.Add(rank, transport::AddressBook::Entry{
                     .address = transport::BytesOf(reference.owner_address),
                     .pid = 0,
                     .description = "rank " + std::to_string(rank) + " (the owner of object " +
                                    reference.id.ToString() + ")"});
}

void BorrowerAddresses::Note(std::uint32_t rank, const std::string& address) {
  if (address.empty()) return;
  std::lock_guard lock(mutex_);
  if (book_->Find(rank)) return;
  book_->Add(rank, transport::AddressBook::Entry{
                       .address = transport::BytesOf(address),
                       .pid = 0,
                       .description = "rank " + std::to_string(rank) + " (a borrower)"});
  noted_.insert(rank);
}

void BorrowerAddresses::Forget(std::uint32_t rank) {
  std::lock_guard lock(mutex_);
  if (noted_.erase(rank) > 0) book_->Remove(rank);
}

void BorrowerAddresses::ForgetOn(std::uint32_t node) {
  std::lock_guard lock(mutex_);
  for (auto rank = noted_.begin(); rank != noted_.end();) {
    if (NodeOfWorkerRank(*rank) == node) {
      book_->Remove(*rank);
      rank = noted_.erase(rank);
    } else {
      ++rank;
    }
  }
}

std::uint32_t TransportBorrowLinks::Reach(const ObjectId& id, const std::string& owner_address) {
  NoteOwnerAddress(*book_, transport_.rank(),
                   ContainedRef{.id = id, .owner_address = owner_address});
  return static_cast<std::uint32_t>(id.owner);
}

Status TransportBorrowLinks::AddBorrower(const std::string& owner_address,
                                         const BorrowerChange& change) {
  const std::uint32_t owner = Reach(change.id, owner_address);
  const transport::Bytes payload = Encode(change);
  auto reply = transport_.Call(owner, kAddBorrower, payload, kRegisterTimeout);
  return reply.ok() ? Status::Ok() : reply.status();
}

void TransportBorrowLinks::RemoveBorrower(const std::string& owner_address,
                                          const BorrowerChange& change) {
  const std::uint32_t owner = Reach(change.id, owner_address);
  transport_.Post(owner, kRemoveBorrower, Encode(change));
}

void TransportBorrowLinks::RequestStatus(const std::string& owner_address,
                                         const StatusRequest& request,
                                         std::function<void(Result<ObjectStatus>)> done) {
  RequestStatusFrom(Reach(request.id, owner_address), request, std::move(done));
}

void TransportBorrowLinks::RequestStatusFrom(std::uint32_t asked, const StatusRequest& request,
                                             std::function<void(Result<ObjectStatus>)> done) {
  StatusRequest sent = request;
  sent.requester_address = own_address_;
  auto payload = std::make_shared<const transport::Bytes>(Encode(sent));
  transport_.CallAsync(asked, kObjectStatus, *payload,
                       [payload, done = std::move(done)](Result<transport::Bytes> reply) {
                         if (!reply.ok()) {
                           done(reply.status());
                           return;
                         }
                         done(Decode<ObjectStatus>(*reply, "object status"));
                       });
}

OwnerService::OwnerService(transport::Transport& transport, Owner& owner,
                           std::uint32_t node_manager_rank,
                           std::shared_ptr<transport::AddressBook> book)
    : guard_(std::make_shared<Guard>()) {
  guard_->owner.store(&owner);
  auto borrowers = std::make_shared<BorrowerAddresses>(std::move(book));
  transport.RegisterOneWayHandler(
      kBorrowerGone, [guard = guard_, node_manager_rank, borrowers](
                         std::uint32_t source, std::span<const std::byte> payload) {
        // Its node manager checked where the news came from.
        if (source != node_manager_rank) return;
        auto gone = Decode<OwnerGone>(payload, "borrower gone");
        if (!gone.ok()) return;
        guard->With([&](Owner& served_owner) { served_owner.ForgetBorrower(gone->rank); });
        borrowers->Forget(gone->rank);
      });
  transport.RegisterOneWayHandler(
      kBorrowerNodeLost, [guard = guard_, node_manager_rank, fenced = &transport, borrowers](
                             std::uint32_t source, std::span<const std::byte> payload) {
        if (source != node_manager_rank) return;
        auto lost = Decode<NodeLost>(payload, "borrower node lost");
        if (!lost.ok()) return;
        FenceLostNode(*fenced, *lost);
        guard->With([&](Owner& served_owner) { served_owner.ForgetBorrowersOn(lost->node); });
        borrowers->ForgetOn(lost->node);
      });
  transport.RegisterOneWayHandler(
      kOwnerOutcome, [guard = guard_](std::uint32_t, std::span<const std::byte> payload) {
        auto outcome = Decode<TaskOutcome>(payload, "task outcome");
        if (!outcome.ok()) return;
        guard->With(
            [&](Owner& served_owner) { served_owner.OnTaskOutcome(std::move(outcome).value()); });
      });
  transport.RegisterRequestHandler(
      kAddBorrower,
      [guard = guard_](std::uint32_t,
                       std::span<const std::byte> payload) -> Result<transport::Bytes> {
        auto change = Decode<BorrowerChange>(payload, "add borrower");
        if (!change.ok()) return change.status();
        Status added = Status::Unavailable("this process is shutting down");
        guard->With([&](Owner& served_owner) { added = served_owner.AddBorrower(*change); });
        if (!added.ok()) return added;
        return transport::Bytes{};
      });
  transport.RegisterOneWayHandler(
      kRemoveBorrower, [guard = guard_](std::uint32_t, std::span<const std::byte> payload) {
        auto change = Decode<BorrowerChange>(payload, "remove borrower");
        if (!change.ok()) return;
        guard->With([&](Owner& served_owner) { served_owner.RemoveBorrower(*change); });
      });
  transport.RegisterDeferredRequestHandler(
      kObjectStatus,
      [guard = guard_, borrowers](std::uint32_t source, std::span<const std::byte> payload,
                                  transport::Responder responder) {
        auto request = Decode<StatusRequest>(payload, "object status");
        if (!request.ok()) {
          responder.Reply(request.status());
          return;
        }
        const bool served = guard->With([&](Owner& served_owner) {
          // Not for a borrower whose end was heard of already: nothing
          // would take its entry out again.
          if (!served_owner.HeardEnded(source)) {
            borrowers->Note(source, request->requester_address);
          }
          auto answer = [responder](ObjectStatus status) { responder.Reply(Encode(status)); };
          if (request->rebuild) {
            served_owner.WhenRebuilt(request->id, request->lost_on_node, request->rebuilds_seen,
                                     std::move(answer));
          } else {
            served_owner.WhenResolved(request->id, std::move(answer));
          }
        });
        if (!served) responder.Reply(Status::Unavailable("this process is shutting down"));
      });
}

OwnerService::~OwnerService() {
  Owner* owner = guard_->owner.exchange(nullptr);
  // Handlers that saw the owner finish first (they never block).
  while (guard_->active.load() > 0) std::this_thread::yield();
  // Their responders must not outlive the transport, which may go next.
  if (owner != nullptr) owner->DropStatusWaiters();
}

}  // namespace sray::core
