#!/usr/bin/env bash
# One call on a GPU machine: build the named targets with every core, then run each
# test command under its own time limit, logging to $OUT (or build/gpu_session).
#   tools/gpu_session.sh "build/gpu_test build/coll_test" "SECONDS:command args" ...
#   (targets "-": build nothing, the binaries are already in build/)
# Prints one summary line per command (exit code, seconds, PASS/FAIL/SKIP counts).
set -u
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu_session}
mkdir -p "$out" build
targets=$1; shift
nvidia-smi -L 2>&1 | head -4
t0=$(date +%s)
# "-": nothing to build (binaries carried in, e.g. from a folder named in the call's carry)
if [ "$targets" != - ]; then
  if ! make -s -j"$(nproc)" $targets >"$out/build.log" 2>&1; then echo "BUILD FAILED"; tail -40 "$out/build.log"; exit 1; fi
  echo "# built in $(( $(date +%s) - t0 )) s: $targets"
fi
export NCCL_NVLS_ENABLE=0
i=0
for spec in "$@"; do
  i=$((i + 1))
  lim=${spec%%:*}; cmd=${spec#*:}
  log="$out/t$(printf %02d $i).log"
  s=$(date +%s)
  timeout -k 5 "$lim" bash -c "$cmd" >"$log" 2>&1; rc=$?
  p=$(grep -c '^PASS' "$log"); f=$(grep -c '^FAIL' "$log"); k=$(grep -c '^SKIP' "$log")
  echo "rc=$rc $(( $(date +%s) - s ))s pass=$p fail=$f skip=$k :: $cmd"
  grep -E '^FAIL' "$log" | head -5 | cut -c1-400
done
