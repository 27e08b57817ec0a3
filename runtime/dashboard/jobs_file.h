#pragma once

// ~/.sray/jobs/<job>.<step>.json: where a running job's dashboard listens and
// its token, for tools of the job user (sray status, sray logs) on the head
// node or a login node sharing the home directory. Readable by the job user
// only (the directory 0700, the file 0600, written under a temporary name
// and renamed); removed when the JobsFile goes (the step ends).
//
// Thread-safety: not shared between threads.

#include <filesystem>
#include <memory>
#include <string>

#include "common/status.h"

namespace sray::dashboard {

struct JobsFileContent {
  std::string job_id;
  std::string step_id;
  std::string url;
  std::string token;
  std::string head_hostname;
  long pid = 0;
};

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
