#include "wire/pmix_client.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "wire/pmix_status.h"

namespace sray::wire {
namespace {

pmix_proc_t ProcOf(const pmix_proc_t& self, pmix_rank_t rank) {
  pmix_proc_t proc;
  PMIX_PROC_CONSTRUCT(&proc);
  std::memcpy(proc.nspace, self.nspace, PMIX_MAX_NSLEN + 1);
  proc.rank = rank;
  return proc;
}

// Owns a pmix_value_t returned by PMIx_Get.
struct ValueDeleter {
  void operator()(pmix_value_t* value) const { PMIX_VALUE_RELEASE(value); }
};
using OwnedValue = std::unique_ptr<pmix_value_t, ValueDeleter>;

Result<OwnedValue> GetValue(const pmix_proc_t& proc, const char* key, bool optional) {
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  bool flag = true;
  PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &flag, PMIX_BOOL);
  pmix_value_t* value = nullptr;
  const pmix_status_t status =
      PMIx_Get(&proc, key, optional ? &info : nullptr, optional ? 1 : 0, &value);
  PMIX_INFO_DESTRUCT(&info);
  SRAY_RETURN_IF_ERROR(FromPmix(
      status, std::string("PMIx has no '") + key + "' for rank " + std::to_string(proc.rank)));
  return OwnedValue(value);
}

Result<std::uint32_t> AsNumber(const pmix_value_t& value, const char* key) {
  switch (value.type) {
    case PMIX_UINT32: return value.data.uint32;
    case PMIX_UINT16: return value.data.uint16;
    case PMIX_UINT64: return static_cast<std::uint32_t>(value.data.uint64);
    case PMIX_INT: return static_cast<std::uint32_t>(value.data.integer);
    case PMIX_PROC_RANK: return value.data.rank;
    default:
      return Status::Internal(std::string("PMIx value '") + key + "' has unexpected type " +
                              PMIx_Data_type_string(value.type));
  }
}

}  // namespace

Result<std::unique_ptr<PmixClient>> PmixClient::Connect() {
  pmix_proc_t self;
  PMIX_PROC_CONSTRUCT(&self);
  const pmix_status_t status = PMIx_Init(&self, nullptr, 0);
  if (status != PMIX_SUCCESS) {
    return FromPmix(status, "cannot connect to the PMIx server")
        .WithRemedy(
            "start the program with `srun --ray-cluster` (MpiDefault=pmix or --mpi=pmix) "
            "or `sray run`");
  }
  auto client = std::unique_ptr<PmixClient>(new PmixClient(self));
  SRAY_RETURN_IF_ERROR(client->LoadLayout());
  return client;
}

void PmixClient::PrepareEnvironment() {
  // What pmix_rte_init does, and with the same rule (never over a value
  // already there): OpenPMIx 4 and 5 turn the server's security mode into
  // the psec framework's selection this way.
  if (const char* mode = std::getenv("PMIX_SECURITY_MODE"); mode != nullptr) {
    ::setenv("PMIX_MCA_psec", mode, 0);
  }
}

PmixClient::~PmixClient() {
  PMIx_Finalize(nullptr, 0);
}

Status PmixClient::LoadLayout() {
  layout_.rank = self_.rank;
  layout_.namespace_name = self_.nspace;
  const pmix_proc_t wildcard = ProcOf(self_, PMIX_RANK_WILDCARD);
  struct Wanted {
    const pmix_proc_t* proc;
    const char* key;
    std::uint32_t* field;
  };
  for (const Wanted& wanted : {Wanted{&wildcard, PMIX_JOB_SIZE, &layout_.size},
                               Wanted{&self_, PMIX_LOCAL_RANK, &layout_.local_rank},
                               Wanted{&wildcard, PMIX_LOCAL_SIZE, &layout_.local_size},
                               Wanted{&self_, PMIX_NODEID, &layout_.node_id},
                               Wanted{&wildcard, PMIX_NUM_NODES, &layout_.num_nodes}}) {
    auto value = GetValue(*wanted.proc, wanted.key, false);
    if (!value.ok()) return value.status().WithContext("reading the job layout");
    auto number = AsNumber(**value, wanted.key);
    if (!number.ok()) return number.status();
    *wanted.field = *number;
  }
  auto hostname = GetValue(self_, PMIX_HOSTNAME, false);
  if (!hostname.ok()) return hostname.status().WithContext("reading the job layout");
  if ((*hostname)->type != PMIX_STRING) return Status::Internal("PMIx hostname is not a string");
  layout_.hostname = (*hostname)->data.string;
  return Status::Ok();
}

