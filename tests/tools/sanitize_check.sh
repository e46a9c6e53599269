#!/usr/bin/env bash
# tests/sanitize_gpu.sh's verdicts, without a GPU: stand-ins for nvidia-smi, mpirun and
# compute-sanitizer (each rank a process that prints what the real tools print) in four
# cases: clean (every row passes), sanitizer errors, a rank that was not sanitized, a
# failed check with a clean sanitizer (every row fails); and IRIS_SANITIZE_ONLY's filter.
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
cat > "$d/nvidia-smi" <<'X'
#!/bin/sh
echo "GPU 0: stand-in"
X
cat > "$d/mpirun" <<'X'
#!/usr/bin/env bash
np=1
while [ $# -gt 0 ]; do case "$1" in --allow-run-as-root|--oversubscribe) shift;; -np) np=$2; shift 2;; -x) shift 2;; *) break;; esac; done
rc=0; for ((i = 0; i < np; i++)); do STANDIN_RANK=$i "$@" || rc=$?; done; exit $rc
X
cat > "$d/compute-sanitizer" <<'X'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do case "$1" in --error-exitcode|--print-limit|--tool) shift 2;; *) break;; esac; done
echo "========= COMPUTE-SANITIZER"
case "${STANDIN_CASE}" in
  errors) echo "PASS: a check"; echo "========= Invalid __global__ read of size 16 bytes"; echo "========= ERROR SUMMARY: 1 error"; exit 99;;
  unsanitized) echo "PASS: a check"; [ "$STANDIN_RANK" = 0 ] && echo "========= ERROR SUMMARY: 0 errors"; exit 0;;
  failed) echo "FAIL: a check: wrong element"; echo "========= ERROR SUMMARY: 0 errors"; exit 1;;
  *) echo "PASS: a check"; echo "========= ERROR SUMMARY: 0 errors"; exit 0;;
esac
X
chmod +x "$d"/*
run() { PATH="$d:$PATH" STANDIN_CASE=$1 IRIS_SANITIZE_BUILD=0 IRIS_SANITIZE_LIMIT_S=20 bash tests/sanitize_gpu.sh 2 2>&1; }
fail=0
out=$(run clean); rc=$?
rows=$(printf '%s\n' "$out" | grep -c '^PASS:')
if [ $rc -ne 0 ] || [ "$rows" -lt 10 ] || printf '%s\n' "$out" | grep -q '^FAIL'; then echo "clean case: exit $rc, $rows rows passed"; fail=1; fi
for c in errors unsanitized failed; do
  out=$(run $c); rc=$?
  if [ $rc -eq 0 ] || printf '%s\n' "$out" | grep -q '^PASS:' || [ "$(printf '%s\n' "$out" | grep -c '^FAIL:')" -ne "$rows" ]; then echo "case $c: exit $rc, a row passed or not every row failed"; fail=1; fi
done
# IRIS_SANITIZE_ONLY: only the matching rows run; a pattern that matches none fails
out=$(IRIS_SANITIZE_ONLY='^racecheck (fused|moe)_test' run clean); rc=$?
if [ $rc -ne 0 ] || [ "$(printf '%s\n' "$out" | grep -c '^PASS:')" -ne 2 ] || ! printf '%s\n' "$out" | grep -q '^PASS: racecheck moe_test'; then echo "IRIS_SANITIZE_ONLY: exit $rc, not the 2 racecheck rows"; fail=1; fi
out=$(IRIS_SANITIZE_ONLY='no such row' run clean); rc=$?
if [ $rc -eq 0 ] || ! printf '%s\n' "$out" | grep -q '^FAIL: sanitize: no row matches'; then echo "IRIS_SANITIZE_ONLY matching no row: exit $rc, no failure"; fail=1; fi
[ $fail -eq 0 ] && echo "sanitize_gpu.sh: $rows rows pass when clean; every row fails on sanitizer errors, an unsanitized rank, a failed check; IRIS_SANITIZE_ONLY runs only its rows"
exit $fail
