#!/usr/bin/env bash
# make test: runs every check this machine can run and counts them.
# Each check prints one line: PASS / FAIL / SKIP (a SKIP is never counted as passed).
# The last line is "N passed, N failed, N skipped". Exit status 1 if anything failed.
set -u
cd "$(dirname "$0")/.."
mkdir -p build
log=build/test.log
: >"$log"
pass=0 fail=0 skip=0

say() { # KIND name [why]
  case $1 in
    PASS) pass=$((pass + 1)); echo "PASS: $2" ;;
    FAIL) fail=$((fail + 1)); echo "FAIL: $2${3:+: $3}" ;;
    SKIP) skip=$((skip + 1)); echo "SKIP: $2: $3" ;;
  esac
}
# check NAME COMMAND...: PASS if the command succeeds; on failure show its output's tail
check() {
  local name=$1; shift
  local out; out=$(mktemp)
  if "$@" >"$out" 2>&1; then say PASS "$name"; else say FAIL "$name" "exit $?"; tail -n 25 "$out" | sed 's/^/    /'; fi
  cat "$out" >>"$log"; rm -f "$out"
}
# run_counted NAME COMMAND...: a test program that prints its own PASS/FAIL/SKIP lines
run_counted() {
  local name=$1; shift
  local out; out=$(mktemp)
  "$@" >"$out" 2>"$out.err"; local rc=$?
  local p f s
  p=$(grep -c '^PASS: ' "$out"); f=$(grep -c '^FAIL: ' "$out"); s=$(grep -c '^SKIP: ' "$out")
  grep -E '^(PASS|FAIL|SKIP): ' "$out"
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then say FAIL "$name" "exit $rc with no failing check reported"; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$rc" -eq 0 ]; then say FAIL "$name" "printed no result"; fi
  if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then tail -n 30 "$out.err" | sed 's/^/    stderr: /'; fi
  cat "$out" "$out.err" >>"$log"; rm -f "$out" "$out.err"
}
# expect_trap NAME PATTERN COMMAND...: the command must fail (exit 3: trapped) and print PATTERN
expect_trap() {
  local name=$1 pattern=$2; shift 2
  local out; out=$(mktemp)
  timeout 120 "$@" >"$out" 2>&1; local rc=$?
  if [ "$rc" -eq 3 ] && grep -q -E "$pattern" "$out"; then say PASS "$name"
  else say FAIL "$name" "exit $rc, output: $(tr '\n' ' ' <"$out" | cut -c1-300)"; fi
  cat "$out" >>"$log"; rm -f "$out"
}

# builds of several programs run side by side (nvcc is single-threaded)
export MAKEFLAGS="${MAKEFLAGS:--j$(nproc 2>/dev/null || echo 2)}"
have_hip=0; command -v "${HIPCC:-hipcc}" >/dev/null 2>&1 && [ -f /usr/include/hip/hip_runtime.h -o -d /opt/rocm/include/hip ] && have_hip=1
ngpu=0; command -v nvidia-smi >/dev/null 2>&1 && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# an AMD MI200/MI300 here? (only the MFMA GEMM core test runs on it)
amd_gpu=0; [ -e /dev/kfd ] && command -v rocminfo >/dev/null 2>&1 && rocminfo 2>/dev/null | grep -qE 'gfx90a|gfx94[0-9]' && amd_gpu=1
# world sizes of the multi-GPU tests: 2 and 4, plus every GPU of this machine when it has
# more (8 on an 8-GPU host; at most 16, IRIS_MAX_RANKS); IRIS_TEST_WORLDS="2 3 4 8" sets
# them (docs/world_size.md)
worlds=${IRIS_TEST_WORLDS:-"2 4"}
if [ -z "${IRIS_TEST_WORLDS:-}" ] && [ "$ngpu" -gt 4 ]; then worlds="$worlds $((ngpu < 16 ? ngpu : 16))"; fi

# IRIS_TEST_ONLY=gpu (make test-gpu): only the GPU section, with the binaries already built
only=${IRIS_TEST_ONLY:-all}
if [ "$only" != gpu ]; then
echo "# compile checks"
check "iris.h compiles as C99 (-Wall -Wextra -Werror -pedantic)" make -s check-c99
check "iris.h with implementation compiles as C99" make -s check-c99-impl
check "iris.h with implementation compiles as C++11" make -s check-cxx
check "every header compiles under nvcc (sm_90), every device template instantiated" make -s check-nvcc
if [ $have_hip = 1 ]; then
  check "iris.h with implementation compiles as C99 against HIP" make -s check-c99-hip
  check "every header compiles under hipcc (gfx90a, gfx940), every device template instantiated (also with the MFMA GEMM core)" make -s check-hipcc
  check "GEMM core test builds under hipcc (AMD MFMA core, unverified)" make -s build/gemm_core_test_hip
else
  say SKIP "iris.h as C99 against HIP" "hipcc not installed"
  say SKIP "headers under hipcc (gfx90a, gfx940)" "hipcc not installed"
  say SKIP "GEMM core test under hipcc" "hipcc not installed"
