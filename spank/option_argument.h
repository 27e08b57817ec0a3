#pragma once

// What the --ray-cluster callback receives, turned into the option list text.

#include <string>

namespace sray::spank {

// NULL and "" mean "no options". "(null)" means the same: sbatch passes a
// valueless `#SBATCH --ray-cluster` to its steps as the printf rendering of a
// NULL pointer (SLURM_SPANK__SLURM_SPANK_OPTION_sray_ray_cluster=(null)).
std::string OptionListFromArgument(const char* argument);

}  // namespace sray::spank
