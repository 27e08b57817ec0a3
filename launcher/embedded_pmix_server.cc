#include "embedded_pmix_server.h"

#include <pmix_server.h>

#include <cstdlib>
#include <cstring>
#include <future>

#include "wire/pmix_status.h"

namespace sray::launcher {
namespace {

using wire::FromPmix;

// PMIx keeps one server per process; the module's C callbacks reach the
// instance through this pointer, set while the server runs.
EmbeddedPmixServer* g_server = nullptr;

// Waits for a pmix_op_cbfunc_t completion of an asynchronous PMIx call.
struct OperationWait {
  std::promise<pmix_status_t> promise;
  static void Done(pmix_status_t status, void* cbdata) {
    static_cast<OperationWait*>(cbdata)->promise.set_value(status);
  }
};

// An owned pmix_info_t list built with PMIx's own helpers.
class InfoList {
 public:
  InfoList() : list_(PMIx_Info_list_start()) {}
  ~InfoList() { PMIx_Info_list_release(list_); }
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;

  Status Add(const char* key, const void* value, pmix_data_type_t type) {
    return FromPmix(PMIx_Info_list_add(list_, key, value, type),
                    std::string("cannot build PMIx info ") + key);
  }
  Status AddString(const char* key, const std::string& value) {
    return Add(key, value.c_str(), PMIX_STRING);
  }
  Status AddUint32(const char* key, std::uint32_t value) { return Add(key, &value, PMIX_UINT32); }
  Status AddUint16(const char* key, std::uint16_t value) { return Add(key, &value, PMIX_UINT16); }
  Status AddRank(const char* key, pmix_rank_t value) { return Add(key, &value, PMIX_PROC_RANK); }
  // Adds `nested` as a data array under `key` (node and process arrays).
  Status AddArray(const char* key, InfoList& nested) {
    pmix_data_array_t array;
    PMIX_DATA_ARRAY_CONSTRUCT(&array, 0, PMIX_INFO);
    SRAY_RETURN_IF_ERROR(FromPmix(PMIx_Info_list_convert(nested.list_, &array),
                                  std::string("cannot build PMIx array ") + key));
    Status status = Add(key, &array, PMIX_DATA_ARRAY);
    PMIX_DATA_ARRAY_DESTRUCT(&array);
    return status;
  }
  // Converts into a caller-owned array (released with PMIX_DATA_ARRAY_DESTRUCT).
  Status Convert(pmix_data_array_t& array) {
    PMIX_DATA_ARRAY_CONSTRUCT(&array, 0, PMIX_INFO);
    return FromPmix(PMIx_Info_list_convert(list_, &array), "cannot build PMIx info");
  }

 private:
  void* list_;
};

std::string Joined(const std::vector<std::string>& items, char separator) {
  std::string joined;
  for (const auto& item : items) {
    if (!joined.empty()) joined += separator;
    joined += item;
  }
  return joined;
}

Result<std::string> Generated(pmix_status_t (*generate)(const char*, char**),
                              const std::string& input, const char* what) {
  char* output = nullptr;
  SRAY_RETURN_IF_ERROR(
      FromPmix(generate(input.c_str(), &output), std::string("cannot generate the PMIx ") + what));
  std::string text(output);
  std::free(output);
  return text;
}

}  // namespace

// The C callbacks PMIx invokes. Each completes through the executor thread.
class EmbeddedPmixServer::Module {
 public:
  static pmix_status_t ClientConnected(const pmix_proc_t* /*proc*/, void* /*server_object*/,
                                       pmix_op_cbfunc_t /*cbfunc*/, void* /*cbdata*/) {
    return PMIX_OPERATION_SUCCEEDED;
  }

  static pmix_status_t ClientFinalized(const pmix_proc_t* /*proc*/, void* /*server_object*/,
                                       pmix_op_cbfunc_t cbfunc, void* cbdata) {
    // The client blocks in PMIx_Finalize until this callback runs.
    if (cbfunc == nullptr) return PMIX_OPERATION_SUCCEEDED;
    g_server->Execute([cbfunc, cbdata] { cbfunc(PMIX_SUCCESS, cbdata); });
    return PMIX_SUCCESS;
  }

