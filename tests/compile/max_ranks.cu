// Compile check: the collectives with IRIS_MAX_RANKS other than the default (make passes
// -DIRIS_MAX_RANKS=6 and =64: an even count that is not a multiple of 4, and the most the
// collectives allow), fp32 SUM only; and, bf16 SUM only, with IRIS_RMSNORM_MAX_GROUPS=32
// (the fused all-reduce + RMSNorm's largest CTAs). Built as an object; never run.
#define IRIS_IMPLEMENTATION
#include "../../iris_collectives.h"
