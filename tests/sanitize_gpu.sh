#!/usr/bin/env bash
# compute-sanitizer over the multi-rank GPU tests: memcheck (out-of-bounds and misaligned
# accesses of global memory, peers' heaps included), racecheck (shared memory hazards) and
# synccheck (barriers in divergent code) on every rank. mpirun starts the ranks, each under
# its own sanitizer (a rank the fork launcher starts is not instrumented); the tests' short
# loops (IRIS_TEST_QUICK=1), world 2 by default, ranks on one GPU or several. Not part of
# make test: a pass takes about 10 minutes (the tools slow each kernel 10-100x).
#   bash tests/sanitize_gpu.sh [world]
#   IRIS_SANITIZE_ONLY=REGEX: only the rows whose "tool name" matches (grep -E), e.g.
#   'memcheck coll_test' or 'fused_test|moe_test': a pass split over several shorter runs.
# Prints one PASS / FAIL / SKIP line per program and tool, then a total. A row fails when
# the sanitizer reports an error on any rank, the test reports a failure, or the row runs
# past its limit (IRIS_SANITIZE_LIMIT_S, default 300 s each).
set -u
cd "$(dirname "$0")/.."
w=${1:-2}
limit=${IRIS_SANITIZE_LIMIT_S:-300}
if ! command -v compute-sanitizer >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/compute-sanitizer ]; then PATH=$PATH:/usr/local/cuda/bin; fi
for need in compute-sanitizer mpirun nvidia-smi; do
  command -v $need >/dev/null 2>&1 || { echo "SKIP: compute-sanitizer over the GPU tests: $need not found"; exit 0; }
done
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 1 ]; then echo "SKIP: compute-sanitizer over the GPU tests: no GPU"; exit 0; fi
progs="build/coll_test build/fused_test build/team_test build/moe_test build/tile_test build/gpu_test build/fault_test"
# IRIS_SANITIZE_BUILD=0: the binaries in build/ as they are (tests/tools/sanitize_check.sh)
if [ "${IRIS_SANITIZE_BUILD:-1}" != 0 ]; then make -s $progs || { echo "FAIL: sanitize: building $progs"; exit 1; }; fi
export IRIS_TEST_QUICK=1 NCCL_NVLS_ENABLE=0 IRIS_WAIT_TIMEOUT_MS=${IRIS_WAIT_TIMEOUT_MS:-120000}
root=""; [ "$(id -u)" = 0 ] && root=--allow-run-as-root
pass=0; fail=0
row() { # tool name env... -- cmd...
  local tool=$1 name=$2 envs=() log; shift 2
  if [ -n "${IRIS_SANITIZE_ONLY:-}" ] && ! printf '%s %s\n' "$tool" "$name" | grep -qE -- "$IRIS_SANITIZE_ONLY"; then return 0; fi
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  log=$(mktemp)
  timeout "$limit" mpirun $root --oversubscribe -np "$w" -x IRIS_TEST_QUICK -x NCCL_NVLS_ENABLE -x IRIS_WAIT_TIMEOUT_MS "${envs[@]}" \
    compute-sanitizer --error-exitcode 99 --print-limit 40 --tool "$tool" "$@" >"$log" 2>&1
  local rc=$? summaries bad failed passed
  summaries=$(grep -cE '(ERROR|RACECHECK) SUMMARY' "$log")
  bad=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$log" | grep -vcE 'SUMMARY: 0 (errors|hazards)')
  failed=$(grep -c '^FAIL' "$log"); passed=$(grep -c '^PASS' "$log")
  if [ $rc -eq 0 ] && [ "$summaries" -eq "$w" ] && [ "$bad" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    echo "PASS: $tool $name ($w ranks, $passed checks, $summaries sanitized processes, 0 errors)"; pass=$((pass + 1))
  else
    echo "FAIL: $tool $name ($w ranks): exit $rc, $summaries of $w ranks summarised, $bad with errors, $failed test failures"
    grep -E '^(FAIL|=========)' "$log" | grep -v 'COMPUTE-SANITIZER' | head -n 30 | sed 's/^/    /'; fail=$((fail + 1)) # details indented: one verdict line per row
  fi
  rm -f "$log"
}
# memcheck: every collective's matrix, the other coll_test parts, the fused op, teams, MoE,
# tile blocks, RMA, two fault modes (a short bound: these parts wait for a peer on purpose)
IRIS_TEST_PARTS=matrix,mixed IRIS_TEST_KINDS=all_reduce,reduce_scatter row memcheck "coll_test (all-reduce, reduce-scatter: matrix, mixed)" IRIS_TEST_PARTS IRIS_TEST_KINDS -- ./build/coll_test "$w"
IRIS_TEST_PARTS=matrix IRIS_TEST_KINDS=all_gather,all_to_all,broadcast row memcheck "coll_test (all-gather, all-to-all, broadcast: matrix)" IRIS_TEST_PARTS IRIS_TEST_KINDS -- ./build/coll_test "$w"
IRIS_TEST_PARTS=large,offsets,relay,ar_store,armed,graph,back_to_back row memcheck "coll_test (large, offsets, relay, ar_store, armed, graph, back_to_back)" IRIS_TEST_PARTS -- ./build/coll_test "$w"
row memcheck "fused_test" -- ./build/fused_test "$w"
for m in basic concurrent mismatch; do row memcheck "team_test $m" -- ./build/team_test $m "$w"; done
row memcheck "moe_test" -- ./build/moe_test "$w"
row memcheck "tile_test" -- ./build/tile_test "$w"
row memcheck "gpu_test procs" -- ./build/gpu_test procs "$w"
for m in streams mismatch; do IRIS_WAIT_TIMEOUT_MS=20000 row memcheck "fault_test $m" -- ./build/fault_test $m "$w"; done
# racecheck and synccheck: the kernels with shared memory (the fused op, MoE, tile blocks)
row racecheck "fused_test" -- ./build/fused_test "$w"
row racecheck "moe_test" -- ./build/moe_test "$w"
row racecheck "tile_test" -- ./build/tile_test "$w"
row synccheck "fused_test" -- ./build/fused_test "$w"
if [ $((pass + fail)) -eq 0 ]; then echo "FAIL: sanitize: no row matches IRIS_SANITIZE_ONLY='${IRIS_SANITIZE_ONLY:-}'"; fail=1; fi
echo "# sanitize: $pass passed, $fail failed"
[ $fail -eq 0 ]
