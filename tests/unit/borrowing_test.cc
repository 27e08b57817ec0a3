// Borrowed references between processes: BorrowedObjects' registrations and
// two Owners (ranks 1 and 2) whose BorrowLinks call each other directly, in
// place of the transport (the local test refs_check covers the transport).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/borrow_links.h"
#include "core/borrowed_objects.h"
#include "core/owner.h"
#include "core/process_runtime.h"
#include "no_store.h"
#include "sray/errors.h"
#include "sray/internal/serialization.h"
#include "test_files.h"
#include "transport/address_book.h"
#include "transport/transport.h"

namespace sray::core {
namespace {

// Records what BorrowedObjects asks owners for.
class RecordingLinks final : public BorrowLinks {
 public:
  std::string OwnAddress() override { return "me"; }
  Status AddBorrower(const std::string& owner_address, const BorrowerChange& change) override {
    added.push_back(change);
    addresses.push_back(owner_address);
    return add_result;
  }
  void RemoveBorrower(const std::string&, const BorrowerChange& change) override {
    removed.push_back(change);
  }
  void RequestStatus(const std::string&, const StatusRequest&,
                     std::function<void(Result<ObjectStatus>)> done) override {
    done(Status::Unavailable("not in this test"));
  }
  void RequestStatusFrom(std::uint32_t, const StatusRequest&,
                         std::function<void(Result<ObjectStatus>)> done) override {
    done(Status::Unavailable("not in this test"));
  }
  Status add_result = Status::Ok();
  std::vector<BorrowerChange> added;
  std::vector<BorrowerChange> removed;
  std::vector<std::string> addresses;
};

TEST(BorrowedObjects, RegistersOnceAndGivesEveryRegistrationBackWithTheLastReference) {
  RecordingLinks links;
  BorrowedObjects borrowed(2, links);
  const ObjectId id{1, 7};
  auto first = borrowed.Borrow(id, "owner-address");
  auto second = borrowed.Borrow(id, "owner-address");
  ASSERT_EQ(links.added.size(), 1U);
  EXPECT_EQ(links.added[0].borrower, 2U);
  EXPECT_EQ(links.addresses[0], "owner-address");
  // A registration made for this process (a result holding the reference).
  auto adopted = borrowed.Adopt(ContainedRef{.id = id, .owner_address = "owner-address"});
  EXPECT_EQ(borrowed.OwnerAddressOf(id), "owner-address");
  EXPECT_TRUE(borrowed.Release(id));
  EXPECT_TRUE(borrowed.Release(id));
  EXPECT_TRUE(links.removed.empty());
  EXPECT_TRUE(borrowed.Release(id));
  ASSERT_EQ(links.removed.size(), 1U);
  EXPECT_EQ(links.removed[0].count, 2U);
  EXPECT_EQ(borrowed.size(), 0U);
  EXPECT_FALSE(borrowed.Release(id));
}

TEST(BorrowedObjects, AFailedRegistrationStillGivesAReferenceAndNothingToGiveBack) {
  RecordingLinks links;
  links.add_result = Status::NotFound("freed");
  BorrowedObjects borrowed(2, links);
  const ObjectId id{1, 8};
  auto handle = borrowed.Borrow(id, "owner-address");
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(handle->id(), id);
  EXPECT_TRUE(borrowed.Release(id));
  EXPECT_TRUE(links.removed.empty());
}

TEST(BorrowedObjects, LendingAsksTheOwnerToCountTheReceiver) {
  RecordingLinks links;
  BorrowedObjects borrowed(2, links);
  const ObjectId id{1, 9};
  auto handle = borrowed.Borrow(id, "owner-address");
  auto lent = borrowed.Lend(id, 9);
  ASSERT_TRUE(lent.ok());
  EXPECT_EQ(lent->owner_address, "owner-address");
  ASSERT_EQ(links.added.size(), 2U);
  EXPECT_EQ(links.added[1].borrower, 9U);
  EXPECT_FALSE(borrowed.Lend(ObjectId{1, 10}, 9).ok());  // not held here
}

// Keeps each status question until the test answers it.
class QuestionLinks final : public BorrowLinks {
 public:
  std::string OwnAddress() override { return "me"; }
  Status AddBorrower(const std::string&, const BorrowerChange&) override { return Status::Ok(); }
  void RemoveBorrower(const std::string&, const BorrowerChange&) override {}
  void RequestStatus(const std::string&, const StatusRequest& request,
                     std::function<void(Result<ObjectStatus>)> done) override {
    asked.emplace_back(request, std::move(done));
  }
  void RequestStatusFrom(std::uint32_t, const StatusRequest& request,
                         std::function<void(Result<ObjectStatus>)> done) override {
    asked.emplace_back(request, std::move(done));
  }
  std::vector<std::pair<StatusRequest, std::function<void(Result<ObjectStatus>)>>> asked;
};

// A Get or Wait called in a loop on a pending borrowed object asked its owner
// anew each time: the questions and the owner's waiters grew until the
// object resolved.
TEST(BorrowedObjects, RepeatedStatusRequestsForAPendingObjectAskTheOwnerOnce) {
  QuestionLinks links;
  BorrowedObjects borrowed(2, links);
  const ObjectId id{1, 11};
  auto handle = borrowed.Borrow(id, "owner-address");
  int first_answers = 0;
  int cancelled_answers = 0;
  int last_answers = 0;
  const std::uint64_t first =
      borrowed.RequestStatus(id, [&](const Result<ObjectStatus>&) { ++first_answers; });
  auto kept_alive = std::make_shared<int>(0);
  for (int round = 0; round < 1000; ++round) {
    const std::uint64_t ticket = borrowed.RequestStatus(
        id, [&, kept_alive](const Result<ObjectStatus>&) { ++cancelled_answers; });
    EXPECT_NE(ticket, 0U);
    borrowed.CancelStatusRequest(id, ticket);
  }
  EXPECT_EQ(kept_alive.use_count(), 1) << "a cancelled request keeps nothing";
  EXPECT_EQ(borrowed.status_waiters(), 1U);
  (void)borrowed.RequestStatus(id, [&](const Result<ObjectStatus>&) { ++last_answers; });
  ASSERT_EQ(links.asked.size(), 1U) << "one question to the owner";
  EXPECT_FALSE(links.asked[0].first.rebuild);
  EXPECT_EQ(borrowed.open_questions(), 1U);

  ObjectStatus status;
  status.kind = static_cast<std::uint8_t>(ObjectStatusKind::kInline);
  links.asked[0].second(status);
  EXPECT_EQ(first_answers, 1);
  EXPECT_EQ(last_answers, 1);
  EXPECT_EQ(cancelled_answers, 0);
  EXPECT_EQ(borrowed.open_questions(), 0U);
  borrowed.CancelStatusRequest(id, first);  // answered already: nothing to do

  // Answered questions close: the next request asks again, and a lost copy is
  // always news to the owner.
  (void)borrowed.RequestStatus(id, [](const Result<ObjectStatus>&) {});
  EXPECT_EQ(borrowed.RequestStatus(
                id, [](const Result<ObjectStatus>&) {}, 3, 1),
            0U);
  ASSERT_EQ(links.asked.size(), 3U);
  EXPECT_TRUE(links.asked[2].first.rebuild);
  EXPECT_EQ(links.asked[2].first.lost_on_node, 3U);
  // An owner that cannot be reached fails everyone waiting for the question.
  Status failure = Status::Ok();
  (void)borrowed.RequestStatus(
      id, [&](const Result<ObjectStatus>& answer) { failure = answer.status(); });
  links.asked[1].second(Status::Unavailable("owner gone"));
  EXPECT_EQ(failure.code(), StatusCode::kUnavailable);
}

// Throws on the first question, as an allocation failure would.
class ThrowingLinks final : public BorrowLinks {
 public:
  std::string OwnAddress() override { return "me"; }
  Status AddBorrower(const std::string&, const BorrowerChange&) override { return Status::Ok(); }
  void RemoveBorrower(const std::string&, const BorrowerChange&) override {}
  void RequestStatus(const std::string&, const StatusRequest&,
                     std::function<void(Result<ObjectStatus>)> done) override {
    if (throws-- > 0) throw std::bad_alloc();
    done(ObjectStatus{});
  }
  void RequestStatusFrom(std::uint32_t, const StatusRequest&,
                         std::function<void(Result<ObjectStatus>)> done) override {
    done(ObjectStatus{});
  }
  int throws = 1;
};

TEST(BorrowedObjects, AQuestionThatCouldNotBeAskedIsNotLeftOpen) {
  ThrowingLinks links;
  BorrowedObjects borrowed(2, links);
  const ObjectId id{1, 12};
  auto handle = borrowed.Borrow(id, "owner-address");
  Status failed = Status::Ok();
  EXPECT_THROW((void)borrowed.RequestStatus(
                   id, [&](const Result<ObjectStatus>& answer) { failed = answer.status(); }),
               std::bad_alloc);
  EXPECT_FALSE(failed.ok()) << "its waiter is told";
  EXPECT_EQ(borrowed.open_questions(), 0U);
  bool answered = false;
  (void)borrowed.RequestStatus(id,
                               [&](const Result<ObjectStatus>& answer) { answered = answer.ok(); });
  EXPECT_TRUE(answered) << "the next request asks again";
}

// Routes each owner-bound message to the Owner of that rank, at once.
class DirectLinks final : public BorrowLinks {
 public:
  explicit DirectLinks(std::uint32_t self) : self_(self) {}
  std::string OwnAddress() override { return "rank-" + std::to_string(self_); }
  Status AddBorrower(const std::string&, const BorrowerChange& change) override {
    return owners->at(static_cast<std::uint32_t>(change.id.owner))->AddBorrower(change);
  }
  void RemoveBorrower(const std::string&, const BorrowerChange& change) override {
    owners->at(static_cast<std::uint32_t>(change.id.owner))->RemoveBorrower(change);
  }
  void RequestStatus(const std::string&, const StatusRequest& request,
                     std::function<void(Result<ObjectStatus>)> done) override {
    RequestStatusFrom(static_cast<std::uint32_t>(request.id.owner), request, std::move(done));
  }
  void RequestStatusFrom(std::uint32_t asked, const StatusRequest& request,
                         std::function<void(Result<ObjectStatus>)> done) override {
    ++status_requests;
    Owner* owner = owners->at(asked);
    auto answer = [done = std::move(done)](ObjectStatus status) { done(std::move(status)); };
    if (request.rebuild) {
      owner->WhenRebuilt(request.id, request.lost_on_node, request.rebuilds_seen,
                         std::move(answer));
    } else {
      owner->WhenResolved(request.id, std::move(answer));
    }
  }
  std::map<std::uint32_t, Owner*>* owners = nullptr;
  std::atomic<int> status_requests{0};

