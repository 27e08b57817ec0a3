#include "train/progress_log.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace sray::train::internal {
namespace {

std::string FormatValue(double value) {
  char text[32];
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    (void)std::snprintf(text, sizeof text, "%.0f", value);
  } else {
    (void)std::snprintf(text, sizeof text, "%.4g", value);
  }
  return text;
}

std::string WithThousands(std::uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string grouped;
  for (std::size_t index = 0; index < digits.size(); ++index) {
    if (index > 0 && (digits.size() - index) % 3 == 0) grouped += ',';
    grouped += digits[index];
  }
  return grouped;
}

}  // namespace

std::string ProgressLine(const std::string& name, const ReportRecord& record) {
  std::ostringstream line;
  line << "sray train " << name << ": report " << record.report << ":";
  for (const auto& [key, value] : record.metrics) line << " " << key << "=" << FormatValue(value);
  if (record.samples > 0 && record.seconds > 0) {
    line << " | " << WithThousands(static_cast<std::uint64_t>(std::llround(
                         static_cast<double>(record.samples) / record.seconds)))
         << " samples/s";
  }
  if (record.checkpoint) line << " | " << *record.checkpoint;
  if (record.attempt > 0) line << " | restart " << record.attempt;
  return line.str();
}

std::string JsonLine(const ReportRecord& record) {
  nlohmann::json line;
  line["report"] = record.report;
  line["attempt"] = record.attempt;
  line["time"] = record.unix_time;
  line["seconds"] = record.seconds;
  line["samples"] = record.samples;
  line["samples_per_second"] =
      record.seconds > 0 ? static_cast<double>(record.samples) / record.seconds : 0.0;
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [key, value] : record.metrics) {
    // JSON has no NaN or infinity: such a metric is written as null.
    metrics[key] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
  }
  line["metrics"] = std::move(metrics);
  line["checkpoint"] = record.checkpoint ? nlohmann::json(*record.checkpoint) : nlohmann::json();
  return line.dump();
}

std::map<std::string, Metrics> CheckpointMetricsFromLog(const std::string& path) {
  std::map<std::string, Metrics> found;
  std::ifstream file(path);
  std::string text;
  while (std::getline(file, text)) {
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!line.is_object()) continue;  // a line cut short by a crash, or not ours
    const auto checkpoint = line.find("checkpoint");
    const auto metrics = line.find("metrics");
    if (checkpoint == line.end() || !checkpoint->is_string() || metrics == line.end() ||
        !metrics->is_object()) {
      continue;
    }
    Metrics values;
    for (const auto& [key, value] : metrics->items()) {
      values[key] = value.is_number() ? value.get<double>() : std::nan("");
    }
    found[checkpoint->get<std::string>()] = std::move(values);
  }
  return found;
}

Status AppendLine(const std::string& path, const std::string& line) {
  std::ofstream file(path, std::ios::app);
  if (!file) return Status::FromErrno(errno, "cannot open " + path + " to append to it");
  file << line << '\n';
  file.flush();
  if (!file) return Status::IoError("cannot write to " + path + " (disk full?)");
  return Status::Ok();
}

}  // namespace sray::train::internal
