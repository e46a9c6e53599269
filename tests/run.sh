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
# world sizes of the multi-rank tests: 2, 3 and 4, plus every GPU of this machine when it
# has more (8 on an 8-GPU host; at most 16, IRIS_MAX_RANKS); IRIS_TEST_WORLDS="2 4 8"
# sets them (docs/world_size.md). With fewer GPUs than ranks, ranks share GPUs (device =
# rank % GPUs): the checks prove the protocols, not speed, and say "shared GPU".
worlds=${IRIS_TEST_WORLDS:-"2 3 4"}
if [ -z "${IRIS_TEST_WORLDS:-}" ] && [ "$ngpu" -gt 4 ]; then worlds="$worlds $((ngpu < 16 ? ngpu : 16))"; fi
# "w ranks": how they sit on this machine's GPUs
placement() { if [ "$ngpu" -ge "$1" ]; then echo "$1 ranks, one GPU each"; else echo "$1 ranks on $ngpu GPU(s), shared GPU"; fi; }

# IRIS_TEST_ONLY=gpu (make test-gpu): only the GPU section (it builds the GPU programs first
# where missing); IRIS_TEST_ONLY=packaging: only the packaging section (shared library, vendoring, CMake)
only=${IRIS_TEST_ONLY:-all}

# build_all TARGET...: build them all at once, so both cores stay busy (make runs them in the
# order given: the slowest first); -k goes on past a failure, and each check below then runs
# its own make, which finds its part done or shows what failed. Progress (10 minutes and more
# on 2 cores): one line per target as it is done, "k of n", with the time so far; the
# build's output goes to the log.
uptodate() { # build/proof/NAME: its own rule, under B=build/proof (the Makefile's wrapper always runs)
  case $1 in build/proof/*) make -s -q B=build/proof PROOF=1 "$1" ;; *) make -s -q "$1" ;; esac >/dev/null 2>&1
}
build_all() {
  local total=$# todo="" t ntodo t0 stamp mk k left
  for t in "$@"; do uptodate "$t" || todo="$todo $t"; done
  ntodo=$(echo $todo | wc -w)
  echo "# building the checks' programs: $ntodo of $total to build (make -k $MAKEFLAGS; output in $log)"
  t0=$(date +%s)
  stamp=$(mktemp)
  make -s -k "$@" >>"$log" 2>&1 &
  mk=$!
  k=$((total - ntodo))
  left=$todo
  show() { # report the targets of $left written since the build started
    local rest="" t
    for t in $left; do
      if [ "$t" -nt "$stamp" ]; then k=$((k + 1)); echo "#   [$k/$total] $t ($(( $(date +%s) - t0 )) s)"; else rest="$rest $t"; fi
    done
    left=$rest
  }
  while kill -0 "$mk" 2>/dev/null; do sleep 10; show; done
  wait "$mk"
  show
  for t in $left; do echo "#   not built: $t (its check below shows why)"; done
  rm -f "$stamp"
}

# The programs whose build make test checks: GPU tests, benchmarks, examples ("prog" below).
# With a GPU they are the binaries the GPU section runs (build/NAME). Without one (CI), they
# are compile proofs, build/proof/NAME: each program's own rule and flags with the
# collectives' kernels cut to fp32 SUM, which check-nvcc and make lib compile in full (the
# Makefile, "compile proofs"); make test-gpu then builds the binaries on the GPU machine
# (make gpu-programs: here, to carry them).
pb=build; [ "$ngpu" -lt 1 ] && pb=build/proof
progs() { local n; for n in "$@"; do printf '%s/%s ' "$pb" "$n"; done; }

if [ "$only" = all ]; then
# What make test builds before its checks, with its CPU seconds on the 2-core VM without a
# GPU (2026-11-30; the compile proofs and checks at -O0, the Makefile's CHECK_NVCCFLAGS;
# libiris.so and libiris_nccl.so, the products, at -O2 with two targets each):
# make builds them slowest first, so that both cores stay busy to the end; check-nvcc's
# objects among them (they ran one after another in its check before). "prog NAME":
# a program as above; "file": a compile check's object, a library, a host program; "hip": a
# file only built with hipcc. One a line, so that additions merge.
builds="
  393 file build/libiris.so
  200 file build/libiris_nccl.so
  120 hip  build/all_headers_hip_mfma.o
   60 file build/max_ranks_64.o
   42 prog gpu_test_debug
   40 file build/rmsnorm_groups_32.o
   36 hip  build/gemm_core_test_hip
   28 prog gemm_core_test
   24 file build/all_headers_nvcc.o
   16 prog gemm_test
   16 prog bench_ag_gemm
   15 hip  build/all_headers_hip.o
   13 prog gpu_test
   12 prog gemm_all_scatter
   11 prog fused_test
   10 prog tile_test
   10 prog bench_coll
   10 prog multinode_test
    9 prog bench_moe
    9 prog team_test
    9 prog bench_team
    9 prog teams_tp_dp
    9 prog fused_allreduce_rmsnorm
    9 prog bench_tile_a2a
    8 prog moe_test
    8 prog coll_test
    8 prog fault_test
    8 prog proxy_fused
    7 prog bench_gemm_core
    7 file build/include_order_nvcc
    6 file build/max_ranks_6.o
    5 prog bench_rma
    4 prog message_passing
    4 prog atomic_counter
    4 prog local_multi_gpu
    4 file build/device_api_nvcc.o
    3 file build/types_test
    3 file build/host_test
    1 file build/init_cycles
"
prebuild=$(printf '%s\n' "$builds" | grep . | sort -s -k1,1nr | while read -r _ kind what; do
  case $kind in prog) progs "$what" ;; file) printf '%s ' "$what" ;; hip) [ $have_hip = 1 ] && printf '%s ' "$what" ;; esac
done)
# with GPUs: the rest of the GPU section's programs (GPU_PROGRAMS) too, first (the slow GEMM
# variants among them), all built with every core
if [ "$ngpu" -gt 0 ]; then
  extra=""
  for t in $(make -s list-gpu-programs); do case " $prebuild " in *" $t "*) ;; *) extra="$extra $t" ;; esac; done
  prebuild="$extra $prebuild"
fi
build_all $prebuild
if [ "$pb" = build/proof ]; then
  echo "# no GPU here: the GPU tests, benchmarks and examples are built as compile proofs (build/proof/NAME: the collectives' kernels cut to fp32 SUM, compiled to PTX at -O0; check-nvcc compiles every type and op, make lib every kernel to machine code)"
fi
echo "# compile checks"
check "iris.h compiles as C99 (-Wall -Wextra -Werror -pedantic)" make -s check-c99
check "iris.h with implementation compiles as C99" make -s check-c99-impl
check "iris.h with implementation compiles as C++11" make -s check-cxx
check "include-then-implement: iris.h included before IRIS_IMPLEMENTATION still gets the implementation (C99, linked)" make -s check-include-order
check "include-then-implement: every root header included before IRIS_IMPLEMENTATION still emits its implementation (nvcc, linked)" make -s check-include-order-nvcc
check "a strict C99 unit with a system header before iris.h gets one #error naming the rule" make -s check-posix-order
check "every internal header compiles alone (nvcc front end; the C ones as C99 and C++11 too)" make -s check-internal
check "vendor conditionals only in the two vendor layers (internal/core/platform.h, internal/device/platform.h) and the allow-list" make -s check-vendor-seam
check "every header compiles under nvcc (PTX at -O0), every device template instantiated; to sm_90 machine code the collectives at IRIS_MAX_RANKS 64 and the fused RMSNorm at 1024 threads" make -s check-nvcc
if [ $have_hip = 1 ]; then
  check "iris.h with implementation compiles as C99 against HIP" make -s check-c99-hip
  check "every header compiles under hipcc (gfx90a, gfx940): machine code with the MFMA GEMM core (collectives fp32 SUM), LLVM IR as shipped for every type and op" make -s check-hipcc
  check "GEMM core test builds under hipcc (AMD MFMA core, unverified)" make -s build/gemm_core_test_hip
else
  say SKIP "iris.h as C99 against HIP" "hipcc not installed"
  say SKIP "headers under hipcc (gfx90a, gfx940)" "hipcc not installed"
  say SKIP "GEMM core test under hipcc" "hipcc not installed"
fi
check "GPU test programs build (nvcc)" make -s $(progs gpu_test gpu_test_debug fault_test)
check "collectives test programs build (nvcc)" make -s $(progs coll_test tile_test multinode_test fused_test team_test)
check "all-gather + GEMM test and core test build (nvcc, cuBLASLt)" make -s $(progs gemm_test gemm_core_test)
check "benchmarks build (nvcc; NCCL for bench_coll and bench_team, NCCL and cuBLAS for bench_ag_gemm)" make -s $(progs bench_rma bench_coll bench_team bench_tile_a2a bench_ag_gemm bench_gemm_core proxy_fused)
check "examples build (nvcc)" make -s $(progs message_passing atomic_counter local_multi_gpu fused_allreduce_rmsnorm gemm_all_scatter teams_tp_dp)
check "MoE dispatch / combine test and bench build (nvcc)" make -s $(progs moe_test bench_moe)

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
if command -v valgrind >/dev/null 2>&1; then
  # with a GPU: three init/finalize cycles of a world of one; without: three failed inits
  check "valgrind: iris_init / iris_finalize cycles lose nothing (definitely lost: 0; $([ "$ngpu" -gt 0 ] && echo "with a GPU" || echo "no GPU: failed inits"))" \
    sh -c 'make -s build/init_cycles && valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 ./build/init_cycles'
else
  say SKIP "valgrind: iris_init / iris_finalize cycles" "valgrind not installed"
fi
if make -s build/types_test >>"$log" 2>&1; then run_counted "types test" ./build/types_test; else say FAIL "types test build (nvcc)"; fi

fi # only = all

if [ "$only" = all ] || [ "$only" = packaging ]; then
echo "# packaging checks"
check "shared library builds (make lib: build/libiris.so, one unit, sm_90a + compute_90 PTX)" make -s lib
check "exports of libiris.so match the public API (every IRIS_API function of the public headers)" bash tests/packaging/check_exports.sh
check "README quick start compiles from the vendored copy list (nvcc)" bash tests/packaging/check_vendoring.sh nvcc
if [ $have_hip = 1 ]; then
  check "README quick start compiles from the vendored copy list (hipcc gfx90a)" bash tests/packaging/check_vendoring.sh hip
else
  say SKIP "README quick start from the vendored copy list (hipcc)" "hipcc not installed"
fi
if command -v cmake >/dev/null 2>&1; then
  check "CMake consumer: add_subdirectory (iris::shared), builds and matches the library's version and struct sizes" bash tests/packaging/consumers.sh add_subdirectory
  check "CMake consumer: find_package against cmake --install (iris::shared)" bash tests/packaging/consumers.sh find_package
else
  say SKIP "CMake consumers (add_subdirectory, find_package)" "cmake not installed"
fi
if command -v cmake >/dev/null 2>&1 && command -v pkg-config >/dev/null 2>&1; then
  check "pkg-config consumer: nvcc \$(pkg-config --cflags --libs iris) against the installed prefix" bash tests/packaging/consumers.sh pkg-config
else
  say SKIP "pkg-config consumer" "cmake or pkg-config not installed"
fi
run_counted "NCCL shim (libiris_nccl.so): exports against nccl.h, soname, forwarding, routing (no GPU)" bash tests/nccl/cpu_checks.sh
run_counted "pip install ./python (non-editable)" bash tests/packaging/check_pip.sh
echo "# Python package (no GPU: import, library version and struct sizes, argument checks)"
run_counted "python package" bash python/run_tests.sh
if python3 -c 'import matplotlib' >/dev/null 2>&1; then
  check "tools/plot_gemm_rs.py draws both bench_gemm_rs CSVs (ranks, local) and refuses another" bash tests/tools/plot_gemm_rs_check.sh
else
  say SKIP "tools/plot_gemm_rs.py (bench_gemm_rs's PNG)" "matplotlib not installed"
fi
check "tests/sanitize_gpu.sh: one verdict per row; every row fails on a sanitizer error, an unsanitized rank or a failed check (stand-in tools, no GPU)" bash tests/tools/sanitize_check.sh
fi # only = all or packaging

if [ "$only" = all ] || [ "$only" = gpu ]; then
echo "# AMD GPU tests"
if [ $have_hip = 1 ] && [ $amd_gpu = 1 ]; then
  if make -s build/gemm_core_test_hip >>"$log" 2>&1; then run_counted "gemm_core_test_hip" ./build/gemm_core_test_hip; else say FAIL "gemm_core_test_hip build"; fi
else
  say SKIP "MFMA GEMM core against float64 (gemm_core_test_hip)" "no AMD MI200/MI300 GPU (or no hipcc)"
fi

echo "# GPU tests"
if [ "$ngpu" -lt 1 ]; then
  for t in "RMA, atomics, message passing, heap, barrier: $worlds ranks in 3 bring-up modes" "collectives and tile building blocks: $worlds ranks" "all-reduce + RMSNorm (fused_test): $worlds ranks" \
           "collectives on several streams, mismatches under skew, dead/stuck peers, abort: $worlds ranks" "tensor-core GEMM core against float64" \
           "all-gather + GEMM, every path: $worlds ranks" "GEMM + reduce-scatter / all-reduce, every path: $worlds ranks" "MoE dispatch / combine, both modes: $worlds ranks" "debug checks (heap bounds, bad rank, wait timeout, divergence)" "examples run" "MPI bootstrap example" \
           "multi-node collectives on virtual nodes (2 x 1, 2 x 2, TCP rendezvous)"; do
    say SKIP "$t" "no GPU"
  done
else
  export NCCL_NVLS_ENABLE=0
  # make test-gpu: the programs below, all at once (with every core; make test built them already)
  if [ "$only" = gpu ]; then build_all $(make -s list-gpu-programs); fi
  # IRIS_TEST_GPU_PART (the GPU section split over calls with a time limit): worlds = only
  # the checks run once per world size of IRIS_TEST_WORLDS; common = only the others (GEMM
  # core, debug traps, examples, launchers, multi-node, Python, MPI); all (default) = both
  gpu_part=${IRIS_TEST_GPU_PART:-all}
  case $gpu_part in all | worlds | common) ;; *) say FAIL "IRIS_TEST_GPU_PART" "'$gpu_part' is not all, worlds or common"; gpu_part=none ;; esac
  gpu_worlds=$worlds
  if [ "$gpu_part" = common ] || [ "$gpu_part" = none ]; then gpu_worlds=""; say SKIP "the GPU checks run once per world size ($worlds)" "IRIS_TEST_GPU_PART=$gpu_part"; fi
  if [ "$gpu_part" = worlds ] || [ "$gpu_part" = none ]; then say SKIP "the GPU checks run once (GEMM core, debug traps, examples, launchers, multi-node, Python, MPI)" "IRIS_TEST_GPU_PART=$gpu_part"; fi
  gpu_common=0; if [ "$gpu_part" = all ] || [ "$gpu_part" = common ]; then gpu_common=1; fi
  echo "# ($ngpu GPU(s); world sizes $gpu_worlds)"
  for w in $gpu_worlds; do
    echo "# world $w: $(placement "$w")"
    for mode in procs hooks local; do run_counted "gpu_test $mode $w" ./build/gpu_test $mode $w; done
    # shared GPU: time-sliced ranks take milliseconds per call; the long loops run a tenth
    if [ "$ngpu" -lt "$w" ]; then run_counted "coll_test $w (quick loops)" env IRIS_TEST_QUICK=1 ./build/coll_test $w
    else run_counted "coll_test $w" ./build/coll_test $w; fi
    # buffers off the heap: many strided staged launches (a 1 MB staging area), and the
    # separate copies the staged kernels replace (IRIS_COLL_FUSED_STAGING=0)
    run_counted "coll_test $w (IRIS_COLL_STAGING=1M; quick loops; large, mixed, offsets)" env IRIS_TEST_QUICK=1 IRIS_COLL_STAGING=1M IRIS_TEST_PARTS=large,mixed,offsets ./build/coll_test $w
    run_counted "coll_test $w (IRIS_COLL_FUSED_STAGING=0; quick loops; large, mixed, offsets)" env IRIS_TEST_QUICK=1 IRIS_COLL_FUSED_STAGING=0 IRIS_TEST_PARTS=large,mixed,offsets ./build/coll_test $w
    # IRIS_COLL_CTAS: every call without opts.ctas under the process's cap (the grid seen through the signature; every kind and size under it)
    run_counted "coll_test $w (IRIS_COLL_CTAS=16; quick loops; ctas_env, matrix, mixed)" env IRIS_TEST_QUICK=1 IRIS_COLL_CTAS=16 IRIS_TEST_PARTS=ctas_env,matrix,mixed ./build/coll_test $w
    run_counted "coll_test $w (IRIS_COLL_TEST_WRAP=8: the call numbers wrap around 2^32; wrap, then back-to-back)" env IRIS_TEST_QUICK=1 IRIS_COLL_TEST_WRAP=8 IRIS_TEST_PARTS=wrap,back_to_back ./build/coll_test $w
    # the ranks as threads of one process on GPU 0: every call's grid leaves room for the peers'
    run_counted "coll_test threads $w (one GPU, IRIS_WAIT_TIMEOUT_MS=20000)" env IRIS_WAIT_TIMEOUT_MS=20000 ./build/coll_test threads $w
    run_counted "tile_test $w" ./build/tile_test $w
    # all-reduce + residual + RMSNorm (+ fp8): fused and separate paths, graphs, mismatch
    if [ "$ngpu" -lt "$w" ]; then run_counted "fused_test $w (quick loops)" env IRIS_TEST_QUICK=1 ./build/fused_test $w
    else run_counted "fused_test $w" ./build/fused_test $w; fi
    run_counted "fused_test $w (IRIS_COLL_CTAS=16: bad input, the cap's part, then 0 tokens on one rank)" env IRIS_COLL_CTAS=16 ./build/fused_test $w
    # the same op with the ranks as threads of one process on GPU 0: every rank's grids resident together
    run_counted "fused_test threads $w (one GPU, IRIS_WAIT_TIMEOUT_MS=20000)" env IRIS_WAIT_TIMEOUT_MS=20000 ./build/fused_test threads $w
    # IRIS_COLL_TYPES / IRIS_COLL_OPS: what is compiled in works, what is left out is refused alike on every rank
    if make -s build/coll_test_switch >>"$log" 2>&1; then run_counted "coll_test_switch $w (fp32 + bf16 SUM compiled; quick loops)" env IRIS_TEST_QUICK=1 ./build/coll_test_switch $w
    else say FAIL "coll_test_switch build"; fi
    for m in streams mismatch stuck stuck-fused killed graph-killed killed-watch abort split-count split-place split-late; do run_counted "fault_test $m $w (IRIS_WAIT_TIMEOUT_MS=2000)" env IRIS_WAIT_TIMEOUT_MS=2000 ./build/fault_test $m $w; done
    # teams: splits, team barriers and device API, team collectives, two teams at once, faults
    tq=""; if [ "$ngpu" -lt "$w" ]; then tq="IRIS_TEST_QUICK=1"; fi
    for m in basic concurrent mismatch first-call late graph staged stuck stuck-coll stuck-mixed killed wait-timeout; do run_counted "team_test $m $w ($(placement "$w"))" env $tq IRIS_WAIT_TIMEOUT_MS=2000 ./build/team_test $m $w; done
  done
  if [ $gpu_common = 1 ]; then run_counted "gemm_core_test" ./build/gemm_core_test; fi
  make -s build/gemm_test_t2 >>"$log" 2>&1 # the 2-s-bound build for the stuck-peer checks (not built by make test without a GPU)
  for w in $gpu_worlds; do
    run_counted "gemm_test $w ($(placement "$w"))" ./build/gemm_test $w
    run_counted "gemm_test $w sweep: issue 20's hang shape, every path, plans back to back ($(placement "$w"))" ./build/gemm_test $w sweep 5
    run_counted "gemm_test $w streams: GEMM runs and all-reduces on two streams ($(placement "$w"))" ./build/gemm_test $w streams
    run_counted "gemm_test_t2 $w stuck: a stuck peer ends the call within 2x the bound ($(placement "$w"))" ./build/gemm_test_t2 $w stuck
    run_counted "gemm_test_t2 $w refused: a run refused on one rank takes part, no call waits (IRIS_WAIT_TIMEOUT_MS=2000; $(placement "$w"))" env IRIS_WAIT_TIMEOUT_MS=2000 ./build/gemm_test_t2 $w refused
    run_counted "gemm_test $w wrap (IRIS_GEMM_TEST_WRAP=6: the fused kernels' epochs cross 0xffffffff -> 0 -> 1, every path; $(placement "$w"))" env IRIS_GEMM_TEST_WRAP=6 ./build/gemm_test $w wrap
  done
  # GEMM + reduce-scatter / all-reduce: built here only (make test without a GPU stays as fast)
  if make -s build/gemm_rs_test build/gemm_rs_test_t2 >>"$log" 2>&1; then
    for w in $gpu_worlds; do
      run_counted "gemm_rs_test $w: GEMM + reduce-scatter / all-reduce, every path ($(placement "$w"))" ./build/gemm_rs_test $w
      run_counted "gemm_rs_test_t2 $w stuck: a stuck peer ends the fused call within 2x the bound ($(placement "$w"))" ./build/gemm_rs_test_t2 $w stuck
      run_counted "gemm_rs_test_t2 $w refused: a run refused on one rank takes part, no call waits (IRIS_WAIT_TIMEOUT_MS=2000; $(placement "$w"))" env IRIS_WAIT_TIMEOUT_MS=2000 ./build/gemm_rs_test_t2 $w refused
      run_counted "gemm_rs_test $w wrap (IRIS_GEMM_TEST_WRAP=6: the fused path's epochs cross 0xffffffff -> 0 -> 1, both ops and cores; $(placement "$w"))" env IRIS_GEMM_TEST_WRAP=6 ./build/gemm_rs_test $w wrap
    done
  else
    say FAIL "gemm_rs_test build (make build/gemm_rs_test build/gemm_rs_test_t2)"
  fi
  for w in $gpu_worlds; do run_counted "moe_test $w: MoE dispatch / combine, both modes, bf16 and fp8 ($(placement "$w"))" ./build/moe_test $w; done
  # the ranks as threads of one process on GPU 0: each plan's grid leaves room for the peers'
  for w in $gpu_worlds; do run_counted "moe_test threads $w (one GPU, IRIS_WAIT_TIMEOUT_MS=20000)" env IRIS_WAIT_TIMEOUT_MS=20000 ./build/moe_test threads $w; done
  # all ranks but the last give up waiting for it: the late rank's check must say so
  for w in $gpu_worlds; do run_counted "moe_test gaveup $w: a rank whose wait gave up marks its peers (IRIS_WAIT_TIMEOUT_MS=300; $(placement "$w"))" env IRIS_WAIT_TIMEOUT_MS=300 ./build/moe_test gaveup $w; done
  if [ $gpu_common = 1 ]; then
    expect_trap "IRIS_DEBUG: remote store outside the heap traps with a message" "outside the symmetric heap" ./build/gpu_test_debug bad-pointer
    expect_trap "IRIS_DEBUG: remote store to a bad rank traps with a message" "target rank .* outside" ./build/gpu_test_debug bad-rank
    expect_trap "IRIS_DEBUG: remote store to another node's rank traps naming it" "target rank 0 is on node 0, not on this rank's node 1" ./build/gpu_test_debug other-node
    expect_trap "IRIS_DEBUG: a bulk put of a negative size (size_t) traps, not wrapped past the heap's end" "iris_put_bulk .* outside the symmetric heap" ./build/gpu_test_debug bad-size
    expect_trap "IRIS_DEBUG: a wait past its bound reports which wait and rank, and traps" "wait 'test-never-set' timed out on rank 0" ./build/gpu_test_debug wait-timeout
    expect_trap "IRIS_DEBUG: a bulk copy with nthreads 0 traps naming its cooperation, not a stride of 0 that never ends" "iris_copy_bytes: tid 0 of 0 threads" ./build/gpu_test_debug bad-coop
    expect_trap "IRIS_DEBUG: a wait whose comparison is not an iris_cmp_t traps naming it" "wait 'test-bad-cmp' .* comparison 42 is not an iris_cmp_t" ./build/gpu_test_debug bad-cmp
    expect_trap "IRIS_DEBUG: a team access past the team's members traps naming the team rank" "team rank 3 outside \\[0, 1\\)" ./build/gpu_test_debug bad-team-rank
    check "IRIS_DEBUG: iris_barrier reports diverging heaps on every rank ($(placement 2))" ./build/gpu_test_debug diverge
    # the examples: one rank per GPU; with a single GPU, two ranks share it under mpirun
    # (which also proves that iris_init takes Open MPI's rank and world size)
    run_example() { # name description
      if [ "$ngpu" -ge 2 ]; then check "example $1 $2 ($ngpu ranks, one GPU each)" "./build/$1"
      elif command -v mpirun >/dev/null 2>&1; then check "example $1 $2 (2 ranks under mpirun, shared GPU)" mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_NVLS_ENABLE "./build/$1"
      else say SKIP "example $1" "one GPU and no mpirun to start 2 ranks on it"; fi
    }
    run_example message_passing "runs"
    run_example atomic_counter "runs"
    run_example fused_allreduce_rmsnorm "matches a float64 reference"
    run_example gemm_all_scatter "every rank's C whole and matching a float64 reference"
    run_example teams_tp_dp "TP sums from the device and DP all-reduces on two streams exact"
    if make -s build/gemm_reduce_scatter >>"$log" 2>&1; then run_example gemm_reduce_scatter "every rank's rows of C matching a float64 reference"
    else say FAIL "example gemm_reduce_scatter build"; fi
    check "example local_multi_gpu runs" ./build/local_multi_gpu
  fi
  # the NCCL shim through NCCL's API, one GPU per rank (nccl-tests and torch: tests/nccl/gpu_shim.sh)
  if make -s build/nccl_shim_test >>"$log" 2>&1; then
    for w in $gpu_worlds; do # every rank a process, a thread (in its own thread's teardown), all from one ncclCommInitAll torn down in turn by one thread; the memory door (ncclMemAlloc, windows); a bad root or NULL send on one rank
      for m in procs threads initall-seq memalloc bad-root; do run_counted "nccl_shim_test $m $w" timeout -k 10 300 ./build/nccl_shim_test $m $w; done
      # NCCL_MAX_CTAS=16 (alike on every rank, as NCCL itself needs: with 24 on one rank and 16 on the other NCCL 2.28's own bring-up failed): iris's calls take it
      run_counted "nccl_shim_test procs $w (NCCL_MAX_CTAS=16: iris's calls under the cap)" env NCCL_SHIM_TEST_MAX_CTAS=16 NCCL_SHIM_TEST_EXPECT_CTAS=16 timeout -k 10 300 ./build/nccl_shim_test procs $w
    done
  else say FAIL "nccl_shim_test build (make build/nccl_shim_test)"; fi
  if [ $gpu_common = 1 ]; then
    run_counted "launchers' environments: torchrun, srun, mpiexec variables ($(placement 2))" bash tests/launchers_gpu.sh
    run_counted "multi-node collectives on virtual nodes: 2 x 1, 2 x 2 (default, all-NCCL and composition routes), TCP rendezvous ($(placement 4))" bash tests/multinode_test.sh
    if python3 -c 'import torch' >/dev/null 2>&1 && [ -f build/libiris.so ]; then
      run_counted "python: torch ops, serving slot, Triton, JAX at 2-4 ranks ($(placement 2) and up)" bash python/run_tests.sh gpu
    else
      say SKIP "python torch/JAX GPU tests" "no torch here, or build/libiris.so not built (make lib)"
    fi
    if command -v mpirun >/dev/null 2>&1 && make -s build/mpi_bootstrap >>"$log" 2>&1; then
      check "example mpi_bootstrap under mpirun -np 2 ($(placement 2))" mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_NVLS_ENABLE ./build/mpi_bootstrap
    else
      say SKIP "MPI bootstrap example" "mpirun or mpi.h not available"
    fi
  fi
fi

fi # only = all or gpu

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
