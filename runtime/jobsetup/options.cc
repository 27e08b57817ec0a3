#include "jobsetup/options.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "common/whole_number.h"
#include "object/store_capacity.h"
#include "sched/resources.h"

namespace sray::jobsetup {
namespace {

constexpr std::array<std::string_view, 4> kLogLevels = {"error", "warning", "info", "debug"};
constexpr std::array<std::string_view, 2> kBooleans = {"true", "false"};
constexpr std::array<std::string_view, 2> kWireUps = {"srun", "pmix"};

// Kept sorted by key: AcceptedKeys() and the docs list them in this order.
const std::array<OptionSpec, 12> kSchema = {{
    {.key = "config",
     .kind = OptionKind::kAbsolutePath,
     .environment_variable = "SRAY_USER_CONFIG",
     .default_value = "",
     .choices = {},
     .help = "a TOML file of further options, read on every node as the job user",
     .command_line_only = true},
    {.key = "dashboard",
     .kind = OptionKind::kListenAddress,
     .environment_variable = "SRAY_DASHBOARD",
     .default_value = "127.0.0.1:0",
     .choices = {},
     .help = "where the head node serves the job's dashboard (token required): HOST:PORT "
             "(port 0: a free one), or off; default the head's loopback on a free port"},
    {.key = "env",
     .kind = OptionKind::kAbsolutePath,
     .environment_variable = "SRAY_ENV",
     .default_value = "",
     .choices = {},
     .help = "a conda environment for every task: its prefix, a file made by `sray env pack` "
             "(staged once per node under tmpdir), or a lock, explicit file or environment.yml "
             "(a staged copy that matches, else made by micromamba/mamba/conda on PATH); nodes "
             "whose environments differ fail the step"},
    {.key = "log_dir",
     .kind = OptionKind::kAbsolutePath,
     .environment_variable = "SRAY_LOG_DIR",
     .default_value = "",
     .choices = {},
     .help = "a directory every node can write (a shared file system) where each node copies "
             "its workers' logs when the step ends, as DIR/JOB.STEP/node-N/; `sray logs JOB "
             "--log-dir DIR` reads them after the job"},
    {.key = "log_level",
     .kind = OptionKind::kChoice,
     .environment_variable = "SRAY_LOG_LEVEL",
     .default_value = "info",
     .choices = kLogLevels,
     .help = "how much sray logs: error, warning, info or debug"},
    {.key = "log_to_driver",
     .kind = OptionKind::kChoice,
     .environment_variable = "SRAY_LOG_TO_DRIVER",
     .default_value = "true",
     .choices = kBooleans,
     .help = "whether what workers print also reaches the job's output (prefixed with node, "
             "worker and pid); it is kept in the session directory's logs either way"},
    {.key = "max_tasks_in_flight",
     .kind = OptionKind::kCount,
     .environment_variable = "SRAY_MAX_TASKS_IN_FLIGHT",
     .default_value = "100000",
     .choices = {},
     .help = "how many of its tasks one process (the driver, or a task submitting its own) keeps "
             "unfinished; Remote() waits for some to finish beyond it (about 1.2 KB each in "
             "the submitting process); 0: no limit"},
    {.key = "node_timeout",
     .kind = OptionKind::kCount,
     .environment_variable = "SRAY_NODE_TIMEOUT",
     .default_value = "30",
     .choices = {},
     .help = "seconds the head waits for a node's heartbeat (one a second) before it declares "
             "the node lost: a frozen, overloaded or cut-off node, which is then shut out of "
             "the job (its tasks run again elsewhere) and ends itself if it comes back; 0: "
             "forever",
     .maximum = 31'536'000},  // a year: core/node_heartbeats.h kLongestNodeTimeout
    {.key = "object_store_memory",
     .kind = OptionKind::kByteSize,
     .environment_variable = "SRAY_OBJECT_STORE_MEMORY",
     .default_value = "",
     .choices = {},
     .help = "bytes of /dev/shm each node's object store may use (e.g. 512M); default 30% of "
             "/dev/shm, shared among emulated nodes"},
    {.key = "resources",
     .kind = OptionKind::kResourceList,
     .environment_variable = "SRAY_RESOURCES",
     .default_value = "",
     .choices = {},
     .help = "resources each node offers besides its CPUs, e.g. GPU:2;ssd:1"},
    {.key = "tmpdir",
     .kind = OptionKind::kAbsolutePath,
     .environment_variable = "SRAY_TMPDIR",
     .default_value = "/tmp",
     .choices = {},
     .help = "node-local directory that holds each step's session directory"},
    {.key = "wireup",
     .kind = OptionKind::kChoice,
     .environment_variable = "SRAY_WIREUP",
     .default_value = "srun",
     .choices = kWireUps,
     .help = "how the ranks of an srun step exchange their addresses: srun (through a port "
             "srun opens on its own host, which the nodes must reach) or pmix (PMIx's fence, "
             "which Slurm 22.05's PMIx plugin can leave hanging); sray run always uses its own "
             "PMIx server"},
}};

std::string_view Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(kSpace);
  return text.substr(first, last - first + 1);
}

std::string Join(std::span<const std::string_view> words) {
  std::string joined;
  for (const auto word : words) {
    if (!joined.empty()) joined += ", ";
    joined += word;
  }
  return joined;
}

}  // namespace