  static pmix_status_t Abort(const pmix_proc_t* proc, void* /*server_object*/, int status,
                             const char message[], pmix_proc_t /*procs*/[], size_t /*nprocs*/,
                             pmix_op_cbfunc_t cbfunc, void* cbdata) {
    AbortRequest request{.rank = proc->rank,
                         .status = ExitStatusOfAbort(status),
                         .message = message != nullptr ? message : ""};
    g_server->Execute([request, cbfunc, cbdata] {
      std::function<void(const AbortRequest&)> on_abort;
      {
        std::lock_guard lock(g_server->mutex_);
        on_abort = g_server->on_abort_;
      }
      if (on_abort) on_abort(request);
      if (cbfunc != nullptr) cbfunc(PMIX_SUCCESS, cbdata);
    });
    return PMIX_SUCCESS;
  }

  static pmix_status_t FenceNb(const pmix_proc_t /*procs*/[], size_t /*nprocs*/,
                               const pmix_info_t /*info*/[], size_t /*ninfo*/, char* data,
                               size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
    // Every process of the job is local to this one server, so the
    // collective is already complete: hand the collected data back. The
    // copy is released by PMIx through the release callback.
    auto* copy = new std::string(data != nullptr ? std::string(data, ndata) : std::string());
    g_server->Execute([copy, cbfunc, cbdata] {
      cbfunc(
          PMIX_SUCCESS, copy->data(), copy->size(), cbdata,
          [](void* release_data) { delete static_cast<std::string*>(release_data); }, copy);
    });
    return PMIX_SUCCESS;
  }

  static pmix_status_t DirectModex(const pmix_proc_t* /*proc*/, const pmix_info_t /*info*/[],
                                   size_t /*ninfo*/, pmix_modex_cbfunc_t /*cbfunc*/,
                                   void* /*cbdata*/) {
    // Nothing lives on another server: what the local store lacks does not exist.
    return PMIX_ERR_NOT_FOUND;
  }
};

Result<std::unique_ptr<EmbeddedPmixServer>> EmbeddedPmixServer::Start(
    const std::filesystem::path& temporary_directory) {
  if (g_server != nullptr) {
    return Status::Internal("a PMIx server is already running in this process");
  }
  auto server = std::unique_ptr<EmbeddedPmixServer>(new EmbeddedPmixServer());
  server->executor_ = std::thread([raw = server.get()] { raw->RunExecutor(); });
  g_server = server.get();

  static pmix_server_module_t module = [] {
    pmix_server_module_t filled;
    std::memset(&filled, 0, sizeof(filled));
    filled.client_connected = &Module::ClientConnected;
    filled.client_finalized = &Module::ClientFinalized;
    filled.abort = &Module::Abort;
    filled.fence_nb = &Module::FenceNb;
    filled.direct_modex = &Module::DirectModex;
    return filled;
  }();

  InfoList info;
  // Explicit directories: inherited PMIX_* settings (an enclosing srun step)
  // must never point this server at Slurm's rendezvous files.
  SRAY_RETURN_IF_ERROR(info.AddString(PMIX_SERVER_TMPDIR, temporary_directory.string()));
  SRAY_RETURN_IF_ERROR(info.AddString(PMIX_SYSTEM_TMPDIR, temporary_directory.string()));
  bool no = false;
  SRAY_RETURN_IF_ERROR(info.Add(PMIX_SERVER_TOOL_SUPPORT, &no, PMIX_BOOL));
  SRAY_RETURN_IF_ERROR(info.Add(PMIX_SERVER_SYSTEM_SUPPORT, &no, PMIX_BOOL));
  pmix_data_array_t array;
  SRAY_RETURN_IF_ERROR(info.Convert(array));
  const pmix_status_t status =
      PMIx_server_init(&module, static_cast<pmix_info_t*>(array.array), array.size);
  PMIX_DATA_ARRAY_DESTRUCT(&array);
  if (status != PMIX_SUCCESS) {
    return FromPmix(status, "cannot start the embedded PMIx server")
        .WithRemedy("check that " + temporary_directory.string() + " is writable");
  }
  return server;
}

EmbeddedPmixServer::~EmbeddedPmixServer() {
  if (namespace_registered_) {
    OperationWait wait;
    auto done = wait.promise.get_future();
    PMIx_server_deregister_nspace(namespace_name_.c_str(), &OperationWait::Done, &wait);
    done.wait_for(std::chrono::seconds(10));
  }
  PMIx_server_finalize();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (executor_.joinable()) executor_.join();
  g_server = nullptr;
}

void EmbeddedPmixServer::OnAbort(std::function<void(const AbortRequest&)> on_abort) {
  std::lock_guard lock(mutex_);
  on_abort_ = std::move(on_abort);
}

void EmbeddedPmixServer::Execute(std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    work_.push_back(std::move(work));
  }
  changed_.notify_one();
}

