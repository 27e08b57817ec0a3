#pragma once

// Resource arithmetic for the scheduler: what a node has, what a task asks,
// and which GPU devices a fractional request shares.
//
// Thread-safety: plain values; GpuDevices is owned by one node manager thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sray::sched {

using ResourceMap = std::map<std::string, double>;

// "GPU:2;ssd:1" (the `resources` option) -> {GPU: 2, ssd: 1}.
Result<ResourceMap> ParseResourceList(std::string_view text);
// A task's request, checked: names non-empty, amounts finite and >= 0, GPU
// either below 1 or whole. Empty means {CPU: 1}.
Result<ResourceMap> NormalizeRequest(const ResourceMap& request);
// Every name non-empty, every amount finite and 0 or more; InvalidArgument
// naming the first that is not.
Status ValidateAmounts(const ResourceMap& resources);

bool Fits(const ResourceMap& request, const ResourceMap& available);
void Subtract(ResourceMap& from, const ResourceMap& amount);
void Add(ResourceMap& to, const ResourceMap& amount);
// "{CPU: 2, GPU: 0.5}"
std::string Describe(const ResourceMap& resources);
// "GPU:2;ssd:0.5": what ParseResourceList reads back as the same map (each
// amount in the shortest form that keeps every digit).
std::string FormatResourceList(const ResourceMap& resources);

// Devices of one node and how much of each is taken. A request below 1 GPU
// shares one device with others; whole requests take whole devices.
class GpuDevices {
 public:
  explicit GpuDevices(std::uint32_t count) : free_(count, 1.0) {}
  // Device indices for `amount` GPUs, or nullopt when they are not free now.
  std::optional<std::vector<std::uint32_t>> Acquire(double amount);
  void Release(const std::vector<std::uint32_t>& devices, double amount);

 private:
  std::vector<double> free_;
};

// "0,2"
std::string DeviceList(const std::vector<std::uint32_t>& devices);

}  // namespace sray::sched
