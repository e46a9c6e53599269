#!/usr/bin/env bash
# Tests of the Python package (iris_gpu). Prints PASS / FAIL / SKIP lines as tests/run.sh
# does and ends with "N passed, N failed, N skipped"; exit status 1 if anything failed.
#   python/run_tests.sh          CI part: no GPU (needs build/libiris.so from `make lib`,
#                                else its library tests say SKIP; the torch-without-GPU tests
#                                SKIP without torch; IRIS_PY_PATH adds a site dir with torch)
#   python/run_tests.sh gpu      the torch tests at 2, 3 and 4 ranks, a killed rank (the peer
#                                watch) at 2 and 4, and the JAX tests at 2 and 4 (ranks share
#                                the GPUs when there are fewer; IRIS_PY_WORLDS,
#                                IRIS_PY_DEATH_WORLDS and IRIS_PY_JAX_WORLDS set the sizes, set
#                                empty: none; JAX needs make lib-jax)
set -u
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
if [ "${1:-pure}" = gpu ]; then
  for w in ${IRIS_PY_WORLDS-2 3 4}; do
    PYTHONPATH=python timeout "${IRIS_PY_TIMEOUT:-900}" "$py" python/tests/test_torch_gpu.py --world "$w" >>"$out" 2>"$out.err" || rc=$?
    if [ "$rc" -ne 0 ]; then echo "FAIL: python torch W=$w: exit $rc" >>"$out"; tail -n 40 "$out.err" | sed 's/^/    stderr: /' >&2; rc=0; fi
  done
  for w in ${IRIS_PY_DEATH_WORLDS-2 4}; do  # the peer watch: a killed rank under a 120 s bound
    PYTHONPATH=python timeout 300 "$py" python/tests/test_torch_peer_death.py --world "$w" >>"$out" 2>"$out.err" || rc=$?
    if [ "$rc" -ne 0 ]; then echo "FAIL: python peer death W=$w: exit $rc" >>"$out"; tail -n 40 "$out.err" | sed 's/^/    stderr: /' >&2; rc=0; fi
  done
  for w in ${IRIS_PY_JAX_WORLDS-2 4}; do
    PYTHONPATH=python timeout "${IRIS_PY_TIMEOUT:-900}" "$py" python/tests/test_jax_gpu.py --world "$w" >>"$out" 2>"$out.err" || rc=$?
    if [ "$rc" -ne 0 ]; then echo "FAIL: python jax W=$w: exit $rc" >>"$out"; tail -n 40 "$out.err" | sed 's/^/    stderr: /' >&2; rc=0; fi
  done
  # torch's symmetric memory adopted through iris_device_context_from_peers: torch refuses
  # ranks sharing a GPU, so world 1 here, and 2 where there are 2 GPUs
  ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
  for w in 1 2; do
    if [ "$w" -gt "$ngpu" ]; then echo "SKIP: python torch symmetric memory example W=$w: $ngpu GPU(s); torch refuses ranks sharing one" >>"$out"; continue; fi
    if PYTHONPATH=python timeout 300 "$py" examples/python/torch_symm_mem.py "$w" >"$out.err" 2>&1 && grep -q "20 rounds correct" "$out.err"; then
      echo "PASS: python torch symmetric memory example W=$w (adopted via iris_device_context_from_peers)" >>"$out"
    else
      echo "FAIL: python torch symmetric memory example W=$w" >>"$out"; tail -n 30 "$out.err" | sed 's/^/    stderr: /' >&2
    fi
  done
  # the examples that check their own results (ranks may share a GPU)
  for ex in "tensor_parallel_mlp.py 2" "tensor_parallel_mlp.py 3" "all_reduce_torch.py 2"; do
    if PYTHONPATH=python timeout 300 "$py" examples/python/$ex >"$out.err" 2>&1 && grep -q "correct" "$out.err"; then
      echo "PASS: python example $ex" >>"$out"
    else
      echo "FAIL: python example $ex" >>"$out"; tail -n 30 "$out.err" | sed 's/^/    stderr: /' >&2
    fi
  done
  rm -f "$out.err"
else
  for t in test_pure test_torch_nogpu test_triton_codegen test_jax_nogpu; do  # all but the first SKIP without torch/triton/jax
    rc=0
    PYTHONPATH=python${IRIS_PY_PATH:+:$IRIS_PY_PATH} "$py" python/tests/$t.py >>"$out" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] && ! grep -q '^FAIL: ' "$out" && echo "FAIL: python $t: exit $rc" >>"$out"
  done
fi
grep -vE '^(PASS|FAIL|SKIP): ' "$out" | sed 's/^/    /'
grep -E '^(PASS|FAIL|SKIP): ' "$out"
p=$(grep -c '^PASS: ' "$out"); f=$(grep -c '^FAIL: ' "$out"); s=$(grep -c '^SKIP: ' "$out")
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
