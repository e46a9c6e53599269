// Codegen check: each kernel holds one flag helper; tests/codegen/check.sh compiles
// this to PTX (sm_90) and AMDGCN (gfx90a, gfx940) and looks for the instructions the
// helper promises (release/acquire at system scope).
#include "../../iris_device.h"

extern "C" __global__ void cg_signal(iris_device_ctx_t ctx, unsigned *flag, int peer) { iris_signal(ctx, flag, 7u, peer); }
extern "C" __global__ void cg_signal_add(iris_device_ctx_t ctx, unsigned *flag, int peer) { iris_signal_add(ctx, flag, 1u, peer); }
extern "C" __global__ void cg_wait(iris_device_ctx_t ctx, unsigned *flag, unsigned *out) { out[0] = iris_wait_until(ctx, flag, IRIS_CMP_GE, 5u); }
extern "C" __global__ void cg_signal_relaxed(iris_device_ctx_t ctx, unsigned *flag, int peer) { iris_signal_relaxed(ctx, flag, 7u, peer); }
extern "C" __global__ void cg_wait_relaxed(iris_device_ctx_t ctx, unsigned *flag, unsigned *out) { out[0] = iris_wait_until_relaxed(ctx, flag, IRIS_CMP_GE, 5u); }
// the LL line's 16-byte store and load: each 8-byte half (data, flag) one single-copy-atomic access
extern "C" __global__ void cg_ll_store(uint4 *p, unsigned a, unsigned b) { iris_detail_st16_volatile(p, a, b, a + 1, b + 1); }
extern "C" __global__ void cg_ll_load(const uint4 *p, uint4 *out) { out[0] = iris_detail_ld16_volatile(p); }