fi
check "GPU test program builds (nvcc)" make -s build/gpu_test build/gpu_test_debug
check "collectives test programs build (nvcc)" make -s build/coll_test build/tile_test
check "all-gather + GEMM test and core test build (nvcc, cuBLASLt)" make -s build/gemm_test build/gemm_core_test
check "benchmarks build (nvcc; NCCL for bench_coll, NCCL and cuBLAS for bench_ag_gemm)" make -s build/bench_rma build/bench_coll build/bench_tile_a2a build/bench_ag_gemm build/bench_gemm_core
check "examples build (nvcc)" make -s examples

echo "# codegen checks"
check "PTX: signal/wait helpers use release/acquire at system scope" bash tests/codegen/check.sh ptx
if [ $have_hip = 1 ]; then
  check "AMDGCN gfx90a: signal/wait helpers write back / invalidate at system scope" bash tests/codegen/check.sh gfx90a
  check "AMDGCN gfx940: signal/wait helpers write back / invalidate at system scope" bash tests/codegen/check.sh gfx940
else
  say SKIP "AMDGCN codegen checks" "hipcc not installed"
fi

echo "# host unit tests"
if make -s build/host_test >>"$log" 2>&1; then run_counted "host tests" ./build/host_test; else say FAIL "host tests build"; fi
if make -s build/types_test >>"$log" 2>&1; then run_counted "types test" ./build/types_test; else say FAIL "types test build (nvcc)"; fi

fi # only != gpu

echo "# AMD GPU tests"
if [ $have_hip = 1 ] && [ $amd_gpu = 1 ]; then
  if make -s build/gemm_core_test_hip >>"$log" 2>&1; then run_counted "gemm_core_test_hip" ./build/gemm_core_test_hip; else say FAIL "gemm_core_test_hip build"; fi
else
  say SKIP "MFMA GEMM core against float64 (gemm_core_test_hip)" "no AMD MI200/MI300 GPU (or no hipcc)"
fi

echo "# GPU tests"
if [ "$ngpu" -lt 2 ]; then
  why="no GPU"; [ "$ngpu" = 1 ] && why="one GPU; these tests need 2 with peer access"
  for t in "RMA, atomics, message passing, heap, barrier: $worlds ranks, one process each" "same, ranks as threads through bootstrap callbacks: $worlds" \
           "same, bring-up mode 3 (one process, several GPUs): $worlds" "debug checks (heap bounds, bad rank, wait timeout, divergence)" "collectives and tile building blocks: $worlds ranks" "tensor-core GEMM core against float64" "all-gather + GEMM, every path: $worlds ranks" "examples run" "MPI bootstrap example"; do
    say SKIP "$t" "$why"
  done
else
  export NCCL_NVLS_ENABLE=0
  for w in $worlds; do
    if [ "$ngpu" -lt "$w" ]; then say SKIP "GPU tests with $w ranks (3 bring-up modes)" "only $ngpu GPUs"; continue; fi
    for mode in procs hooks local; do run_counted "gpu_test $mode $w" ./build/gpu_test $mode $w; done
  done
  for w in $worlds; do
    if [ "$ngpu" -ge "$w" ]; then run_counted "coll_test $w" ./build/coll_test $w; run_counted "tile_test $w" ./build/tile_test $w
    else say SKIP "collectives and tile building blocks with $w ranks" "only $ngpu GPUs"; fi
  done
  run_counted "gemm_core_test" ./build/gemm_core_test
  for w in $worlds; do
    if [ "$ngpu" -ge "$w" ]; then run_counted "gemm_test $w" ./build/gemm_test $w
    else say SKIP "all-gather + GEMM with $w ranks" "only $ngpu GPUs"; fi
  done
  expect_trap "IRIS_DEBUG: remote store outside the heap traps with a message" "outside the symmetric heap" ./build/gpu_test_debug bad-pointer
  expect_trap "IRIS_DEBUG: remote store to a bad rank traps with a message" "target rank .* outside" ./build/gpu_test_debug bad-rank
  expect_trap "IRIS_DEBUG: a wait past its bound reports which wait and rank, and traps" "wait 'test-never-set' timed out on rank 0" ./build/gpu_test_debug wait-timeout
  check "IRIS_DEBUG: iris_barrier reports diverging heaps on every rank" ./build/gpu_test_debug diverge
  check "example message_passing runs on all GPUs" ./build/message_passing
  check "example atomic_counter runs on all GPUs" ./build/atomic_counter
  check "example local_multi_gpu runs" ./build/local_multi_gpu
  check "example fused_allreduce_rmsnorm matches a float64 reference" ./build/fused_allreduce_rmsnorm
  check "example gemm_all_scatter: every rank's C whole and matching a float64 reference" ./build/gemm_all_scatter
  if command -v mpirun >/dev/null 2>&1 && make -s build/mpi_bootstrap >>"$log" 2>&1; then
    check "example mpi_bootstrap under mpirun -np 2" mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_NVLS_ENABLE ./build/mpi_bootstrap
  else
    say SKIP "MPI bootstrap example" "mpirun or mpi.h not available"
  fi
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
