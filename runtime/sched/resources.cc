#include "sched/resources.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace sray::sched {
namespace {

// Amounts are sums of user fractions (0.1 + 0.2): compare with a tolerance.
constexpr double kEpsilon = 1e-9;

std::string_view Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

std::string FormatAmount(double amount) {
  // Whole amounts in full: memory is counted in bytes, and 2.14748e+09 hides them.
  if (amount >= 0 && amount < 1e15 && amount == std::floor(amount)) {
    return std::to_string(static_cast<std::uint64_t>(amount));
  }
  std::ostringstream text;
  text << amount;
  return text.str();
}

}  // namespace

Result<ResourceMap> ParseResourceList(std::string_view text) {
  ResourceMap resources;
  std::size_t position = 0;
  while (position < text.size()) {
    const auto separator = text.find(';', position);
    const auto end = separator == std::string_view::npos ? text.size() : separator;
    const std::string_view item = Trim(text.substr(position, end - position));
    position = end + 1;
    if (item.empty()) continue;
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) {
      return Status::InvalidArgument("resource '" + std::string(item) +
                                     "' is not NAME:AMOUNT: write e.g. resources=GPU:2;ssd:1");
    }
    const std::string name(Trim(item.substr(0, colon)));
    const std::string amount_text(Trim(item.substr(colon + 1)));
    char* parsed_end = nullptr;
    const double amount = std::strtod(amount_text.c_str(), &parsed_end);
    if (name.empty() || amount_text.empty() || *parsed_end != '\0' || !std::isfinite(amount) ||
        amount < 0) {
      return Status::InvalidArgument("resource '" + std::string(item) +
                                     "' needs a name and a non-negative number, e.g. GPU:2");
    }
    if (resources.contains(name)) {
      return Status::InvalidArgument("resource '" + name + "' is given twice: keep one");
    }
    resources[name] = amount;
  }
  return resources;
}

std::string FormatResourceList(const ResourceMap& resources) {
  std::string text;
  for (const auto& [name, amount] : resources) {
    if (!text.empty()) text += ';';
    char digits[32];
    const auto written = std::to_chars(std::begin(digits), std::end(digits), amount);
    text += name + ':' + std::string(digits, written.ptr);
  }
  return text;
}

Status ValidateAmounts(const ResourceMap& resources) {
  for (const auto& [name, amount] : resources) {
    if (name.empty()) return Status::InvalidArgument("a resource request has an empty name");
    if (!std::isfinite(amount) || amount < 0) {
      return Status::InvalidArgument("resource '" + name + "' asks " + FormatAmount(amount) +
                                     ": amounts must be finite and non-negative");
    }
  }
  return Status::Ok();
}

Result<ResourceMap> NormalizeRequest(const ResourceMap& request) {
  if (request.empty()) return ResourceMap{{"CPU", 1.0}};
  SRAY_RETURN_IF_ERROR(ValidateAmounts(request));
  ResourceMap normal;
  for (const auto& [name, amount] : request) {
    if (name == "GPU" && amount > 1 && std::abs(amount - std::round(amount)) > kEpsilon) {
      return Status::InvalidArgument("GPU request " + FormatAmount(amount) +
                                     " mixes whole and shared devices: ask below 1 or a whole "
                                     "number");
    }
    if (amount > 0) normal[name] = amount;
  }
  return normal;
}

bool Fits(const ResourceMap& request, const ResourceMap& available) {
  for (const auto& [name, amount] : request) {
    const auto found = available.find(name);
    const double have = found == available.end() ? 0.0 : found->second;
    if (amount > have + kEpsilon) return false;
  }
  return true;
}

void Subtract(ResourceMap& from, const ResourceMap& amount) {
  for (const auto& [name, value] : amount) from[name] -= value;
}

void Add(ResourceMap& to, const ResourceMap& amount) {
  for (const auto& [name, value] : amount) to[name] += value;
}

std::string Describe(const ResourceMap& resources) {
  std::string text = "{";
  for (const auto& [name, amount] : resources) {
    if (text.size() > 1) text += ", ";
    text += name + ": " + FormatAmount(std::abs(amount) < kEpsilon ? 0.0 : amount);
  }
  return text + "}";
}

std::optional<std::vector<std::uint32_t>> GpuDevices::Acquire(double amount) {
  std::vector<std::uint32_t> chosen;
  if (amount <= kEpsilon) return chosen;
  if (amount < 1.0) {
    // Best fit: the most used device that still has room keeps others whole.
    std::optional<std::uint32_t> best;
    for (std::uint32_t device = 0; device < free_.size(); ++device) {
      if (free_[device] + kEpsilon >= amount && (!best || free_[device] < free_[*best])) {
        best = device;
      }
    }
    if (!best) return std::nullopt;
    free_[*best] -= amount;
    chosen.push_back(*best);
    return chosen;
  }
  const auto wanted = static_cast<std::size_t>(std::llround(amount));
  for (std::uint32_t device = 0; device < free_.size() && chosen.size() < wanted; ++device) {
    if (free_[device] > 1.0 - kEpsilon) chosen.push_back(device);
  }
  if (chosen.size() < wanted) return std::nullopt;
  for (const auto device : chosen) free_[device] = 0.0;
  return chosen;
}

void GpuDevices::Release(const std::vector<std::uint32_t>& devices, double amount) {
  if (devices.empty()) return;
  const double each = amount < 1.0 ? amount : 1.0;
  for (const auto device : devices) {
    if (device < free_.size()) free_[device] = std::min(1.0, free_[device] + each);
  }
}

std::string DeviceList(const std::vector<std::uint32_t>& devices) {
  std::string text;
  for (const auto device : devices) {
    if (!text.empty()) text += ",";
    text += std::to_string(device);
  }
  return text;
}

}  // namespace sray::sched
