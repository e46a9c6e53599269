#!/usr/bin/env bash
# tests/nccl/gpu_shim.sh [WORLDS] — libiris_nccl.so on a machine with GPUs (default worlds
# "2 4"; a world needs that many GPUs). Prints PASS / FAIL / SKIP per check, then the
# comparison tables (tests/nccl/gpu_summary.py); logs and summary.csv go to $OUT
# (default build/nccl_gpu).
#   1. tests/nccl/shim_test.cu through the shim: threads, ncclCommInitAll, processes, the
#      memory door (memalloc: ncclMemAlloc, windows, zero-copy, IRIS_NCCL_MEMALLOC=64M), a
#      bad root or NULL send on one rank (bad-root: an error, no wait); and with
#      IRIS_NCCL_DISABLE=1 (everything to NCCL)
#   2. NVIDIA's nccl-tests (all_reduce, all_gather, reduce_scatter, alltoall, broadcast,
#      reduce, sendrecv; -c 1: its own check; 16 B to 256 MB) on the real NCCL and with the
#      shim preloaded, threaded build (-t W -g 1) and, where mpirun and the MPI build exist,
#      one process per rank; plus all_reduce_perf over every type and op (-d all -o all)
#   3. torch (if importable): tests/nccl/torch_check.py with and without the shim preloaded
#   4. JAX (if importable): tests/nccl/jax_check.py (psum in shard_map, one process) both ways
# Needs, built beforehand (here or carried): build/libiris_nccl.so (make lib-nccl),
# build/nccl_shim_test (make build/nccl_shim_test), build/nccl-tests/
# (tests/nccl/build_nccl_tests.sh <nccl-tests checkout>).
# Variables: OUT; IRIS_NCCL_REAL (the real libnccl.so.2 for C programs; default
# $CUDA_HOME/lib64/libnccl.so.2, else the system's from ldconfig); NCCL_SHIM_TIMEOUT (seconds per run, default 300);
# NCCL_SHIM_SKIP ("shim_test nccl-tests torch jax": parts to leave out).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/nccl_gpu}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on these machines
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
REAL=${IRIS_NCCL_REAL:-$CUDA_HOME/lib64/libnccl.so.2}
if [ -z "${IRIS_NCCL_REAL:-}" ] && [ ! -f "$REAL" ]; then # NCCL from the system's packages (the GPU image has it in /lib/x86_64-linux-gnu)
  sys_nccl=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  [ -n "$sys_nccl" ] && REAL=$sys_nccl
fi
SHIM=$PWD/build/libiris_nccl.so
T=${NCCL_SHIM_TIMEOUT:-300}
SKIPS=${NCCL_SHIM_SKIP:-}
worlds=${1:-"2 4"}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
pass=0 fail=0 skip=0
say() { case $1 in PASS) pass=$((pass + 1)); echo "PASS: $2" ;; FAIL) fail=$((fail + 1)); echo "FAIL: $2${3:+: $3}" ;; SKIP) skip=$((skip + 1)); echo "SKIP: $2: $3" ;; esac; }
counted() { # log command...: a program printing its own PASS / FAIL / SKIP lines
  local log=$1; shift
  timeout -k 10 "$T" "$@" >"$log" 2>&1; local rc=$?
  local p f s
  p=$(grep -c '^PASS: ' "$log"); f=$(grep -c '^FAIL: ' "$log"); s=$(grep -c '^SKIP: ' "$log")
  grep -E '^(PASS|FAIL|SKIP): ' "$log"
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then say FAIL "$*" "exit $rc$([ "$rc" -eq 124 ] && echo ": timed out after ${T}s"); log $log"; tail -n 15 "$log" | sed 's/^/    /'; fi
}
echo "# $(nvidia-smi -L 2>/dev/null | head -1) ($ngpu GPUs); worlds $worlds; real NCCL $REAL; logs in $OUT"
if [ ! -f "$SHIM" ]; then echo "FAIL: build/libiris_nccl.so is missing (make lib-nccl)"; exit 1; fi
# build/nccl/libnccl.so.2 -> the shim: what build/nccl_shim_test links (links may not travel with carried files)
mkdir -p build/nccl && ln -sf ../libiris_nccl.so build/nccl/libnccl.so.2
if [ ! -f "$REAL" ]; then echo "FAIL: no real NCCL at $REAL (set IRIS_NCCL_REAL)"; exit 1; fi