std::span<const OptionSpec> OptionSchema() {
  return kSchema;
}

const OptionSpec* FindOption(std::string_view key) {
  const auto found = std::find_if(kSchema.begin(), kSchema.end(),
                                  [key](const OptionSpec& spec) { return spec.key == key; });
  return found == kSchema.end() ? nullptr : &*found;
}

std::string AcceptedKeys() {
  std::string keys;
  for (const auto& spec : kSchema) {
    if (!keys.empty()) keys += ", ";
    keys += spec.key;
  }
  return keys;
}

Result<std::string> CanonicalValue(const OptionSpec& spec, std::string_view value,
                                   std::string_view source) {
  const std::string where = std::string(source) + ": option '" + std::string(spec.key) + "'";
  if (value.empty()) {
    return Status::InvalidArgument(where + " has an empty value: give " + std::string(spec.key) +
                                   "=VALUE or leave the key out");
  }
  if (value.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(where + " contains a NUL byte: remove it");
  }
  // A newline or tab inside a value does not survive the trimming of the
  // next reader (the value travels to every node and into sbatch's steps),
  // so "env=/a\n/" came back as another path (tests/fuzz/options_fuzzer).
  for (const char byte : value) {
    const auto code = static_cast<unsigned char>(byte);
    if (code < 0x20 || code == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", code);
      return Status::InvalidArgument(where + " contains a control character (byte " + hex +
                                     "): remove it");
    }
  }
  switch (spec.kind) {
    case OptionKind::kAbsolutePath: {
      const std::filesystem::path path(value);
      if (!path.is_absolute()) {
        return Status::InvalidArgument(where + " must be an absolute path, got '" +
                                       std::string(value) + "': write it from /, e.g. " +
                                       std::string(spec.key) + "=$PWD/" + std::string(value));
      }
      std::string normal = path.lexically_normal().string();
      // lexically_normal keeps "///" as it is; the root has one spelling
      // (tests/fuzz/options_fuzzer: "///" became "//", then "/").
      if (normal.find_first_not_of('/') == std::string::npos) normal = "/";
      if (normal.size() > 1 && normal.back() == '/') normal.pop_back();
      return normal;
    }
    case OptionKind::kChoice: {
      const bool known =
          std::find(spec.choices.begin(), spec.choices.end(), value) != spec.choices.end();
      if (!known) {
        return Status::InvalidArgument(where + " does not accept '" + std::string(value) +
                                       "': use one of " + Join(spec.choices));
      }
      return std::string(value);
    }
    case OptionKind::kByteSize: {
      const std::string text(value);
      std::size_t used = 0;
      unsigned long long number = 0;
      bool too_many_digits = false;
      try {
        number = std::stoull(text, &used);
      } catch (const std::out_of_range&) {
        too_many_digits = text.front() != '-';
        used = 0;
      } catch (const std::exception&) {
        used = 0;
      }
      if (too_many_digits) {
        return Status::InvalidArgument(where + " is " + text +
                                       ", more bytes than a 64-bit size holds: give a size "
                                       "like 512M or 2G");
      }
      const std::string_view suffix = std::string_view{text}.substr(used);
      unsigned long long scale = 1;
      if (suffix == "K" || suffix == "k")
        scale = 1ULL << 10;
      else if (suffix == "M" || suffix == "m")
        scale = 1ULL << 20;
      else if (suffix == "G" || suffix == "g")
        scale = 1ULL << 30;
      else if (suffix == "T" || suffix == "t")
        scale = 1ULL << 40;
      else if (!suffix.empty())
        used = 0;
      if (used == 0 || text.front() == '-' || number == 0) {
        return Status::InvalidArgument(where + " needs a positive size like 512M or 2G, got '" +
                                       text + "'");
      }
      if (number > std::numeric_limits<unsigned long long>::max() / scale) {
        return Status::InvalidArgument(where + " is " + text +
                                       ", more bytes than a 64-bit size holds: give a size "
                                       "like 512M or 2G");
      }
      const unsigned long long bytes = number * scale;
      // Caught here, once, rather than by every rank as it starts its store.
      if (spec.key == "object_store_memory" && bytes < object::kMinimumStoreBytes) {
        return Status::InvalidArgument(
            where + " is " + text + ", below the object store's minimum of " +
            std::to_string(object::kMinimumStoreBytes >> 20) + " MiB: give at least 16M");
      }
      return std::to_string(bytes);
    }
    case OptionKind::kResourceList: {
      auto parsed = sched::ParseResourceList(value);
      if (!parsed.ok()) return Status::InvalidArgument(where + ": " + parsed.status().message());
      for (const std::string_view allocated : {"CPU", "memory"}) {
        if (parsed->contains(std::string(allocated))) {
          return Status::InvalidArgument(
              where + " sets " + std::string(allocated) +
              ", which comes from the allocation: remove it and ask Slurm (srun -c, --mem) or "
              "sray run (--cpus-per-node, --mem-per-node) instead");
        }
      }
      // "resources=;" would otherwise pass here and reach every node as an
      // empty value (found by tests/fuzz/options_fuzzer).
      if (parsed->empty()) {
        return Status::InvalidArgument(where + " names no resource, got '" + std::string(value) +
                                       "': give NAME:AMOUNT pairs (resources=GPU:2;ssd:1) or "
                                       "leave the key out");
      }
      return sched::FormatResourceList(*parsed);
    }
    case OptionKind::kCount: {
      const auto number = WholeNumber<std::uint64_t>(value);
      if (!number) {
        return Status::InvalidArgument(where + " needs a whole number (0 for no limit), got '" +
                                       std::string(value) + "'");
      }
      if (*number > spec.maximum) {
        return Status::InvalidArgument(where + " is " + std::string(value) +
                                       ", above its largest "
                                       "value " +
                                       std::to_string(spec.maximum) +
                                       ": give at most that, or 0 for no limit");
      }
      return std::to_string(*number);
    }
    case OptionKind::kListenAddress: {
      if (value == "off") return std::string(value);
      const auto colon = value.rfind(':');
      const std::string_view host = colon == std::string_view::npos ? "" : value.substr(0, colon);
      const std::string_view port = colon == std::string_view::npos ? "" : value.substr(colon + 1);
      const auto number = WholeNumber<std::uint32_t>(port);
      if (host.empty() || !number || *number > 65535) {
        return Status::InvalidArgument(where +
                                       " needs HOST:PORT (port 0 for any free one) or "
                                       "off, got '" +
                                       std::string(value) + "'");
      }
      return std::string(value);
    }
  }
  return Status::Internal(where + " has an unhandled kind");
}