 private:
  std::uint32_t self_;
};

TaskOutcome OutcomeFor(const TaskSpec& spec, OutcomeKind kind, std::int64_t value) {
  TaskOutcome outcome = FailedOutcome(spec, kind, kind == OutcomeKind::kTaskThrew ? "bad" : "");
  if (kind == OutcomeKind::kInlineValue) outcome.value = internal::Serialize(value);
  if (kind == OutcomeKind::kTaskThrew) outcome.error_type = "std::runtime_error";
  return outcome;
}

// Lets `owner` (rank 1) and `borrower` (rank 2) reach each other directly.
void LinkDirectly(Owner& owner, DirectLinks& owner_links, Owner& borrower,
                  DirectLinks& borrower_links, std::map<std::uint32_t, Owner*>& owners) {
  owner.SetBorrowLinks(owner_links);
  borrower.SetBorrowLinks(borrower_links);
  owner_links.owners = &owners;
  borrower_links.owners = &owners;
}

class TwoOwners : public ::testing::Test {
 protected:
  TwoOwners() { LinkDirectly(owner_, owner_links_, borrower_, borrower_links_, owners_); }
  std::int64_t ValueOf(const std::shared_ptr<const internal::ObjectValue>& value) {
    return internal::Deserialize<std::int64_t>(value->bytes(), "test");
  }

