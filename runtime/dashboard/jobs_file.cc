#include "dashboard/jobs_file.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/private_file.h"

namespace sray::dashboard {
namespace {

// Creates `directory` with `mode` if missing; refuses one that others can
// enter or that is not a plain directory of this user.
Status PrivateDirectory(const std::filesystem::path& directory) {
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + directory.string());
  }
  struct stat info {};
  if (::lstat(directory.c_str(), &info) != 0) {
    return Status::FromErrno(errno, "stat " + directory.string());
  }
  if (!S_ISDIR(info.st_mode) || info.st_uid != ::geteuid() || (info.st_mode & 0077) != 0) {
    return Status::PermissionDenied(directory.string() +
                                    " is not a directory private to this user: remove it, or "
                                    "make it mode 0700 and yours");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<JobsFile>> JobsFile::Write(const std::filesystem::path& home,
                                                  const JobsFileContent& content) {
  for (const auto& directory : {home / ".sray", JobsDirectory(home)}) {
    const Status made = PrivateDirectory(directory);
    if (!made.ok()) return made;
  }
  const std::filesystem::path path = JobsFilePath(home, content.job_id, content.step_id);
  const std::string text =
      nlohmann::json{{"job_id", content.job_id}, {"step_id", content.step_id},
                     {"url", content.url},       {"local_url", content.local_url},
                     {"token", content.token},   {"head_hostname", content.head_hostname},
                     {"pid", content.pid},       {"cluster", content.cluster}}
          .dump(2) +
      "\n";
  if (Status written = WritePrivateFile(path, text); !written.ok()) return written;
  return std::unique_ptr<JobsFile>(new JobsFile(path));
}

std::filesystem::path JobsDirectory(const std::filesystem::path& home) {
  return home / ".sray" / "jobs";
}

std::filesystem::path JobsFilePath(const std::filesystem::path& home, const std::string& job_id,
                                   const std::string& step_id) {
  return JobsDirectory(home) / (job_id + "." + step_id + ".json");
}

std::filesystem::path UserHome() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') return home;
  if (const passwd* entry = ::getpwuid(::geteuid()); entry != nullptr && entry->pw_dir != nullptr) {
    return entry->pw_dir;
  }
  return {};
}

namespace {

// A jobs file is a few hundred bytes.
constexpr std::uintmax_t kMostJobsFileBytes = 64 * 1024;

}  // namespace

std::vector<JobsFileContent> ListJobs(const std::filesystem::path& home) {
  std::vector<std::pair<std::filesystem::file_time_type, JobsFileContent>> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(JobsDirectory(home), error)) {
    if (entry.path().extension() != ".json") continue;
    // Only a small regular file: a FIFO named *.json hung every tool, and a
    // field of the wrong type (a hand-edited file, another version) threw
    // out of every one of them ("unexpected error").
    std::error_code kind;
    if (!entry.is_regular_file(kind) || entry.file_size(kind) > kMostJobsFileBytes || kind) {
      continue;
    }
    std::ifstream input(entry.path());
    const auto json = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object()) continue;
    const auto text = [&json](const char* name) {
      const auto field = json.find(name);
      return field != json.end() && field->is_string() ? field->get<std::string>() : std::string();
    };
    JobsFileContent content;
    content.job_id = text("job_id");
    content.step_id = text("step_id");
    content.url = text("url");
    content.local_url = text("local_url");
    content.token = text("token");
    content.head_hostname = text("head_hostname");
    content.cluster = text("cluster");
    const auto pid = json.find("pid");
    content.pid = pid != json.end() && pid->is_number_integer() ? pid->get<long>() : 0L;
    if (content.job_id.empty() || content.url.empty() || content.token.empty()) continue;
    found.emplace_back(entry.last_write_time(error), std::move(content));
  }
  std::sort(found.begin(), found.end(),
            [](const auto& left, const auto& right) { return left.first > right.first; });
  std::vector<JobsFileContent> jobs;
  for (auto& [unused, content] : found) jobs.push_back(std::move(content));
  return jobs;
}

void RemoveJobsFile(const std::filesystem::path& home, const std::string& job_id,
                    const std::string& step_id) {
  const auto path = JobsFilePath(home, job_id, step_id);
  ::unlink(path.c_str());
  ::unlink((path.string() + ".tmp").c_str());
}

Status NoteJobsFileHome(const std::filesystem::path& session_directory,
                        const std::filesystem::path& home) {
  return WritePrivateFile(session_directory / kJobsFileHomeNote, home.string());
}

void RemoveNotedJobsFile(const std::filesystem::path& session_directory, const std::string& job_id,
                         const std::string& step_id) {
  std::ifstream input(session_directory / kJobsFileHomeNote);
  std::string home;
  if (!input || !std::getline(input, home) || home.empty() || home.front() != '/') return;
  RemoveJobsFile(home, job_id, step_id);
}

JobsFile::~JobsFile() {
  ::unlink(path_.c_str());
}

}  // namespace sray::dashboard