# ------------------------------------------------------------------ 1. shim_test
if [[ " $SKIPS " != *" shim_test "* ]]; then
  if [ -x build/nccl_shim_test ]; then
    big=0
    for w in $worlds; do
      if [ "$ngpu" -lt "$w" ]; then say SKIP "shim_test at $w ranks" "$ngpu GPUs"; continue; fi
      big=$w
      for mode in threads initall initall-seq procs; do
        counted "$OUT/shim_test_${mode}_$w.log" env IRIS_NCCL_LIB="$REAL" IRIS_NCCL_DEBUG=1 ./build/nccl_shim_test "$mode" "$w"
      done
      counted "$OUT/shim_test_memalloc_$w.log" env IRIS_NCCL_LIB="$REAL" IRIS_NCCL_DEBUG=1 IRIS_NCCL_MEMALLOC=64M ./build/nccl_shim_test memalloc "$w"
      counted "$OUT/shim_test_bad-root_$w.log" env IRIS_NCCL_LIB="$REAL" IRIS_NCCL_DEBUG=1 ./build/nccl_shim_test bad-root "$w"
    done
    if [ "$big" -gt 0 ]; then
      counted "$OUT/shim_test_disabled_$big.log" env IRIS_NCCL_LIB="$REAL" IRIS_NCCL_DISABLE=1 NCCL_SHIM_TEST_EXPECT=nccl ./build/nccl_shim_test threads "$big"
      counted "$OUT/shim_test_real_$big.log" env LD_LIBRARY_PATH="$(dirname "$REAL")" NCCL_SHIM_TEST_EXPECT=nccl ./build/nccl_shim_test threads "$big"
    fi
  else
    say FAIL "shim_test" "build/nccl_shim_test is missing (make build/nccl_shim_test)"
  fi
fi

# ------------------------------------------------------------------ 2. nccl-tests
bins="all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf broadcast_perf reduce_perf sendrecv_perf"
nt_args="-b 16 -e 256M -f 4 -c 1 -w 5 -n 20"
nt_run() { # label log world binary args...: one nccl-tests run, judged by its exit status and its #wrong columns
  local label=$1 log=$2 w=$3; shift 3
  timeout -k 10 "$T" "$@" >"$log" 2>&1; local rc=$?
  local wrong
  wrong=$(awk '/^ +[0-9]+ +[0-9]+ / { if ($9 != "0" && $9 != "N/A") n++; if ($13 != "0" && $13 != "N/A") n++ } END { print n + 0 }' "$log")
  if [ "$rc" -eq 0 ] && [ "$wrong" -eq 0 ] && grep -q 'Out of bounds values : 0 OK' "$log"; then say PASS "$label"
  else say FAIL "$label" "exit $rc$([ "$rc" -eq 124 ] && echo " (timed out)"), $wrong rows with wrong values; log $log"; grep -E 'FAILED|WARN|error|Error' "$log" | head -5 | sed 's/^/    /'; fi
}
if [[ " $SKIPS " != *" nccl-tests "* ]]; then
  if [ ! -x build/nccl-tests/all_reduce_perf ]; then
    say FAIL "nccl-tests" "build/nccl-tests/ is missing (tests/nccl/build_nccl_tests.sh <nccl-tests checkout>)"
  else
    for w in $worlds; do
      if [ "$ngpu" -lt "$w" ]; then say SKIP "nccl-tests at $w ranks" "$ngpu GPUs"; continue; fi
      for b in $bins; do
        nt_run "nccl-tests $b, $w ranks (threads), real NCCL, -c 1" "$OUT/nt_real_${b}_$w.log" "$w" ./build/nccl-tests/$b $nt_args -t "$w" -g 1
        nt_run "nccl-tests $b, $w ranks (threads), through the shim, -c 1" "$OUT/nt_shim_${b}_$w.log" "$w" \
          env LD_PRELOAD="$SHIM" IRIS_NCCL_LIB="$REAL" IRIS_NCCL_DEBUG=1 ./build/nccl-tests/$b $nt_args -t "$w" -g 1
      done
      nt_run "nccl-tests all_reduce_perf, every type and op, $w ranks, through the shim, -c 1" "$OUT/nt_shim_types_all_reduce_$w.log" "$w" \
        env LD_PRELOAD="$SHIM" IRIS_NCCL_LIB="$REAL" IRIS_NCCL_DEBUG=1 ./build/nccl-tests/all_reduce_perf -d all -o all -b 8 -e 8M -f 8 -c 1 -w 1 -n 3 -t "$w" -g 1
      if command -v mpirun >/dev/null 2>&1 && [ -x build/nccl-tests/mpi/all_reduce_perf_mpi ]; then
        for b in all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf; do
          nt_run "nccl-tests ${b}_mpi, $w processes, through the shim, -c 1" "$OUT/nt_shim_mpi_${b}_$w.log" "$w" \
            mpirun --allow-run-as-root --oversubscribe -np "$w" -x NCCL_NVLS_ENABLE -x LD_PRELOAD="$SHIM" -x IRIS_NCCL_LIB="$REAL" -x IRIS_NCCL_DEBUG=1 \
            ./build/nccl-tests/mpi/${b}_mpi $nt_args -g 1
        done
      else
        say SKIP "nccl-tests one process per rank (MPI build)" "no mpirun, or no build/nccl-tests/mpi/ (needs Open MPI's headers when building)"
      fi
    done
  fi
