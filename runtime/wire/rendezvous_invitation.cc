#include "wire/rendezvous_invitation.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace sray::wire::rendezvous {

Result<std::optional<Invitation>> TakeInvitation() {
  std::string text;
  if (const char* value = std::getenv(kRendezvousVariable); value != nullptr) {
    text = value;
    ::explicit_bzero(const_cast<char*>(value), std::strlen(value));
    ::setenv(kRendezvousVariable, kInvitationTaken, 1);
  }
  const char* wireup = std::getenv("SRAY_WIREUP");
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  if (text.empty()) {
    // srun's plugin exports wireup to the tasks itself, whatever --export
    // says; the invitation travels in srun's environment, which --export
    // can hold back.
    if (wireup != nullptr && std::string_view(wireup) == "srun" && job != nullptr &&
        step != nullptr) {
      return Status::Unavailable(
          "srun's invitation to exchange addresses (SRAY_RENDEZVOUS) did not reach this task: "
          "srun's --export passes it only with ALL or when it names it: run with --export=ALL, "
          "add SRAY_RENDEZVOUS to the --export list, or run with --ray-cluster=wireup=pmix");
    }
    return std::optional<Invitation>();
  }
  // srun could not serve the exchange, and said so on its own stderr.
  if (text == kThroughPmix) return std::optional<Invitation>();
  if (text == kInvitationTaken) {
    return Status::Unavailable(
        "an earlier sray program in this task took srun's invitation to exchange addresses: "
        "srun starts one rank per task, and each wires up once: run one sray program per task "
        "(start another with its own srun)");
  }
  auto invitation = ParseInvitation(text);
  std::fill(text.begin(), text.end(), '\0');
  if (!invitation.ok()) return invitation.status();
  if (job == nullptr || step == nullptr || invitation->step != std::string(job) + "." + step) {
    return std::optional<Invitation>();
  }
  return std::optional<Invitation>(std::move(invitation).value());
}

}  // namespace sray::wire::rendezvous