Result<std::vector<OptionAssignment>> ParseOptionList(std::string_view text,
                                                      std::string_view source) {
  std::vector<OptionAssignment> assignments;
  if (Trim(text).empty()) return assignments;

  std::size_t position = 0;
  while (position <= text.size()) {
    const auto comma = text.find(',', position);
    const auto end = comma == std::string_view::npos ? text.size() : comma;
    const std::string_view item = Trim(text.substr(position, end - position));
    position = end + 1;

    if (item.empty()) {
      return Status::InvalidArgument(std::string(source) + ": empty entry in '" +
                                     std::string(text) +
                                     "': separate key=value pairs with single commas");
    }
    const auto equals = item.find('=');
    if (equals == std::string_view::npos) {
      return Status::InvalidArgument(std::string(source) + ": '" + std::string(item) +
                                     "' is not key=value: write it as KEY=VALUE, keys are " +
                                     AcceptedKeys());
    }
    const std::string_view key = Trim(item.substr(0, equals));
    const std::string_view value = Trim(item.substr(equals + 1));
    const OptionSpec* spec = FindOption(key);
    if (spec == nullptr) {
      return Status::InvalidArgument(std::string(source) + ": unknown key '" + std::string(key) +
                                     "': accepted keys are " + AcceptedKeys());
    }
    const bool repeated = std::any_of(assignments.begin(), assignments.end(),
                                      [key](const auto& seen) { return seen.key == key; });
    if (repeated) {
      return Status::InvalidArgument(std::string(source) + ": key '" + std::string(key) +
                                     "' is given twice: keep one");
    }
    auto canonical = CanonicalValue(*spec, value, source);
    if (!canonical.ok()) return canonical.status();
    assignments.push_back({std::string(key), std::move(canonical).value(), std::string(source)});
    if (comma == std::string_view::npos) break;
  }
  return assignments;
}

}  // namespace sray::jobsetup
