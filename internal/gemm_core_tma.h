/* internal/gemm_core_tma.h: the TMA GEMM core's former path, kept only for
 * bench/bench_gemm_core.cu until it includes internal/gemm/core_tma.h; then delete this
 * file. Not a header of its own. */
#include "gemm/core_tma.h"