void EmbeddedPmixServer::RunExecutor() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || !work_.empty(); });
      if (work_.empty()) return;
      work = std::move(work_.front());
      work_.pop_front();
    }
    work();
  }
}

Status EmbeddedPmixServer::RegisterJob(const EmulatedJobLayout& layout, uid_t uid, gid_t gid) {
  namespace_name_ = layout.namespace_name;
  const std::uint32_t size = layout.size();

  std::vector<std::string> all_ranks;
  std::vector<std::string> ranks_by_node;
  for (std::uint32_t node = 0; node < layout.num_nodes; ++node) {
    std::vector<std::string> ranks;
    for (std::uint32_t local = 0; local < layout.tasks_per_node; ++local) {
      ranks.push_back(std::to_string(node * layout.tasks_per_node + local));
    }
    ranks_by_node.push_back(Joined(ranks, ','));
    all_ranks.insert(all_ranks.end(), ranks.begin(), ranks.end());
  }
  auto node_map = Generated(&PMIx_generate_regex, Joined(layout.node_names, ','), "node map");
  if (!node_map.ok()) return node_map.status();
  auto proc_map = Generated(&PMIx_generate_ppn, Joined(ranks_by_node, ';'), "process map");
  if (!proc_map.ok()) return proc_map.status();

  InfoList job;
  SRAY_RETURN_IF_ERROR(job.AddUint32(PMIX_UNIV_SIZE, size));
  SRAY_RETURN_IF_ERROR(job.AddUint32(PMIX_JOB_SIZE, size));
  SRAY_RETURN_IF_ERROR(job.AddUint32(PMIX_MAX_PROCS, size));
  SRAY_RETURN_IF_ERROR(job.AddString(PMIX_JOBID, layout.job_id));
  SRAY_RETURN_IF_ERROR(job.AddUint32(PMIX_NUM_NODES, layout.num_nodes));
  SRAY_RETURN_IF_ERROR(job.AddUint32(PMIX_JOB_NUM_APPS, 1));
  SRAY_RETURN_IF_ERROR(job.AddString(PMIX_NODE_MAP, *node_map));
  SRAY_RETURN_IF_ERROR(job.AddString(PMIX_PROC_MAP, *proc_map));
  // Every process is local to this one server (PMIX_LOCAL data reaches all
  // of them); the emulated node a process belongs to is its PMIX_NODEID.
  SRAY_RETURN_IF_ERROR(job.AddString(PMIX_LOCAL_PEERS, Joined(all_ranks, ',')));
  SRAY_RETURN_IF_ERROR(job.AddUint32(PMIX_LOCAL_SIZE, layout.tasks_per_node));

  for (std::uint32_t node = 0; node < layout.num_nodes; ++node) {
    InfoList node_info;
    SRAY_RETURN_IF_ERROR(node_info.AddUint32(PMIX_NODEID, node));
    SRAY_RETURN_IF_ERROR(node_info.AddString(PMIX_HOSTNAME, layout.node_names[node]));
    SRAY_RETURN_IF_ERROR(node_info.AddUint32(PMIX_LOCAL_SIZE, layout.tasks_per_node));
    SRAY_RETURN_IF_ERROR(node_info.AddString(PMIX_LOCAL_PEERS, ranks_by_node[node]));
    SRAY_RETURN_IF_ERROR(job.AddArray(PMIX_NODE_INFO_ARRAY, node_info));
  }
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    InfoList process;
    const std::uint32_t node = layout.NodeOf(rank);
    SRAY_RETURN_IF_ERROR(process.AddRank(PMIX_RANK, rank));
    SRAY_RETURN_IF_ERROR(
        process.AddUint16(PMIX_LOCAL_RANK, static_cast<std::uint16_t>(layout.LocalRankOf(rank))));
    SRAY_RETURN_IF_ERROR(
        process.AddUint16(PMIX_NODE_RANK, static_cast<std::uint16_t>(layout.LocalRankOf(rank))));
    SRAY_RETURN_IF_ERROR(process.AddUint32(PMIX_NODEID, node));
    SRAY_RETURN_IF_ERROR(process.AddString(PMIX_HOSTNAME, layout.node_names[node]));
    SRAY_RETURN_IF_ERROR(process.AddUint32(PMIX_APPNUM, 0));
    SRAY_RETURN_IF_ERROR(job.AddArray(PMIX_PROC_INFO_ARRAY, process));
  }

  pmix_data_array_t array;
  SRAY_RETURN_IF_ERROR(job.Convert(array));
  OperationWait wait;
  auto done = wait.promise.get_future();
  const pmix_status_t started = PMIx_server_register_nspace(
      namespace_name_.c_str(), static_cast<int>(size), static_cast<pmix_info_t*>(array.array),
      array.size, &OperationWait::Done, &wait);
  pmix_status_t status = started;
  if (started == PMIX_SUCCESS) status = done.get();
  if (started == PMIX_OPERATION_SUCCEEDED) status = PMIX_SUCCESS;
  PMIX_DATA_ARRAY_DESTRUCT(&array);
  SRAY_RETURN_IF_ERROR(FromPmix(status, "cannot register the job with the PMIx server"));
  namespace_registered_ = true;

  for (std::uint32_t rank = 0; rank < size; ++rank) {
    pmix_proc_t proc;
    PMIX_PROC_LOAD(&proc, namespace_name_.c_str(), rank);
    OperationWait client_wait;
    auto client_done = client_wait.promise.get_future();
    const pmix_status_t client_started =
        PMIx_server_register_client(&proc, uid, gid, nullptr, &OperationWait::Done, &client_wait);
    pmix_status_t client_status = client_started;
    if (client_started == PMIX_SUCCESS) client_status = client_done.get();
    if (client_started == PMIX_OPERATION_SUCCEEDED) client_status = PMIX_SUCCESS;
    SRAY_RETURN_IF_ERROR(FromPmix(
        client_status, "cannot register rank " + std::to_string(rank) + " with the PMIx server"));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> EmbeddedPmixServer::ClientEnvironment(std::uint32_t rank) {
  pmix_proc_t proc;
  PMIX_PROC_LOAD(&proc, namespace_name_.c_str(), rank);
  // PMIx appends to a NULL-terminated, malloc-owned array.
  char** environment = static_cast<char**>(std::calloc(1, sizeof(char*)));
  if (environment == nullptr) return Status::IoError("out of memory");
  const pmix_status_t status = PMIx_server_setup_fork(&proc, &environment);
  std::vector<std::string> variables;
  for (char** entry = environment; entry != nullptr && *entry != nullptr; ++entry) {
    variables.emplace_back(*entry);
    std::free(*entry);
  }
  std::free(environment);
  SRAY_RETURN_IF_ERROR(
      FromPmix(status, "cannot prepare the PMIx environment of rank " + std::to_string(rank)));
  return variables;
}

}  // namespace sray::launcher
