#!/usr/bin/env bash
# GPU check of the launchers' environments: two ranks of examples/atomic_counter started
# with the variables torchrun, srun and MPICH's mpiexec give their processes (the ranks
# share the GPUs there are), so iris_init must form a world of 2, never two worlds of 1.
# Open MPI is covered by the examples run under mpirun (tests/run.sh). Prints PASS/FAIL.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=./build/atomic_counter
# run2 NAME "VARS of rank 0" "VARS of rank 1"
run2() {
  local name=$1
  env -u IRIS_RANK -u IRIS_WORLD_SIZE -u IRIS_RENDEZVOUS $2 IRIS_TIMEOUT_MS=60000 "$bin" >"$tmp/0.log" 2>&1 &
  local p0=$!
  env -u IRIS_RANK -u IRIS_WORLD_SIZE -u IRIS_RENDEZVOUS $3 IRIS_TIMEOUT_MS=60000 "$bin" >"$tmp/1.log" 2>&1 &
  local p1=$!
  wait $p0; local r0=$?
  wait $p1; local r1=$?
  if [ $r0 -eq 0 ] && [ $r1 -eq 0 ] && grep -q 'rank 0: slot of rank 1 = ' "$tmp/0.log" && grep -q 'rank 1: slot of rank 1 = ' "$tmp/1.log" &&
     ! grep -q WRONG "$tmp/0.log" "$tmp/1.log"; then
    echo "PASS: $name: 2 ranks form one world and count exactly"
  else
    echo "FAIL: $name: exit $r0/$r1: $(tr '\n' ' ' <"$tmp/0.log" | cut -c1-200) | $(tr '\n' ' ' <"$tmp/1.log" | cut -c1-200)"
  fi
}
job=$$
run2 "torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID)" \
  "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 TORCHELASTIC_RUN_ID=t$job TORCHELASTIC_RESTART_COUNT=0 MASTER_PORT=29500" \
  "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 TORCHELASTIC_RUN_ID=t$job TORCHELASTIC_RESTART_COUNT=0 MASTER_PORT=29500"
run2 "srun's variables (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID, SLURM_STEP_ID)" \
  "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_JOB_ID=$job SLURM_STEP_ID=0" \
  "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 SLURM_JOB_ID=$job SLURM_STEP_ID=0"
run2 "MPICH/Hydra's variables (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, PMI_JOBID)" \
  "PMI_RANK=0 PMI_SIZE=2 MPI_LOCALRANKID=0 MPI_LOCALNRANKS=2 PMI_JOBID=$job" \
  "PMI_RANK=1 PMI_SIZE=2 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2 PMI_JOBID=$job"
# a rank whose partner never comes: a timeout naming rank 0, never a silent world of 1
env -u IRIS_RANK -u IRIS_WORLD_SIZE RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 TORCHELASTIC_RUN_ID=lone$job MASTER_PORT=29501 IRIS_TIMEOUT_MS=2000 \
  "$bin" >"$tmp/lone.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -qi 'timed out' "$tmp/lone.log" && ! grep -q 'slot of rank' "$tmp/lone.log"; then
  echo "PASS: torchrun's rank 1 of 2 without rank 0: a timeout error, not a world of 1"
else
  echo "FAIL: torchrun's rank 1 of 2 without rank 0: exit $rc: $(tr '\n' ' ' <"$tmp/lone.log" | cut -c1-300)"
fi