fi

# ------------------------------------------------------------------ 3. torch
if [[ " $SKIPS " != *" torch "* ]]; then
  if python3 -c 'import torch' >/dev/null 2>&1; then
    # torch loads libnccl.so.2 from its nvidia-nccl wheel: the preloaded shim takes that
    # soname, so the real one must be named by path
    wheel=$(python3 -c 'import nvidia.nccl, os; d = os.path.dirname(nvidia.nccl.__file__ or list(nvidia.nccl.__path__)[0]); print(os.path.join(d, "lib", "libnccl.so.2"))' 2>/dev/null)
    if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then wheel=$REAL; echo "# no nvidia-nccl wheel found: torch's real NCCL taken as $REAL"; fi
    for w in $worlds; do
      if [ "$ngpu" -lt "$w" ]; then say SKIP "torch at $w ranks" "$ngpu GPUs"; continue; fi
      counted "$OUT/torch_nccl_$w.log" python3 tests/nccl/torch_check.py "$w" --time
      counted "$OUT/torch_shim_$w.log" env LD_PRELOAD="$SHIM" IRIS_NCCL_LIB="$wheel" IRIS_NCCL_DEBUG=1 python3 tests/nccl/torch_check.py "$w" --time
      if ! grep -q 'libiris_nccl.so preloaded' "$OUT/torch_shim_$w.log"; then say FAIL "torch with LD_PRELOAD at $w ranks" "the shim was not loaded (see $OUT/torch_shim_$w.log)"; fi
      # the teardown (destroy_process_group, the ranks' exit): the shim's must end where the real NCCL's does
      if grep -q '^EXIT: shim .* stuck' "$OUT/torch_shim_$w.log"; then
        if grep -q '^EXIT: nccl .* clean' "$OUT/torch_nccl_$w.log"; then say FAIL "torch teardown through the shim at $w ranks" "the ranks did not exit (the real NCCL's did); stacks in $OUT/torch_shim_$w.log"
        else echo "# torch teardown at $w ranks did not end with the real NCCL either (stacks in $OUT/torch_nccl_$w.log)"; fi
      elif grep -q '^EXIT: shim .* clean' "$OUT/torch_shim_$w.log"; then say PASS "torch teardown through the shim at $w ranks: destroy_process_group returned and the ranks exited"; fi
    done
  else
    say SKIP "torch through the shim" "torch not installed"
  fi
fi

# ------------------------------------------------------------------ 4. JAX
if [[ " $SKIPS " != *" jax "* ]]; then
  if python3 -c 'import jax' >/dev/null 2>&1; then
    wheel=$(python3 -c 'import nvidia.nccl, os; d = os.path.dirname(nvidia.nccl.__file__ or list(nvidia.nccl.__path__)[0]); print(os.path.join(d, "lib", "libnccl.so.2"))' 2>/dev/null)
    if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then wheel=$REAL; fi
    for w in $worlds; do
      if [ "$ngpu" -lt "$w" ]; then say SKIP "jax at $w devices" "$ngpu GPUs"; continue; fi
      counted "$OUT/jax_nccl_$w.log" python3 tests/nccl/jax_check.py "$w"
      counted "$OUT/jax_shim_$w.log" env LD_PRELOAD="$SHIM" IRIS_NCCL_LIB="$wheel" IRIS_NCCL_DEBUG=1 python3 tests/nccl/jax_check.py "$w"
      if ! grep -q 'libiris_nccl.so preloaded' "$OUT/jax_shim_$w.log"; then say FAIL "jax with LD_PRELOAD at $w devices" "the shim was not loaded (see $OUT/jax_shim_$w.log)"; fi
    done
  else
    say SKIP "jax through the shim" "jax not installed"
  fi
fi

python3 tests/nccl/gpu_summary.py "$OUT"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
