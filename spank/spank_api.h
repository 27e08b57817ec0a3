#pragma once

// spank.h declares the slurm_spank_* callbacks without C linkage when read by
// a C++ compiler; including it inside extern "C" makes our definitions match
// the symbols Slurm looks up. Include this instead of <slurm/spank.h>.
extern "C" {
#include <slurm/spank.h>
}
