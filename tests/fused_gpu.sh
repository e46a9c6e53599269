#!/usr/bin/env bash
# iris_all_reduce_rmsnorm on GPUs, one command: builds build/fused_test and build/libiris.so
# (if not built), runs fused_test at 2, 3 and 4 ranks (IRIS_TEST_WORLDS; processes, then
# threads on GPU 0), the torch tests of the op and of CustomAllreduce at 2 and 4 ranks, and
# with BENCH=1 the benchmark
# (python/bench/bench_torch_fused.py) over every GPU. Prints PASS/FAIL/SKIP lines and
# "N passed, N failed, N skipped"; exit status 1 if anything failed.
#   bash tests/fused_gpu.sh            BENCH=1 bash tests/fused_gpu.sh
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! make -s build/fused_test lib >"$out" 2>&1; then cat "$out"; echo "FAIL: build (make build/fused_test lib)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; fi
: >"$out"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
for w in ${IRIS_TEST_WORLDS:-2 3 4}; do
  if [ "$ngpu" -lt "$w" ]; then IRIS_TEST_QUICK=1 ./build/fused_test "$w" | tee -a "$out"
  else ./build/fused_test "$w" | tee -a "$out"; fi
  IRIS_WAIT_TIMEOUT_MS=20000 ./build/fused_test threads "$w" | tee -a "$out" # the ranks as threads on GPU 0
done
if python3 -c 'import torch' >/dev/null 2>&1; then
  for w in 2 4; do PYTHONPATH=python timeout 900 python3 python/tests/test_torch_gpu.py --world "$w" --only rmsnorm | tee -a "$out"; done
else
  echo "SKIP: python torch tests of all_reduce_rmsnorm: no torch here" | tee -a "$out"
fi
if [ "${BENCH:-0}" = 1 ]; then PYTHONPATH=python python3 python/bench/bench_torch_fused.py "$ngpu"; fi
p=$(grep -c '^PASS: ' "$out"); f=$(grep -c '^FAIL: ' "$out"); s=$(grep -c '^SKIP: ' "$out")
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
