#pragma once

// The options in force for one job step, after layering
//   built-in defaults < admin file < user file (config=) < --ray-cluster
// Every front end resolves through ResolveOptions so the precedence is defined
// once. Thread-safety: immutable after construction.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "jobsetup/options.h"

namespace sray::jobsetup {

class ResolvedOptions {
 public:
  // The value of `key`, or "" when it has neither a default nor a setting.
  [[nodiscard]] const std::string& Get(std::string_view key) const;
  // Where the value in force came from ("default", "/etc/sray/sray.toml:2", ...).
  [[nodiscard]] const std::string& SourceOf(std::string_view key) const;
  // NAME=value pairs to export to every task, in schema order.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> EnvironmentVariables() const;
  // The variables of options left unset: removed from every task's
  // environment, so that one inherited from the caller (an outer step, a
  // user's export) does not pass for a setting nothing checked.
  [[nodiscard]] std::vector<std::string> UnsetEnvironmentVariables() const;
  // "key=value,..." that ParseOptionList reads back to the same options.
  [[nodiscard]] std::string ToOptionList() const;

  void Set(const OptionAssignment& assignment);

 private:
  std::map<std::string, std::pair<std::string, std::string>, std::less<>> values_;
};

struct ResolveInputs {
  std::optional<std::filesystem::path> admin_config;  // from plugstack.conf or sray run
  std::string option_list;                            // the --ray-cluster text
};

Result<ResolvedOptions> ResolveOptions(const ResolveInputs& inputs);

}  // namespace sray::jobsetup
