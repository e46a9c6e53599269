// Codegen check: each kernel holds one flag helper; tests/codegen/check.sh compiles
// this to PTX (sm_90) and AMDGCN (gfx90a, gfx940) and looks for the instructions the
// helper promises (release/acquire at system scope).
#include "../../iris_device.h"

extern "C" __global__ void cg_signal(iris_device_ctx_t ctx, unsigned *flag, int peer) { iris_signal(ctx, flag, 7u, peer); }
extern "C" __global__ void cg_signal_add(iris_device_ctx_t ctx, unsigned *flag, int peer) { iris_signal_add(ctx, flag, 1u, peer); }
extern "C" __global__ void cg_wait(iris_device_ctx_t ctx, unsigned *flag, unsigned *out) { out[0] = iris_wait_until(ctx, flag, IRIS_CMP_GE, 5u); }
extern "C" __global__ void cg_signal_relaxed(iris_device_ctx_t ctx, unsigned *flag, int peer) { iris_signal_relaxed(ctx, flag, 7u, peer); }
extern "C" __global__ void cg_wait_relaxed(iris_device_ctx_t ctx, unsigned *flag, unsigned *out) { out[0] = iris_wait_until_relaxed(ctx, flag, IRIS_CMP_GE, 5u); }
