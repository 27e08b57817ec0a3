#pragma once

// ~/.sray/jobs/<job>.<step>.json: where a running job's dashboard listens and
// its token, for tools of the job user (sray status, sray logs) on the head
// node or a login node sharing the home directory. Readable by the job user
// only (the directory 0700, the file 0600, written under a temporary name
// and renamed); removed when the JobsFile goes (the step ends). The writer
// (the driver) and the reader (ListJobs, for the tools) are both here.
//
// Thread-safety: not shared between threads.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray::dashboard {

struct JobsFileContent {
  std::string job_id;
  std::string step_id;
  std::string url;
  // The same dashboard from the head itself (DashboardLocalUrl); empty in
  // the files of drivers before it was written.
  std::string local_url;
  std::string token;
  std::string head_hostname;
  long pid = 0;
  // The Slurm cluster's name (SLURM_CLUSTER_NAME), empty under `sray run`:
  // tells apart jobs of the same number on clusters that share a home.
  std::string cluster;
};

// HOME/.sray/jobs: where the jobs files are.
std::filesystem::path JobsDirectory(const std::filesystem::path& home);
// The jobs file of step `step_id` of job `job_id` under `home`.
std::filesystem::path JobsFilePath(const std::filesystem::path& home, const std::string& job_id,
                                   const std::string& step_id);

// This process's user's home: $HOME when absolute, else the password
// database's; empty when neither is known.
std::filesystem::path UserHome();

// Every jobs file under `home`, newest first; files that do not parse are
// skipped (a driver killed while writing leaves only a .tmp).
std::vector<JobsFileContent> ListJobs(const std::filesystem::path& home);
// Removes the jobs file of a step whose driver ended without removing it
// (killed): for the launcher, once the step is over. Absent is fine.
void RemoveJobsFile(const std::filesystem::path& home, const std::string& job_id,
                    const std::string& step_id);

// The file in the driver's session directory that names the home its jobs
// file is under. What cleans up after a killed driver runs with another
// $HOME (slurmstepd's user child, the launcher, its janitor) and would look
// in the wrong home: a driver started with HOME=/elsewhere left its file.
inline constexpr const char* kJobsFileHomeNote = "jobs-file-home";
Status NoteJobsFileHome(const std::filesystem::path& session_directory,
                        const std::filesystem::path& home);
// RemoveJobsFile under the home noted in `session_directory`; nothing when
// there is no note (no driver ran there, or it wrote no jobs file).
void RemoveNotedJobsFile(const std::filesystem::path& session_directory, const std::string& job_id,
                         const std::string& step_id);

class JobsFile {
 public:
  // `home`: the job user's home directory.
  static Result<std::unique_ptr<JobsFile>> Write(const std::filesystem::path& home,
                                                 const JobsFileContent& content);
  ~JobsFile();
  JobsFile(const JobsFile&) = delete;
  JobsFile& operator=(const JobsFile&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  explicit JobsFile(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace sray::dashboard
