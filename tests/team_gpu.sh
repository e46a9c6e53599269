#!/usr/bin/env bash
# The teams' GPU checks alone (tests/team_test.cu) at worlds 2, 3 and 4, as make test runs
# them: builds build/team_test, then prints one PASS/FAIL/SKIP line per check and a total.
#   bash tests/team_gpu.sh [worlds...]     (default: 2 3 4)
set -u
cd "$(dirname "$0")/.."
make -s build/team_test || { echo "FAIL: team_test build"; exit 1; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -lt 1 ]; then echo "SKIP: team_test: no GPU"; exit 0; fi
worlds=${*:-2 3 4}
pass=0; fail=0
for w in $worlds; do
  tq=""; if [ "$ngpu" -lt "$w" ]; then tq="IRIS_TEST_QUICK=1"; echo "# world $w on $ngpu GPU(s): shared GPU, quick loops"; fi
  for m in basic concurrent mismatch first-call late graph stuck stuck-coll stuck-mixed wait-timeout; do
    out=$(env $tq IRIS_WAIT_TIMEOUT_MS=2000 timeout 900 ./build/team_test $m $w 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP):'
    p=$(printf '%s\n' "$out" | grep -c '^PASS:'); f=$(printf '%s\n' "$out" | grep -c '^FAIL:')
    pass=$((pass + p)); fail=$((fail + f))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then echo "FAIL: team_test $m $w exited $rc"; printf '%s\n' "$out" | tail -n 20; fail=$((fail + 1)); fi
  done
done
echo "# team_test: $pass passed, $fail failed"
[ $fail -eq 0 ]
