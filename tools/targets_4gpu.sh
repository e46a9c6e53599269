#!/usr/bin/env bash
# tools/targets_4gpu.sh PART...: the open issues' targets at 4 ranks (one rank per GPU),
# measured as the issues state them, each command under its own limit through
# tools/gpu_session.sh (its log under $OUT, one summary line per command). A part fits one
# device call of 10 minutes; run them in this order, as the device time allows:
#   guard   the speed guard through both doors, medians and p99 (issues 38, 40: nothing
#           slower than NCCL) and the decode sizes 1-64 KB, detection on and off (40)
#   fused   all-reduce + residual + RMSNorm in C, all-reduce alone beside it (40); the
#           team all-reduce and barrier against NCCL split communicators (41); MoE (38)
#   doors   torch: the fused op against its baselines (40), MoE (38); JAX against XLA (38)
#   tail    per-call p50 / p99 alone, the collectives beside a GEMM, multi-node (38)
#   nccl    libiris_nccl.so under nccl-tests, torch and JAX at 2 and 4 ranks (42)
# and the full multi-rank pass that resolving an issue needs, split the same way:
#   build   with every core: what the pass and the parts above run (gpu-programs,
#           lib-jax, lib-nccl, the benchmarks); nccl-tests still come from
#           tests/nccl/build_nccl_tests.sh (no network on the GPU machines: carry them)
#   pass2, pass3, pass4   make test-gpu's checks made once per world size, at that world
#   passc   make test-gpu's other checks (GEMM core, traps, examples, launchers,
#           multi-node, Python at 2-4 ranks, MPI)
# Binaries are used as they are in build/ (carried, or built first: IRIS_TARGETS_BUILD
# names make targets to build here with every core). Needs per part:
#   guard: build/bench_coll build/libiris.so    fused: build/proxy_fused build/bench_team
#   build/bench_moe    doors: build/libiris.so build/libiris_jax.so (make lib-jax), torch,
#   jax    tail: build/bench_coll build/libiris.so build/bench_multinode    nccl: see
#   tests/nccl/gpu_shim.sh (build/libiris_nccl.so, build/nccl_shim_test, build/nccl-tests)
# Prints the parts' summaries; the figures are in $OUT/PART/tNN.log (default OUT: build/targets_4gpu).
set -u
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: tools/targets_4gpu.sh guard|fused|doors|tail|nccl|build|pass2|pass3|pass4|passc ..." >&2; exit 2; }
export OUT=${OUT:-build/targets_4gpu}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -lt 4 ]; then echo "SKIP: tools/targets_4gpu.sh: $ngpu GPU(s) visible; the targets are stated for 4 distinct GPUs"; exit 0; fi
py="PYTHONPATH=python python3"
for part in "$@"; do
  echo "# part $part"
  case $part in
    # the guard: make bench-guard's two runs, called directly (make would rebuild a carried
    # binary older than the copied headers)
    guard) specs=("180:./build/bench_coll 0 256M --guard --lib=build/libiris.so"
                  "180:BENCH_OFF_HEAP=1 ./build/bench_coll 0 256M --guard --lib=build/libiris.so"
                  "120:BENCH_ONLY=all_reduce,all_gather,reduce_scatter ./build/bench_coll 4 64K --small"
                  "90:IRIS_COLL_CHECK=0 BENCH_ONLY=all_reduce ./build/bench_coll 4 64K --small") ;;
    fused) specs=("150:PROXY_GPUS=distinct ./build/proxy_fused 4 8192 128"
                  "60:PROXY_GPUS=distinct ./build/proxy_fused 4 4096 128"
                  "150:./build/bench_team 4 256M"
                  "180:./build/bench_moe 4") ;;
    doors) specs=("200:$py python/bench/bench_torch_fused.py 4"
                  "200:$py python/bench/bench_torch_moe.py 4"
                  "180:$py python/bench/bench_jax.py 4") ;;
    tail)  specs=("300:./build/bench_coll 4 256M --tail --lib=build/libiris.so"
                  "150:./build/bench_coll 4 256M --company"
                  "120:NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 ./build/bench_multinode 2 2 64M") ;;
    nccl)  specs=("580:bash tests/nccl/gpu_shim.sh \"2 4\"") ;;
    build) specs=("580:make -s -j\$(nproc) gpu-programs lib-jax lib-nccl build/bench_coll build/bench_team build/bench_moe build/proxy_fused build/bench_multinode") ;;
    pass2 | pass3 | pass4) specs=("580:IRIS_TEST_GPU_PART=worlds IRIS_TEST_WORLDS=${part#pass} make -s test-gpu") ;;
    passc) specs=("580:IRIS_TEST_GPU_PART=common make -s test-gpu") ;;
    *) echo "unknown part '$part' (guard, fused, doors, tail, nccl, build, pass2, pass3, pass4, passc)" >&2; exit 2 ;;
  esac
  OUT=$OUT/$part bash tools/gpu_session.sh "${IRIS_TARGETS_BUILD:--}" "${specs[@]}"
done
