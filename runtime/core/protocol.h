#pragma once

// The messages between driver, node managers and workers, encoded with
// msgpack. Only processes holding the job secret can send them (the
// transport checks every frame), but a malformed one still yields an error,
// never a crash: Decode returns a Status.

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/status.h"
#include "core/event_log.h"
#include "sray/internal/object_id.h"
#include "sray/internal/serialization.h"
#include "sray/placement_strategy.h"
#include "transport/bytes.h"

namespace sray::core {

using internal::ObjectId;
using ResourceMap = std::map<std::string, double>;

// Transport ranks of workers a node manager starts: above every PMIx rank,
// a block of kWorkersPerNodeLimit per node, so a worker's rank names its node.
inline constexpr std::uint32_t kFirstWorkerRank = 0x40000000;
inline constexpr std::uint32_t kWorkersPerNodeLimit = 0x10000;
// How many ended processes an owner remembers, to keep no registration
// for them; a node does not give out the rank of one of its last this many
// ended workers again, so that no owner takes a new process for an ended one.
inline constexpr std::size_t kEndedBorrowersRemembered = 4'096;
// The node whose manager started the worker of `rank`; none for the
// driver's and the node managers' ranks.
inline std::optional<std::uint32_t> NodeOfWorkerRank(std::uint64_t rank) {
  if (rank < kFirstWorkerRank) return std::nullopt;
  return static_cast<std::uint32_t>((rank - kFirstWorkerRank) / kWorkersPerNodeLimit);
}

enum Method : std::uint32_t {
  kRegisterNode = 100,    // node manager -> head, request: NodeDescription
  kClusterView = 101,     // head -> node managers, one-way: ClusterView
  kResourceUpdate = 102,  // node manager -> node managers, one-way: ResourceUpdate
  kShutdownNode = 103,    // head -> node manager, request
  kHeartbeat = 104,       // node manager -> head, request
  kNodeLost = 105,        // head -> node managers, one-way: NodeLost
  kNodeFailed = 106,      // the head's transport -> the head itself, one-way: NodeLost
  kOwnerGone = 107,       // node manager -> every node manager, itself too, one-way: OwnerGone
  // The same news, passed on by each node manager to the owners on its node
  // (its workers, and the driver where it runs): they drop the ended
  // process's borrower registrations.
  kBorrowerGone = 128,  // node manager -> owners on its node, one-way: OwnerGone
  // The head's news of a lost node, passed on likewise: every process of
  // that node ended.
  kBorrowerNodeLost = 108,  // node manager -> owners on its node, one-way: NodeLost
  kSubmitTask = 110,        // owner -> its node manager, or forwarded, one-way: TaskSpec
  kExecuteTask = 111,       // node manager -> worker, one-way: TaskSpec
  kTaskDone = 112,          // worker -> node manager, one-way: TaskOutcome
  kTaskOutcome = 113,       // node manager -> the owner's node manager, one-way: TaskOutcome
  kOwnerOutcome = 114,      // node manager -> an owner on its node, one-way: TaskOutcome
  // A forwarded task that moved on from the node it was sent to: the owner's
  // node manager, which tracks where it runs, follows it.
  kTaskMoved = 115,       // node manager -> the owner's node manager, one-way: TaskMoved
  kRegisterWorker = 120,  // worker -> node manager, request: WorkerRegistration
  kCreateObject = 130,    // process -> its node manager, request: ObjectRequest -> ObjectPath
  kSealObject = 131,      // process -> its node manager, one-way: ObjectRequest
  // The same as a request, answered once sealed (SealWait, core/store_access.h).
  kSealObjectAndAnswer = 129,
  kMakeLocal = 132,        // process -> its node manager, request: ObjectRequest -> ObjectPath
  kDiscardOrphan = 133,    // owner -> holder node manager, one-way: OrphanedResult
  kFreeObject = 134,       // owner -> holder node manager, one-way: FreeObject
  kPinForPull = 135,       // node manager -> holder node manager, request -> PullSource
  kUnpinForPull = 136,     // node manager -> holder node manager, one-way: ObjectRequest
  kStoreUsage = 137,       // any -> node manager, request -> StoreUsage
  kNodeStatus = 138,       // any -> node manager, request -> NodeStatus (the dashboard)
  kWorkerLogs = 139,       // any -> node manager, request: WorkerLogsRequest -> WorkerLogs
  kWorkerBlocked = 121,    // worker -> node manager, one-way: its task waits in Get
  kWorkerUnblocked = 122,  // worker -> node manager, one-way: it runs again
  kActorCallTally = 123,   // actor's worker -> node manager, one-way: ActorCallTally
  // Kill of an actor whose worker can be kept: the worker destroys the
  // instance and answers kActorRetired, or ends its process when it cannot.
  kRetireActor = 124,   // node manager -> actor's worker, one-way: ActorKill
  kActorRetired = 125,  // actor's worker -> node manager, one-way: ActorKill (the one it got)
  // An idle worker above the node's pool size may end only when it owns no
  // object another process may still read (Ray's idle worker killing asks
  // the same): the node manager asks, the worker answers how many it owns.
  kMayWorkerEnd = 126,    // node manager -> idle worker, one-way, empty
  kWorkerEndReply = 127,  // worker -> node manager, one-way: WorkerEndReply
  // The head's actor directory (requests from any process of the job).
  kCreateActor = 140,           // request: ActorCreation -> ActorInfo
  kLookupActor = 141,           // request: ActorLookup -> ActorInfo
  kWaitActorChange = 142,       // one-way to the head: ActorWait; answered by kActorChanged
  kKillActor = 143,             // request: ActorKill
  kActorCreated = 144,          // node manager -> head, one-way: TaskOutcome of the constructor
  kActorWorkerDied = 145,       // node manager -> head, one-way: ActorDeath
  kStopActorWorker = 146,       // head -> node manager, one-way: ActorKill
  kActorCall = 147,             // caller -> actor's worker, one-way: TaskSpec
  kActorCallDone = 149,         // actor's worker -> caller, one-way: TaskOutcome
  kActorChanged = 148,          // head -> caller's node manager -> caller, one-way: ActorChanged
  kCreatePlacementGroup = 150,  // request: PlacementGroupCreation -> PlacementGroupInfo
  kWaitPlacementGroup = 151,    // request: PlacementGroupWait -> PlacementGroupInfo (now)
  kRemovePlacementGroup = 152,  // request: PlacementGroupRemoval
  // Borrowed references (ObjectRefs inside values), between a borrower and
  // the object's owner, directly.
  kAddBorrower = 160,     // borrower -> owner, request: BorrowerChange
  kRemoveBorrower = 161,  // borrower -> owner, one-way: BorrowerChange
  kObjectStatus = 162,  // borrower -> owner, request: StatusRequest -> ObjectStatus, once resolved
};

enum class TaskKind : std::uint8_t {
  kFunction = 0,
  kActorCreation = 1,  // runs the factory; the worker then serves only that actor
  kActorMethod = 2,
};

struct NodeDescription {
  std::uint32_t node_id = 0;
  std::uint32_t rank = 0;  // transport rank of the node's manager
  std::string hostname;
  ResourceMap total;
  std::uint64_t store_capacity = 0;
  MSGPACK_DEFINE(node_id, rank, hostname, total, store_capacity)
};

struct ClusterView {
  std::vector<NodeDescription> nodes;  // indexed by node id
  MSGPACK_DEFINE(nodes)
};

struct ResourceUpdate {
  std::uint32_t node_id = 0;
  ResourceMap available;
  std::uint32_t queued = 0;
  MSGPACK_DEFINE(node_id, available, queued)
};

struct ArgumentSpec {
  bool by_reference = false;
  // Which rebuild of the object this location came from (the owner's
  // ObjectEntry::rebuilds), so a late report of a loss does not rebuild a
  // copy made since. An actor that finds the object lost sends it back with
  // its request to rebuild.
  std::uint16_t rebuilds_seen = 0;
  std::string value;  // the serialized value when not by reference
  ObjectId id;
  std::uint32_t node = 0;  // node whose store holds the object
  std::uint64_t size = 0;
  MSGPACK_DEFINE(by_reference, rebuilds_seen, value, id, node, size)
};

struct TaskSpec {
  std::uint64_t task_id = 0;  // unique per owner
  ObjectId return_id;
  std::string function;
  std::string name;
  std::vector<ArgumentSpec> arguments;
  ResourceMap resources;
  std::uint32_t owner_rank = 0;
  std::uint32_t owner_node = 0;
  std::int32_t attempt = 0;
  std::uint32_t hops = 0;  // node managers it was forwarded through
  // Its node was chosen by the head (an actor's constructor): the node
  // manager runs it there and never moves it for load.
  bool placed = false;
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES chosen at dispatch
  TaskKind kind = TaskKind::kFunction;
  std::uint64_t actor_id = 0;
  std::int32_t incarnation = 0;       // of the actor: 0 first, +1 per restart
  std::uint64_t sequence = 0;         // actor calls: per caller and incarnation, from 0
  std::uint32_t max_concurrency = 1;  // actor creation
  // Actor calls numbered 0: the caller's UCX address, so the actor answers
  // on an endpoint of its own (a caller's reply endpoint is freed by UCX
  // when the caller dies, and answering on it crashed the actor).
  std::string caller_address;
  MSGPACK_DEFINE(task_id, return_id, function, name, arguments, resources, owner_rank, owner_node,
                 attempt, hops, placed, visible_devices, kind, actor_id, incarnation, sequence,
                 max_concurrency, caller_address)
};

enum class OutcomeKind : std::uint8_t {
  kInlineValue = 0,
  kStoredValue = 1,  // in the store of `node`, `size` bytes
  kTaskThrew = 2,
  kWorkerDied = 3,
  kInfeasible = 4,
  kStoreFull = 5,
  kSystemError = 6,
  kActorDied = 7,        // the actor is dead for good: final
  kActorRestarting = 8,  // the call was lost with the actor's process: retryable
  // An argument object was not where the spec said (gone from that store, or
  // its node lost); `size` is the argument's index. Only a worker reports it:
  // the owner rebuilds the argument from its lineage and runs the task again,
  // or fails the task with kObjectLost.
  kArgumentLost = 9,
  kObjectLost = 10,  // an object the task needed is lost for good: ObjectLostError; final
};

// The task returned a value (inline or in a store); every other kind failed.
inline bool HoldsValue(OutcomeKind kind) {
  return kind == OutcomeKind::kInlineValue || kind == OutcomeKind::kStoredValue;
}

// An ObjectRef packed inside a task's result: the task's owner was made a
// borrower of it (by its owner) before the outcome left, and takes over that
// registration.
struct ContainedRef {
  ObjectId id;
  std::string owner_address;
  MSGPACK_DEFINE(id, owner_address)
};

struct TaskOutcome {
  std::uint64_t task_id = 0;
  ObjectId return_id;
  std::uint32_t owner_rank = 0;
  std::uint32_t owner_node = 0;
  std::uint8_t kind = 0;
  std::string value;
  std::uint32_t node = 0;
  std::uint64_t size = 0;
  std::string error_type;
  std::string error_message;
  std::string function;
  std::int64_t pid = 0;
  // Actor creation: the actor and the worker that now serves it.
  std::uint64_t actor_id = 0;
  std::int32_t incarnation = 0;
  std::uint32_t worker_rank = 0;
  std::string worker_address;
  std::string hostname;
  // Value outcomes: the references packed inside the value.
  std::vector<ContainedRef> contained;
  // The attempt of the spec it answers: an outcome of an earlier attempt
  // that arrives while the owner waits to send the next one is dropped.
  std::int32_t attempt = 0;
  MSGPACK_DEFINE(task_id, return_id, owner_rank, owner_node, kind, value, node, size, error_type,
                 error_message, function, pid, actor_id, incarnation, worker_rank, worker_address,
                 hostname, contained, attempt)
};

// An outcome for `spec` without a value: a failure of `kind`.
// What users call a task: its name option, else its function's.
inline const std::string& DisplayName(const TaskSpec& spec) {
  return spec.name.empty() ? spec.function : spec.name;
}

inline TaskOutcome FailedOutcome(const TaskSpec& spec, OutcomeKind kind, std::string message) {
  TaskOutcome outcome;
  outcome.task_id = spec.task_id;
  outcome.return_id = spec.return_id;
  outcome.owner_rank = spec.owner_rank;
  outcome.owner_node = spec.owner_node;
  outcome.kind = static_cast<std::uint8_t>(kind);
  outcome.error_message = std::move(message);
  outcome.function = DisplayName(spec);
  outcome.actor_id = spec.actor_id;
  outcome.incarnation = spec.incarnation;
  outcome.attempt = spec.attempt;
  return outcome;
}

struct WorkerRegistration {
  std::uint32_t rank = 0;
  std::int64_t pid = 0;
  std::string address;
  MSGPACK_DEFINE(rank, pid, address)
};

struct ObjectRequest {
  ObjectId id;
  std::uint64_t size = 0;
  std::uint32_t holder_node = 0;  // kMakeLocal: the node whose store has the object
  std::uint32_t puller_node = 0;  // kPinForPull: the node that will pull it
  std::uint32_t owner_rank = 0;
  // kCreateObject: of the actor whose call makes it (0 for anything else);
  // with the creating process's rank it names the attempt (OrphanedResult).
  std::int32_t incarnation = 0;
  // kPinForPull, kUnpinForPull: which pull of `puller_node` (unique there),
  // so that a pin given up on before its answer can be cancelled.
  std::uint64_t pull = 0;
  MSGPACK_DEFINE(id, size, holder_node, puller_node, owner_rank, incarnation, pull)
};

struct ObjectPath {
  std::string path;
  std::uint64_t size = 0;
  MSGPACK_DEFINE(path, size)
};

struct PullSource {
  std::uint64_t address = 0;
  std::string key;
  std::uint64_t size = 0;
  MSGPACK_DEFINE(address, key, size)
};

struct FreeObject {
  ObjectId id;
  std::uint32_t node = 0;  // whose store to free it from
  MSGPACK_DEFINE(id, node)
};

// A result an actor's process may have stored without its answer reaching
// the caller (the process died, or the answer came after the call was given
// up). Freed only if that very attempt created it: the process of rank
// `made_by`, for the actor's `incarnation` (a retry runs in a later one,
// maybe in the same process, and makes a result of the same id); and only
// once that process no longer serves that incarnation (it may still be
// storing the result).
struct OrphanedResult {
  ObjectId id;
  std::uint32_t node = 0;
  std::uint32_t made_by = 0;
  std::uint64_t actor_id = 0;
  std::int32_t incarnation = 0;
  MSGPACK_DEFINE(id, node, made_by, actor_id, incarnation)
};

// `borrower` takes (kAddBorrower) or gives back (kRemoveBorrower) `count`
// registrations as a holder of references to `id`.
struct BorrowerChange {
  ObjectId id;
  std::uint32_t borrower = 0;
  std::uint32_t count = 1;
  MSGPACK_DEFINE(id, borrower, count)
};

// What an owner knows of a resolved object, for a borrower's Get: its value
// inline, where it is stored, why it failed, or that it is gone.
enum class ObjectStatusKind : std::uint8_t { kInline = 0, kStored = 1, kFailed = 2, kUnknown = 3 };
// A borrower's question to an object's owner. With `rebuild`, the borrower
// found no copy on `lost_on_node` (the node was lost, or the copy is gone):
// the owner recomputes the object from its lineage if it still believes it
// there, and answers once it is resolved again.
struct StatusRequest {
  ObjectId id;
  bool rebuild = false;
  std::uint32_t lost_on_node = 0;
  std::uint16_t rebuilds_seen = 0;  // ObjectStatus::rebuilds of the location that failed
  // The asker's UCX address, filled in as the request is sent: the owner
  // may answer long after, and answers then on an endpoint of its own
  // (transport.h, Responder), which needs the asker's address.
  std::string requester_address{};
  MSGPACK_DEFINE(id, rebuild, lost_on_node, rebuilds_seen, requester_address)
};

struct ObjectStatus {
  std::uint8_t kind = 0;  // ObjectStatusKind
  std::string value;
  std::uint32_t node = 0;
  std::uint64_t size = 0;
  TaskOutcome failure;
  std::uint16_t rebuilds = 0;  // how often the owner rebuilt it (StatusRequest)
  MSGPACK_DEFINE(kind, value, node, size, failure, rebuilds)
};

struct StoreUsage {
  std::uint64_t capacity = 0;
  std::uint64_t in_memory = 0;
  std::uint64_t spilled = 0;
  std::uint64_t objects = 0;
  MSGPACK_DEFINE(capacity, in_memory, spilled, objects)
};

// The tasks of one function on a node, by state, for the dashboard.
struct FunctionTasks {
  std::string function;
  std::uint64_t queued = 0;    // waiting here for resources or a worker
  std::uint64_t running = 0;   // handed to a worker (running, or next in its line)
  std::uint64_t finished = 0;  // returned, since the node started
  std::uint64_t failed = 0;    // threw, or could not run (its owner may retry it)
  MSGPACK_DEFINE(function, queued, running, finished, failed)
};

// An actor's calls by method, as its worker counted them: finished and
// failed since it started, queued and running now. Sent to its node manager
// when they changed, at most every 250 ms; each replaces the one before.
struct ActorCallTally {
  std::uint64_t actor_id = 0;
  std::int32_t incarnation = 0;  // of the actor: a restart counts anew
  std::vector<FunctionTasks> methods;
  MSGPACK_DEFINE(actor_id, incarnation, methods)
};

// A node as the dashboard shows it: resources, queue, workers, store, tasks.
struct NodeStatus {
  std::uint32_t node_id = 0;
  std::string hostname;
  ResourceMap total;
  ResourceMap available;
  std::uint64_t queued = 0;
  std::uint64_t workers = 0;
  StoreUsage store;
  std::vector<Event> events;         // the newest, oldest first
  std::vector<FunctionTasks> tasks;  // by function name
  // The machine's load: its 1-minute load average (-1: unknown), memory, and
  // what the node manager and its workers hold resident.
  double load_average_1m = -1;
  std::uint64_t memory_total = 0;
  std::uint64_t memory_available = 0;
  std::uint64_t resident = 0;
  MSGPACK_DEFINE(node_id, hostname, total, available, queued, workers, store, events, tasks,
                 load_average_1m, memory_total, memory_available, resident)
};

// A worker's log file, or the list of them (worker 0).
struct WorkerLogsRequest {
  std::uint32_t worker = 0;  // 0: list the node's log files
  std::int64_t offset = -1;  // -1: the last max_bytes
  std::uint64_t max_bytes = 64 * 1024;
  MSGPACK_DEFINE(worker, offset, max_bytes)
};
struct WorkerLogFile {
  std::uint32_t worker = 0;
  std::uint64_t size = 0;
  MSGPACK_DEFINE(worker, size)
};
struct WorkerLogs {
  std::vector<WorkerLogFile> files;  // a list
  std::uint64_t offset = 0;          // a read: where `data` starts
  std::uint64_t size = 0;            // the file's size now
  std::string data;
  MSGPACK_DEFINE(files, offset, size, data)
};

// ---- actors and placement groups ----

struct ActorCreation {
  std::string factory;                  // registered name of Class::Create
  std::string name;                     // empty: anonymous
  std::vector<ArgumentSpec> arguments;  // values only
  ResourceMap resources;                // held for the actor's lifetime
  std::int32_t max_restarts = 0;
  std::int32_t max_task_retries = 0;
  std::uint32_t max_concurrency = 1;
  std::uint64_t placement_group = 0;
  std::int32_t bundle_index = -1;
  MSGPACK_DEFINE(factory, name, arguments, resources, max_restarts, max_task_retries,
                 max_concurrency, placement_group, bundle_index)
};

enum class ActorState : std::uint8_t { kPending = 0, kAlive = 1, kRestarting = 2, kDead = 3 };

struct ActorInfo {
  std::uint64_t id = 0;
  std::string name;
  std::string factory;
  std::uint8_t state = 0;  // ActorState
  std::int32_t incarnation = 0;
  std::uint32_t node = 0;
  std::uint32_t worker_rank = 0;
  std::string worker_address;
  std::string hostname;
  std::int64_t pid = 0;
  std::int32_t max_task_retries = 0;
  std::string cause;  // why it died (kDead), or why it last restarted
  MSGPACK_DEFINE(id, name, factory, state, incarnation, node, worker_rank, worker_address, hostname,
                 pid, max_task_retries, cause)
};

struct ActorLookup {
  std::string name;
  MSGPACK_DEFINE(name)
};

// Answered once the actor is alive in an incarnation after `seen` (-1: any),
// or dead. The answer travels as a one-way message through the caller's node
// manager, never as a late reply: UCX may free a dead caller's reply
// endpoint, and a reply on it would crash the head.
struct ActorWait {
  std::uint64_t id = 0;
  std::int32_t seen = -1;
  std::uint32_t caller_rank = 0;
  std::uint32_t caller_node = 0;
  MSGPACK_DEFINE(id, seen, caller_rank, caller_node)
};

struct ActorChanged {
  std::uint32_t caller_rank = 0;  // whom the node manager passes it to
  std::uint64_t id = 0;
  bool found = true;
  std::string error;  // when not found
  ActorInfo info;
  MSGPACK_DEFINE(caller_rank, id, found, error, info)
};

struct ActorKill {
  std::uint64_t id = 0;
  bool no_restart = true;
  std::int32_t incarnation = 0;  // kStopActorWorker: which process to end
  MSGPACK_DEFINE(id, no_restart, incarnation)
};

struct WorkerEndReply {
  std::uint64_t owned_objects = 0;  // objects the worker's process owns now
  MSGPACK_DEFINE(owned_objects)
};

// Task `task_id` of owner `owner_rank`, its try `attempt`, now goes to
// node `node`.
struct TaskMoved {
  std::uint32_t owner_rank = 0;
  std::uint64_t task_id = 0;
  std::int32_t attempt = 0;
  std::uint32_t node = 0;
  // The task's hops once there: moves reach the owner from different nodes,
  // in any order, and only the latest says where the task is.
  std::uint32_t hops = 0;
  MSGPACK_DEFINE(owner_rank, task_id, attempt, node, hops)
};

// A node whose manager the head can no longer reach, or that sent no
// heartbeat for node_timeout: the job goes on without it (its tasks run
// again elsewhere, its actors restart or die), and every process fences its
// processes off (core/node_fence.h).
struct NodeLost {
  std::uint32_t node = 0;
  std::string cause;
  std::uint32_t rank = 0;  // its node manager's transport rank
  MSGPACK_DEFINE(node, cause, rank)
};

// A worker process of the sender's node ended: nobody can read the objects
// it owned any more (a Get asks the owner), so every store frees them.
struct OwnerGone {
  std::uint32_t rank = 0;
  MSGPACK_DEFINE(rank)
};

struct ActorDeath {
  std::uint64_t id = 0;
  std::int32_t incarnation = 0;
  std::uint32_t node = 0;
  std::int64_t pid = 0;
  std::string cause;
  MSGPACK_DEFINE(id, incarnation, node, pid, cause)
};

struct PlacementGroupCreation {
  std::string name;
  std::vector<ResourceMap> bundles;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  MSGPACK_DEFINE(name, bundles, strategy)
};

struct PlacementGroupInfo {
  std::uint64_t id = 0;
  bool placed = false;
  bool removed = false;
  std::vector<std::uint32_t> bundle_nodes;  // when placed
  MSGPACK_DEFINE(id, placed, removed, bundle_nodes)
};

struct PlacementGroupWait {
  std::uint64_t id = 0;
  bool block = true;  // false: answer with the state now
  MSGPACK_DEFINE(id, block)
};

struct PlacementGroupRemoval {
  std::uint64_t id = 0;
  MSGPACK_DEFINE(id)
};

// Appends what msgpack writes to a Bytes: messages are packed straight into
// the buffer the transport sends, without a staging copy.
struct BytesWriter {
  transport::Bytes& bytes;
  void write(const char* data, std::size_t size) {
    const auto* first = reinterpret_cast<const std::byte*>(data);
    bytes.insert(bytes.end(), first, first + size);
  }
};

template <typename Message>
transport::Bytes Encode(const Message& message) {
  transport::Bytes bytes;
  bytes.reserve(256);
  BytesWriter writer{bytes};
  msgpack::pack(writer, message);
  return bytes;
}

template <typename Message>
Result<Message> Decode(std::span<const std::byte> bytes, const char* what) {
  // One zone per thread, emptied after each message: unpacking otherwise
  // allocates and frees a fresh 8 KiB zone for every message.
  thread_local msgpack::zone zone;
  struct ClearZone {
    ~ClearZone() { zone.clear(); }
  } clear_zone;
  try {
    std::size_t offset = 0;
    // Control messages nest a few levels (a task's arguments' references).
    constexpr std::size_t kDeepestMessage = 16;
    const msgpack::object object =
        msgpack::unpack(zone, reinterpret_cast<const char*>(bytes.data()), bytes.size(), offset,
                        nullptr, nullptr, internal::UnpackLimitFor(bytes.size(), kDeepestMessage));
    return object.as<Message>();
  } catch (const std::exception& error) {
    return Status::InvalidArgument(std::string("malformed ") + what + " message: " + error.what());
  }
}

}  // namespace sray::core

MSGPACK_ADD_ENUM(sray::core::TaskKind);