Status PmixClient::Put(Scope scope, const std::string& key, std::span<const std::byte> value) {
  pmix_value_t pmix_value;
  PMIX_VALUE_CONSTRUCT(&pmix_value);
  pmix_value.type = PMIX_BYTE_OBJECT;
  // PMIx_Put copies the value; the cast only satisfies its non-const field.
  pmix_value.data.bo.bytes = reinterpret_cast<char*>(const_cast<std::byte*>(value.data()));
  pmix_value.data.bo.size = value.size();
  const pmix_scope_t pmix_scope = scope == Scope::kLocal    ? PMIX_LOCAL
                                  : scope == Scope::kRemote ? PMIX_REMOTE
                                                            : PMIX_GLOBAL;
  return FromPmix(PMIx_Put(pmix_scope, key.c_str(), &pmix_value), "cannot publish '" + key + "'");
}

Status PmixClient::Abort(int status, const std::string& message) {
  const pmix_proc_t wildcard = ProcOf(self_, PMIX_RANK_WILDCARD);
  return FromPmix(PMIx_Abort(status, message.c_str(), const_cast<pmix_proc_t*>(&wildcard), 1),
                  "cannot abort the job");
}

Status PmixClient::Commit() {
  return FromPmix(PMIx_Commit(), "cannot commit published values");
}

namespace {

// Shared by a fence's waiter and its completion callback; whichever lets go
// last frees it, so a callback arriving after a timeout is still safe.
struct FenceWait {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  pmix_status_t status = PMIX_ERROR;
  int holders = 2;

  // Returns true when the caller was the last holder and must delete.
  bool Release() {
    std::lock_guard lock(mutex);
    return --holders == 0;
  }
  static void Done(pmix_status_t status, void* cbdata) {
    auto* wait = static_cast<FenceWait*>(cbdata);
    {
      std::lock_guard lock(wait->mutex);
      wait->done = true;
      wait->status = status;
    }
    wait->finished.notify_all();
    if (wait->Release()) delete wait;
  }
};

}  // namespace

Status PmixClient::Fence(std::chrono::seconds timeout) {
  // Always with data collection: under Slurm 22.05's PMIx plugin a fence
  // without it (PMIX_COLLECT_DATA=false or no info) returned at once on rank
  // 0 while rank 1 was still 2 s away (transport_check fence), so it was no
  // barrier. Collecting costs one small exchange when nothing new was put.
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  bool collect_data = true;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect_data, PMIX_BOOL);
  const pmix_proc_t wildcard = ProcOf(self_, PMIX_RANK_WILDCARD);
  auto* wait = new FenceWait();
  const pmix_status_t started = PMIx_Fence_nb(&wildcard, 1, &info, 1, &FenceWait::Done, wait);
  PMIX_INFO_DESTRUCT(&info);
  if (started != PMIX_SUCCESS) {
    delete wait;  // the callback will not run
    if (started == PMIX_OPERATION_SUCCEEDED) return Status::Ok();
    return FromPmix(started, "the job-wide PMIx fence failed");
  }
  // A fence that never completes must become an error, not a silent hang
  // (seen once under srun: one rank stayed in the wire-up fence while the
  // others had left it).
  bool done = false;
  pmix_status_t status = PMIX_ERROR;
  {
    std::unique_lock lock(wait->mutex);
    done = wait->finished.wait_for(lock, timeout, [wait] { return wait->done; });
    status = wait->status;
  }
  if (wait->Release()) delete wait;
  if (!done) {
    // The namespace names the step (Slurm's is slurm.pmix.JOB.STEP), so the
    // step can be matched with Slurm's log lines about it.
    return Status::Unavailable("the job-wide PMIx fence of namespace " + std::string(self_.nspace) +
                               " did not complete within " + std::to_string(timeout.count()) +
                               " s: a process of the job is missing or hung, or the launcher's "
                               "PMIx server lost the collective (under Slurm 22.05, look for "
                               "'Munge decode failed' in the slurmd log: a known Slurm race "
                               "when a node starts slowly); rerun the step");
  }
  return FromPmix(status, "the job-wide PMIx fence failed")
      .WithRemedy("another process of the job probably died before reaching it");
}

Result<std::vector<std::byte>> PmixClient::Get(std::uint32_t rank, const std::string& key,
                                               bool optional) {
  auto value = GetValue(ProcOf(self_, rank), key.c_str(), optional);
  if (!value.ok()) return value.status();
  if ((*value)->type != PMIX_BYTE_OBJECT) {
    return Status::Internal("PMIx value '" + key + "' of rank " + std::to_string(rank) +
                            " is not a byte object");
  }
  const auto* begin = reinterpret_cast<const std::byte*>((*value)->data.bo.bytes);
  return std::vector<std::byte>(begin, begin + (*value)->data.bo.size);
}

}  // namespace sray::wire