  NoStore store_;
  std::vector<TaskSpec> submitted_;
  Owner owner_{OwnerIdentity{.rank = 1, .node_id = 0}, store_,
               [this](TaskSpec spec) { submitted_.push_back(std::move(spec)); }};
  std::vector<TaskSpec> borrower_sent_;
  Owner borrower_{OwnerIdentity{.rank = 2, .node_id = 1}, store_,
                  [this](TaskSpec spec) { borrower_sent_.push_back(std::move(spec)); }};
  DirectLinks owner_links_{1};
  DirectLinks borrower_links_{2};
  std::map<std::uint32_t, Owner*> owners_{{1, &owner_}, {2, &borrower_}};
};

TEST_F(TwoOwners, AnObjectABorrowerHoldsOutlivesTheOwnersLastReference) {
  const ObjectId id = owner_.AddInlineObject(internal::Serialize(std::int64_t{42}), {});
  EXPECT_EQ(owner_.OwnerAddress(id), "rank-1");
  auto handle = borrower_.Borrow(id, owner_.OwnerAddress(id));
  EXPECT_EQ(borrower_.OwnerAddress(id), "rank-1");
  owner_.RemoveReference(id);  // the owner's own handle went
  EXPECT_EQ(owner_.counts().owned, 1U);
  EXPECT_EQ(ValueOf(borrower_.Get({id}, std::chrono::seconds(5)).front()), 42);
  borrower_.RemoveReference(id);  // what the handle's destructor does
  EXPECT_EQ(owner_.counts().owned, 0U);
  EXPECT_EQ(borrower_.counts().borrowed, 0U);
}

TEST_F(TwoOwners, AnObjectOnlyADeadBorrowerHeldIsFreedWhenItsEndIsPassedOn) {
  const ObjectId id = owner_.AddInlineObject(internal::Serialize(std::int64_t{42}), {});
  const ObjectId other = owner_.AddInlineObject(internal::Serialize(std::int64_t{7}), {});
  auto handle = borrower_.Borrow(id, owner_.OwnerAddress(id));
  owner_.RemoveReference(id);
  ASSERT_EQ(owner_.counts().owned, 2U) << "the borrower keeps it";
  owner_.ForgetBorrower(3);  // another process ended: nothing it held here
  EXPECT_EQ(owner_.counts().owned, 2U);
  // The borrower dies without giving its registration back.
  owner_.ForgetBorrower(2);
  EXPECT_EQ(owner_.counts().owned, 1U) << "only the dead borrower held it";
  EXPECT_EQ(ValueOf(owner_.Get({other}, std::chrono::seconds(5)).front()), 7)
      << "what the owner holds itself stays";
  owner_.RemoveReference(other);
  EXPECT_EQ(owner_.counts().owned, 0U);
}

// A worker lends a task's result to its submitter after the submitter's
// end reached the owners (it ended while the task ran): the registration
// came too late for the walk and kept the object to the end of the job.
TEST_F(TwoOwners, ARegistrationForABorrowerThatHasEndedIsNotKept) {
  const ObjectId id = owner_.AddInlineObject(internal::Serialize(std::int64_t{3}), {});
  owner_.ForgetBorrower(9);
  // Over the transport, from the lending worker (answered as done).
  EXPECT_TRUE(owner_.AddBorrower(BorrowerChange{.id = id, .borrower = 9, .count = 1}).ok());
  // In the owner's own process.
  SetProcessRuntime(&owner_);
  {
    auto handle = internal::NewObjectHandle(id);
    auto lent = owner_.Lend({handle}, 9);
    ASSERT_TRUE(lent.ok());
    EXPECT_EQ(lent->size(), 1U);
  }
  SetProcessRuntime(nullptr);
  EXPECT_EQ(owner_.counts().owned, 0U) << "the dead receiver keeps nothing";
  // A rank whose end was not reported still registers.
  const ObjectId other = owner_.AddInlineObject(internal::Serialize(std::int64_t{4}), {});
  ASSERT_TRUE(owner_.AddBorrower(BorrowerChange{.id = other, .borrower = 8, .count = 1}).ok());
  owner_.RemoveReference(other);
  EXPECT_EQ(owner_.counts().owned, 1U);
}

// The lending process heard of the receiver's end, the owner of what it
// lends did not (it started after the news): no registration is made.
TEST_F(TwoOwners, LendingToAReceiverKnownToHaveEndedRegistersNothingWithOtherOwners) {
  const ObjectId id = owner_.AddInlineObject(internal::Serialize(std::int64_t{3}), {});
  auto handle = borrower_.Borrow(id, "rank-1");
  borrower_.ForgetBorrower(9);
  auto lent = borrower_.Lend({handle}, 9);
  ASSERT_TRUE(lent.ok());
  ASSERT_EQ(lent->size(), 1U);
  EXPECT_EQ((*lent)[0].owner_address, "rank-1") << "the reference still names its owner";
  owner_.RemoveReference(id);
  borrower_.RemoveReference(id);
  EXPECT_EQ(owner_.counts().owned, 0U) << "a registration for the ended receiver was made";
}

TEST_F(TwoOwners, BorrowersLostWithTheirNodeKeepNothing) {
  const std::uint32_t on_node_2 = kFirstWorkerRank + 2 * kWorkersPerNodeLimit + 5;
  const std::uint32_t on_node_1 = kFirstWorkerRank + 1 * kWorkersPerNodeLimit + 5;
  const ObjectId lost_borrowers = owner_.AddInlineObject(internal::Serialize(std::int64_t{1}), {});
  const ObjectId kept = owner_.AddInlineObject(internal::Serialize(std::int64_t{2}), {});
  ASSERT_TRUE(
      owner_.AddBorrower(BorrowerChange{.id = lost_borrowers, .borrower = on_node_2, .count = 2})
          .ok());
  ASSERT_TRUE(
      owner_
          .AddBorrower(BorrowerChange{.id = lost_borrowers, .borrower = on_node_2 + 1, .count = 1})
          .ok());
  ASSERT_TRUE(
      owner_.AddBorrower(BorrowerChange{.id = kept, .borrower = on_node_1, .count = 1}).ok());
  owner_.RemoveReference(lost_borrowers);
  owner_.RemoveReference(kept);
  ASSERT_EQ(owner_.counts().owned, 2U);
  owner_.ForgetBorrowersOn(2);
  EXPECT_EQ(owner_.counts().owned, 1U) << "only node 2's processes held the first";
  // A registration from the lost node that was still on its way.
  const ObjectId later = owner_.AddInlineObject(internal::Serialize(std::int64_t{3}), {});
  ASSERT_TRUE(
      owner_.AddBorrower(BorrowerChange{.id = later, .borrower = on_node_2 + 7, .count = 1}).ok());
  owner_.RemoveReference(later);
  EXPECT_EQ(owner_.counts().owned, 1U) << "node 1's borrower still holds the second";
  owner_.RemoveBorrower(BorrowerChange{.id = kept, .borrower = on_node_1, .count = 1});
  EXPECT_EQ(owner_.counts().owned, 0U);
}

TEST_F(TwoOwners, ABorrowersGetWaitsForThePendingObject) {
  const ObjectId id = owner_.SubmitTask("f", {}, {});
  auto handle = borrower_.Borrow(id, "rank-1");
  auto got =
      std::async(std::launch::async, [&] { return borrower_.Get({id}, std::chrono::seconds(30)); });
  EXPECT_EQ(got.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  const std::vector<bool> ready = borrower_.Wait({id}, 1, std::chrono::milliseconds(10));
  EXPECT_FALSE(ready[0]);
  ASSERT_EQ(submitted_.size(), 1U);
  owner_.OnTaskOutcome(OutcomeFor(submitted_[0], OutcomeKind::kInlineValue, 6));
  EXPECT_EQ(ValueOf(got.get().front()), 6);
  EXPECT_TRUE(borrower_.Wait({id}, 1, std::chrono::seconds(5))[0]);
}

// Borrowers' addresses stay in the book while they live: out once their end
// or their node's loss is heard of, and a rank the book had already (a
// worker of this node, with its pid) is neither replaced nor taken out.
TEST(BorrowerAddresses, KeepsABorrowersAddressUntilItsEndAndLeavesOthersAlone) {
  auto book = std::make_shared<transport::AddressBook>();
  const std::uint32_t local_worker = kFirstWorkerRank + 1;
  const std::uint32_t on_node_1 = kFirstWorkerRank + kWorkersPerNodeLimit + 1;
  const std::uint32_t also_on_node_1 = on_node_1 + 1;
  const std::uint32_t on_node_2 = kFirstWorkerRank + 2 * kWorkersPerNodeLimit + 1;
  book->Add(local_worker, transport::AddressBook::Entry{.address = transport::BytesOf("mine"),
                                                        .pid = 1234,
                                                        .description = "worker 1 of node 0"});
  BorrowerAddresses borrowers(book);
  borrowers.Note(local_worker, "other");
  borrowers.Note(on_node_1, "one");
  borrowers.Note(also_on_node_1, "one more");
  borrowers.Note(on_node_2, "two");
  borrowers.Note(kFirstWorkerRank + 7, "");  // an asker that sent no address
  ASSERT_TRUE(book->Find(local_worker));
  EXPECT_EQ(book->Find(local_worker)->pid, 1234);
  EXPECT_EQ(std::string(transport::TextOf(book->Find(on_node_1)->address)), "one");
  EXPECT_FALSE(book->Find(kFirstWorkerRank + 7));

  borrowers.Forget(local_worker);
  EXPECT_TRUE(book->Find(local_worker)) << "took out an entry it had not made";
  borrowers.Forget(on_node_2);
  EXPECT_FALSE(book->Find(on_node_2));
  borrowers.ForgetOn(1);
  EXPECT_FALSE(book->Find(on_node_1));
  EXPECT_FALSE(book->Find(also_on_node_1));
}

// Over real transports: a borrower whose address the owner cannot learn
// from the job (a worker of another node) asks for a pending object. The
// owner answers once the task is done, long after the request's handler
// returned: on an endpoint of its own, made from the address the request
// carried, never on the one UCX made for the request, which UCX frees if the
// borrower dies meanwhile (transport.h, Responder).
TEST(OwnerServiceOverTransport, APendingObjectIsAnsweredOnTheOwnersOwnEndpointToTheBorrower) {
  transport::JobToken token{};
  for (auto& byte : token) byte = std::byte{3};
  const auto make = [&token](std::uint32_t rank,
                             const std::shared_ptr<transport::AddressBook>& book) {
    transport::TransportOptions options;
    options.rank = rank;
    options.token = token;
    options.resolve_address = [book](std::uint32_t peer) -> Result<transport::Bytes> {
      if (auto entry = book->Find(peer)) return entry->address;
      return Status::NotFound("no address for rank " + std::to_string(peer));
    };
    auto made = transport::Transport::Create(std::move(options));
    EXPECT_TRUE(made.ok()) << made.status().message();
    return std::move(made).value();
  };
  auto owner_book = std::make_shared<transport::AddressBook>();
  auto borrower_book = std::make_shared<transport::AddressBook>();
  auto owner_transport = make(1, owner_book);
  auto borrower_transport = make(2, borrower_book);
  NoStore store;
  std::vector<TaskSpec> submitted;
  Owner owner{OwnerIdentity{.rank = 1, .node_id = 0}, store,
              [&submitted](TaskSpec spec) { submitted.push_back(std::move(spec)); }};
  Owner borrower{OwnerIdentity{.rank = 2, .node_id = 1}, store, [](const TaskSpec&) {}};
  TransportBorrowLinks owner_links(*owner_transport, owner_book);
  TransportBorrowLinks borrower_links(*borrower_transport, borrower_book);
  owner.SetBorrowLinks(owner_links);
  borrower.SetBorrowLinks(borrower_links);
  const OwnerService service(*owner_transport, owner, 0, owner_book);

  const ObjectId id = owner.SubmitTask("f", {}, {});
  auto handle = borrower.Borrow(id, owner.OwnerAddress(id));
  auto got =
      std::async(std::launch::async, [&] { return borrower.Get({id}, std::chrono::seconds(30)); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (owner_transport->statistics().requests_served < 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(got.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_EQ(submitted.size(), 1U);
  owner.OnTaskOutcome(OutcomeFor(submitted[0], OutcomeKind::kInlineValue, 6));
  ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(internal::Deserialize<std::int64_t>(got.get().front()->bytes(), "test"), 6);
  EXPECT_EQ(owner_transport->statistics().late_replies_on_own_endpoint, 1U);
  EXPECT_EQ(owner_transport->statistics().late_replies_on_request_endpoint, 0U)
      << "answered on the endpoint UCX made for the borrower's request";
  borrower.RemoveReference(id);
}

TEST_F(TwoOwners, ABorrowerWaitingInALoopOnAPendingObjectAsksItsOwnerOnce) {
  const ObjectId id = owner_.SubmitTask("f", {}, {});
  auto handle = borrower_.Borrow(id, "rank-1");
  for (int round = 0; round < 500; ++round) {
    EXPECT_FALSE(borrower_.Wait({id}, 1, std::chrono::milliseconds(0))[0]);
  }
  EXPECT_THROW((void)borrower_.Get({id}, std::chrono::milliseconds(1)), GetTimeoutError);
  EXPECT_EQ(borrower_links_.status_requests.load(), 1);
  EXPECT_EQ(borrower_.counts().waiting_for_owners, 0U)
      << "each Wait and Get that gave up withdrew its place";
  ASSERT_EQ(submitted_.size(), 1U);
  owner_.OnTaskOutcome(OutcomeFor(submitted_[0], OutcomeKind::kInlineValue, 8));
  EXPECT_EQ(ValueOf(borrower_.Get({id}, std::chrono::seconds(5)).front()), 8);
  EXPECT_TRUE(borrower_.Wait({id}, 1, std::chrono::seconds(5))[0]);
}

TEST_F(TwoOwners, ABorrowersGetOfAFailedObjectThrowsTheTasksError) {
  const ObjectId id = owner_.SubmitTask("f", {}, {});
  auto handle = borrower_.Borrow(id, "rank-1");
  owner_.OnTaskOutcome(OutcomeFor(submitted_[0], OutcomeKind::kTaskThrew, 0));
  EXPECT_THROW((void)borrower_.Get({id}, std::chrono::seconds(5)), TaskError);
}

TEST_F(TwoOwners, ABorrowersGetOfAnObjectFreedBeforeItArrivedSaysSo) {
  const ObjectId id = owner_.AddInlineObject(internal::Serialize(std::int64_t{1}), {});
  owner_.RemoveReference(id);
  auto handle = borrower_.Borrow(id, "rank-1");
  try {
    (void)borrower_.Get({id}, std::chrono::seconds(5));
    FAIL() << "Get of a freed object returned";
  } catch (const ObjectLostError& error) {
    EXPECT_NE(std::string(error.what()).find("freed before this reference reached"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(TwoOwners, ABorrowedReferenceAsATaskArgumentIsResolvedByItsOwner) {
  const ObjectId produced = owner_.SubmitTask("f", {}, {});
  internal::TaskArgument argument;
  argument.reference = borrower_.Borrow(produced, "rank-1");
  (void)borrower_.SubmitTask("g", {argument}, {});
  EXPECT_TRUE(borrower_sent_.empty());  // waits for the owner's answer
  owner_.OnTaskOutcome(OutcomeFor(submitted_[0], OutcomeKind::kInlineValue, 11));
  ASSERT_EQ(borrower_sent_.size(), 1U);
  EXPECT_FALSE(borrower_sent_[0].arguments[0].by_reference);
  EXPECT_EQ(internal::Deserialize<std::int64_t>(borrower_sent_[0].arguments[0].value, "test"), 11);
}

// The owner's task result, kept in the store of `node`.
TaskOutcome StoredOn(const TaskSpec& spec, std::uint32_t node) {
  TaskOutcome outcome = FailedOutcome(spec, OutcomeKind::kStoredValue, "");
  outcome.node = node;
  outcome.size = 1 << 20;
  return outcome;
}

TaskOutcome FirstArgumentLost(const TaskSpec& spec) {
  TaskOutcome outcome =
      FailedOutcome(spec, OutcomeKind::kArgumentLost, "cannot read argument object");
  outcome.size = 0;
  return outcome;
}

// An actor whose call's argument was lost with its node asks the caller;
// a caller that only borrows the argument asks its owner in turn (the
// call failed with ObjectLostError before).
TEST_F(TwoOwners, AnActorsLostArgumentThatItsCallerBorrowsIsRebuiltByTheOwner) {
  const ObjectId produced = owner_.SubmitTask("make_block", {}, {});
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  auto handle = borrower_.Borrow(produced, "rank-1");  // the caller, rank 2

  // The caller's side of the actor's question.
  std::optional<ObjectStatus> answer;
  borrower_.WhenRebuilt(produced, 2, 0, [&](ObjectStatus status) { answer = std::move(status); });
  ASSERT_EQ(submitted_.size(), 2U) << "the owner was not asked to recompute it";
  EXPECT_EQ(submitted_.at(1).function, "make_block");
  EXPECT_FALSE(answer.has_value()) << "answered before the rebuild";
  owner_.OnTaskOutcome(StoredOn(submitted_.at(1), 3));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind, static_cast<std::uint8_t>(ObjectStatusKind::kStored));
  EXPECT_EQ(answer->node, 3U);

  // The actor's side: it asks the caller (here, with the loss it saw before
  // the rebuild, the owner answers where the object is now).
  NoStore actor_store;
  Owner actor{OwnerIdentity{.rank = 3, .node_id = 1}, actor_store, [](TaskSpec) {}};
  DirectLinks actor_links{3};
  actor_links.owners = &owners_;
  actor.SetBorrowLinks(actor_links);
  const ArgumentSpec argument{.by_reference = true,
                              .rebuilds_seen = 0,
                              .value = "",
                              .id = produced,
                              .node = 2,
                              .size = 1 << 20};
  const Result<ObjectStatus> status = actor.AskCallerToRebuild(argument, /*caller=*/2);
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(status->kind, static_cast<std::uint8_t>(ObjectStatusKind::kStored));
  EXPECT_EQ(status->node, 3U);
  EXPECT_EQ(submitted_.size(), 2U) << "a copy made since was rebuilt again";
}

TEST_F(TwoOwners, AnActorsLostArgumentItsCallerNoLongerHoldsFailsWithTheReason) {
  const ObjectId produced = owner_.SubmitTask("make_block", {}, {});
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  std::optional<ObjectStatus> answer;
  borrower_.WhenRebuilt(produced, 2, 0, [&](ObjectStatus status) { answer = std::move(status); });
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind, static_cast<std::uint8_t>(ObjectStatusKind::kFailed));
  EXPECT_NE(answer->failure.error_message.find("could not have its owner rebuild it"),
            std::string::npos)
      << answer->failure.error_message;
}

TEST_F(TwoOwners, ABorrowedArgumentThatWasLostIsRebuiltByItsOwnerAndTheTaskRunsAgain) {
  const ObjectId produced = owner_.SubmitTask("make_block", {}, {});
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  internal::TaskArgument argument;
  argument.reference = borrower_.Borrow(produced, "rank-1");
  (void)borrower_.SubmitTask("sum", {argument}, {});
  ASSERT_EQ(borrower_sent_.size(), 1U);
  EXPECT_EQ(borrower_sent_.at(0).arguments[0].node, 2U);

  borrower_.OnTaskOutcome(FirstArgumentLost(borrower_sent_.at(0)));
  ASSERT_EQ(submitted_.size(), 2U) << "the owner did not recompute the lost argument";
  EXPECT_EQ(submitted_.at(1).function, "make_block");
  EXPECT_EQ(borrower_sent_.size(), 1U);  // waits for the rebuilt copy

  owner_.OnTaskOutcome(StoredOn(submitted_.at(1), 3));
  ASSERT_EQ(borrower_sent_.size(), 2U);
  EXPECT_EQ(borrower_sent_.at(1).attempt, 1);
  EXPECT_EQ(borrower_sent_.at(1).arguments[0].node, 3U);
}

TEST_F(TwoOwners, ABorrowedArgumentThatCannotBeRebuiltFailsTheTaskWithTheOwnersReason) {
  internal::TaskOptions once;
  once.max_retries = 0;
  const ObjectId produced = owner_.SubmitTask("make_block", {}, once);
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  internal::TaskArgument argument;
  argument.reference = borrower_.Borrow(produced, "rank-1");
  const ObjectId sum = borrower_.SubmitTask("sum", {argument}, {});
  borrower_.OnTaskOutcome(FirstArgumentLost(borrower_sent_.at(0)));
  EXPECT_EQ(submitted_.size(), 1U);
  EXPECT_EQ(borrower_sent_.size(), 1U);
  try {
    (void)borrower_.Get({sum}, std::chrono::seconds(5));
    FAIL() << "Get did not throw";
  } catch (const ObjectLostError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("node 2 no longer has it"), std::string::npos) << message;
    EXPECT_NE(message.find("task make_block has no retries left"), std::string::npos) << message;
  }
}

TEST_F(TwoOwners, LendingKeepsTheObjectForTheReceiverUntilItGivesItBack) {
  const ObjectId id = owner_.AddInlineObject(internal::Serialize(std::int64_t{3}), {});
  auto handle = borrower_.Borrow(id, "rank-1");
  const internal::ContainedRefs contained{handle, handle};
  auto lent = borrower_.Lend(contained, 9);  // a task result for rank 9
  ASSERT_TRUE(lent.ok());
  ASSERT_EQ(lent->size(), 1U);  // once per object
  EXPECT_EQ((*lent)[0].owner_address, "rank-1");
  owner_.RemoveReference(id);
  borrower_.RemoveReference(id);
  EXPECT_EQ(owner_.counts().owned, 1U);  // rank 9 still counts
  owner_.RemoveBorrower(BorrowerChange{.id = id, .borrower = 9, .count = 1});
  EXPECT_EQ(owner_.counts().owned, 0U);
}

// A result holding its own object Z and a freed borrowed one: the lending
// fails, and Z's registration for the receiver is undone (Z stayed for ever).
TEST_F(TwoOwners, AFailedLendingGivesBackWhatItRegisteredAlready) {
  const ObjectId own = borrower_.AddInlineObject(internal::Serialize(std::int64_t{1}), {});
  const ObjectId freed = owner_.AddInlineObject(internal::Serialize(std::int64_t{2}), {});
  owner_.RemoveReference(freed);
  auto freed_handle = borrower_.Borrow(freed, "rank-1");
  const internal::ContainedRefs contained{internal::NewObjectHandle(own), freed_handle};
  EXPECT_FALSE(borrower_.Lend(contained, 9).ok());
  borrower_.RemoveReference(own);
  EXPECT_EQ(borrower_.counts().owned, 0U);
}

TEST_F(TwoOwners, AResultHoldingTheOwnersOwnObjectKeepsItAliveUntilTheResultGoes) {
  SetProcessRuntime(&owner_);  // dropped handles reach this owner
  const ObjectId inner = owner_.AddInlineObject(internal::Serialize(std::int64_t{5}), {});
  auto original = internal::NewObjectHandle(inner);  // the one reference made
  const ObjectId result = owner_.SubmitTask("f", {}, {});
  // The worker lent `inner` back to its owner, the task's owner, with the result.
  ASSERT_TRUE(owner_.Lend({original}, 1).ok());
  TaskOutcome outcome = OutcomeFor(submitted_[0], OutcomeKind::kInlineValue, 0);
  outcome.contained.push_back(ContainedRef{.id = inner, .owner_address = "rank-1"});
  owner_.OnTaskOutcome(outcome);
  original.reset();
  EXPECT_EQ(owner_.counts().owned, 2U);  // the result holds `inner`
  owner_.RemoveReference(result);
  EXPECT_EQ(owner_.counts().owned, 0U);
  SetProcessRuntime(nullptr);
}

// A store that has lost every copy on `lost_node`; anywhere else an object
// reads as the contents of `file`.
class CopiesLostOnOneNode final : public NoStore {
 public:
  CopiesLostOnOneNode(std::uint32_t lost_node, std::filesystem::path file)
      : lost_node_(lost_node), file_(std::move(file)) {}
  Result<std::string> MakeLocal(const ObjectId&, std::uint32_t node, std::uint64_t) override {
    if (node == lost_node_) return Status::NotFound("no copy on node " + std::to_string(node));
    return file_.string();
  }

 private:
  std::uint32_t lost_node_;
  std::filesystem::path file_;
};

// An owner (rank 1) and a borrower (rank 2) whose stores have lost node 2's copies.
class BorrowerOfALostCopy : public ::testing::Test {
 protected:
  BorrowerOfALostCopy() { LinkDirectly(owner_, owner_links_, borrower_, borrower_links_, owners_); }
  std::size_t Submitted() {
    std::lock_guard lock(submitted_mutex_);
    return submitted_.size();
  }
  TaskSpec SubmittedAt(std::size_t index) {
    std::lock_guard lock(submitted_mutex_);
    return submitted_.at(index);
  }
  bool WaitForSubmitted(std::size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (Submitted() < count) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  // Two objects whose copies were lost with node 2, read by `reader` (the
  // owner or the borrower) in one Get: both rebuilds must be asked for
  // before either is answered, and both new copies read.
  void ExpectAGetOfTwoLostCopiesToRebuildThemAtOnce(Owner& reader) {
    const ObjectId first = owner_.SubmitTask("make_block", {}, {});
    const ObjectId second = owner_.SubmitTask("make_block", {}, {});
    owner_.OnTaskOutcome(StoredOn(SubmittedAt(0), 2));
    owner_.OnTaskOutcome(StoredOn(SubmittedAt(1), 2));
    std::vector<std::shared_ptr<internal::ObjectHandle>> handles;
    if (&reader != &owner_) {
      handles.push_back(reader.Borrow(first, "rank-1"));
      handles.push_back(reader.Borrow(second, "rank-1"));
    }
    auto got = std::async(std::launch::async, [&] {
      return reader.Get({first, second}, std::chrono::seconds(30));
    });
    ASSERT_TRUE(WaitForSubmitted(4)) << "the second rebuild waited for the first";
    owner_.OnTaskOutcome(StoredOn(SubmittedAt(2), 3));
    owner_.OnTaskOutcome(StoredOn(SubmittedAt(3), 3));
    const auto values = got.get();
    ASSERT_EQ(values.size(), 2U);
    EXPECT_EQ(values[0]->bytes(), "rebuilt bytes");
    EXPECT_EQ(values[1]->bytes(), "rebuilt bytes");
  }

  testing::ScratchDirectory scratch_;
  CopiesLostOnOneNode owner_store_{2, scratch_.Write("owner-copy", "rebuilt bytes")};
  CopiesLostOnOneNode borrower_store_{2, scratch_.Write("copy", "rebuilt bytes")};
  std::mutex submitted_mutex_;
  std::vector<TaskSpec> submitted_;
  Owner owner_{OwnerIdentity{.rank = 1, .node_id = 0}, owner_store_, [this](TaskSpec spec) {
                 std::lock_guard lock(submitted_mutex_);
                 submitted_.push_back(std::move(spec));
               }};
  Owner borrower_{OwnerIdentity{.rank = 2, .node_id = 1}, borrower_store_, [](TaskSpec) {}};
  DirectLinks owner_links_{1};
  DirectLinks borrower_links_{2};
  std::map<std::uint32_t, Owner*> owners_{{1, &owner_}, {2, &borrower_}};
};

// A borrower's Get of an object whose only copy was lost failed with "only
// its owner can recompute it", where the owner's own Get recomputed it.
TEST_F(BorrowerOfALostCopy, AGetHasTheOwnerRebuildTheLostCopyAndReadsTheNewOne) {
  const ObjectId produced = owner_.SubmitTask("make_block", {}, {});
  owner_.OnTaskOutcome(StoredOn(SubmittedAt(0), 2));
  auto handle = borrower_.Borrow(produced, "rank-1");
  auto got = std::async(std::launch::async,
                        [&] { return borrower_.Get({produced}, std::chrono::seconds(30)); });
  ASSERT_TRUE(WaitForSubmitted(2)) << "the owner was not asked to recompute the lost copy";
  EXPECT_EQ(SubmittedAt(1).function, "make_block");
  EXPECT_EQ(got.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "answered before the rebuild";
  owner_.OnTaskOutcome(StoredOn(SubmittedAt(1), 3));
  const auto values = got.get();
  ASSERT_EQ(values.size(), 1U);
  EXPECT_EQ(values[0]->bytes(), "rebuilt bytes");
}

// The owner's own Get of several objects lost with a node waited for each
// rebuild before it started the next: recovery took their producers' time
// one after the other.
TEST_F(BorrowerOfALostCopy, AnOwnersGetStartsTheRebuildsOfAllItsLostCopiesAtOnce) {
  ExpectAGetOfTwoLostCopiesToRebuildThemAtOnce(owner_);
}

// A borrower's Get of several copies lost with a node asked for each
// rebuild only after the one before it was answered.
TEST_F(BorrowerOfALostCopy, ABorrowersGetAsksForTheRebuildsOfAllItsLostCopiesAtOnce) {
  ExpectAGetOfTwoLostCopiesToRebuildThemAtOnce(borrower_);
}

// With every rebuild asked for at once, a copy the owner cannot rebuild
// must end the Get when its answer comes, not once the other rebuild (here
// one that never finishes) is answered or the Get times out.
TEST_F(BorrowerOfALostCopy, ACopyThatCannotBeRebuiltEndsTheGetWithoutWaitingForTheOthers) {
  internal::TaskOptions no_retries;
  no_retries.max_retries = 0;
  const ObjectId slow = owner_.SubmitTask("make_block", {}, {});
  const ObjectId cannot = owner_.SubmitTask("make_block", {}, no_retries);
  owner_.OnTaskOutcome(StoredOn(SubmittedAt(0), 2));
  owner_.OnTaskOutcome(StoredOn(SubmittedAt(1), 2));
  auto slow_handle = borrower_.Borrow(slow, "rank-1");
  auto cannot_handle = borrower_.Borrow(cannot, "rank-1");
  const auto started = std::chrono::steady_clock::now();
  try {
    (void)borrower_.Get({slow, cannot}, std::chrono::seconds(30));
    FAIL() << "Get of a copy lost for good returned";
  } catch (const ObjectLostError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot recompute it"), std::string::npos)
        << error.what();
  } catch (const GetTimeoutError& error) {
    FAIL() << "waited for the other rebuild: " << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

TEST_F(BorrowerOfALostCopy, AGetOfALostCopyTheOwnerCannotRebuildSaysWhy) {
  internal::TaskOptions no_retries;
  no_retries.max_retries = 0;
  const ObjectId produced = owner_.SubmitTask("make_block", {}, no_retries);
  owner_.OnTaskOutcome(StoredOn(SubmittedAt(0), 2));
  auto handle = borrower_.Borrow(produced, "rank-1");
  try {
    (void)borrower_.Get({produced}, std::chrono::seconds(10));
    FAIL() << "Get of a copy lost for good returned";
  } catch (const ObjectLostError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot recompute it"), std::string::npos)
        << error.what();
  }
}

TEST_F(BorrowerOfALostCopy, AGetGivesUpWhenEveryRebuiltCopyIsLostAgain) {
  const ObjectId produced = owner_.SubmitTask("make_block", {}, {});
  owner_.OnTaskOutcome(StoredOn(SubmittedAt(0), 2));
  auto handle = borrower_.Borrow(produced, "rank-1");
  auto got = std::async(std::launch::async,
                        [&] { return borrower_.Get({produced}, std::chrono::seconds(30)); });
  for (std::size_t rebuilt = 1; rebuilt <= 3; ++rebuilt) {
    ASSERT_TRUE(WaitForSubmitted(rebuilt + 1)) << "rebuild " << rebuilt << " was not asked for";
    owner_.OnTaskOutcome(StoredOn(SubmittedAt(rebuilt), 2));  // lost again
  }
  try {
    (void)got.get();
    FAIL() << "Get of a copy lost every time returned";
  } catch (const ObjectLostError& error) {
    EXPECT_NE(std::string(error.what()).find("lost again each of the 3 times"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(Submitted(), 4U);
}

}  // namespace
}  // namespace sray::core
