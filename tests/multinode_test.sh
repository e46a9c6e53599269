#!/usr/bin/env bash
# Multi-node collectives on one machine, even one GPU (docs/multinode.md): virtual nodes
# (IRIS_HOST_ID for iris, NCCL_HOSTID for NCCL, set per rank by build/multinode_test),
# so the rails run over NCCL's socket transport on loopback. Layouts 2 x 1 and 2 x 2
# (Unix-socket rendezvous), each with the default routes, with every call the
# composition (IRIS_MN_NCCL_WHOLE=none) and (2 x 2) every call whole to NCCL (=all: needs
# 2 GPUs or more, NCCL refuses two ranks of one virtual node on one GPU; SKIP on one); the
# route agreement (IRIS_MN_NCCL_WHOLE unlike between ranks); 2 x 2 again over the TCP
# rendezvous. Prints PASS/FAIL/SKIP lines (SKIP: no GPU, or no NCCL to load). About 5-10
# minutes on one H100.
#   tests/multinode_test.sh            (builds build/multinode_test if missing)
set -u
cd "$(dirname "$0")/.."
# the fp8 reference against a host simulation of NCCL's fp8 arithmetic (no GPU needed;
# run when the binary is there, or after building it below)
fp8_model() { ./build/multinode_test 2 1 --fp8-model && ./build/multinode_test 2 2 --fp8-model; }
ngpu=0; command -v nvidia-smi >/dev/null 2>&1 && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -lt 1 ]; then
  if [ -x build/multinode_test ]; then fp8_model || exit 1; fi
  echo "SKIP: multi-node collectives on virtual nodes: no GPU"; exit 0
fi
have_nccl() { # where iris's dlopen("libnccl.so.2") looks: LD_LIBRARY_PATH, the binary's rpath (CUDA's lib64), ldconfig
  local d
  [ -n "${IRIS_NCCL_LIBRARY:-}" ] && return 0
  for d in ${LD_LIBRARY_PATH//:/ } "${CUDA_HOME:-/usr/local/cuda}/lib64"; do [ -e "$d/libnccl.so.2" ] && return 0; done
  ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'
}
if ! have_nccl; then echo "SKIP: multi-node collectives on virtual nodes: no libnccl.so.2 (set IRIS_NCCL_LIBRARY or LD_LIBRARY_PATH)"; exit 0; fi
[ -x build/multinode_test ] || make -s build/multinode_test || { echo "FAIL: multinode_test build"; exit 1; }
# NCCL between the virtual nodes: sockets on loopback, no NVLS, no InfiniBand
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=1
export IRIS_TIMEOUT_MS=${IRIS_TIMEOUT_MS:-120000}
unset IRIS_RANK IRIS_WORLD_SIZE IRIS_RENDEZVOUS IRIS_HOST_ID NCCL_HOSTID MASTER_ADDR MASTER_PORT IRIS_MN_NCCL_WHOLE
rc=0
fp8_model || rc=1
timeout 900 ./build/multinode_test 2 1 || rc=1                                         # one rank per node: every call to NCCL (the rail)
IRIS_MN_NCCL_WHOLE=none timeout 900 ./build/multinode_test 2 1 --replays 200 || rc=1  # the composition
timeout 900 ./build/multinode_test 2 2 || rc=1                                         # the default routes, per size
IRIS_MN_NCCL_WHOLE=all timeout 900 ./build/multinode_test 2 2 --replays 200 || rc=1   # every call whole to NCCL
IRIS_MN_NCCL_WHOLE=none timeout 900 ./build/multinode_test 2 2 --replays 200 || rc=1  # every call the composition
timeout 600 ./build/multinode_test 2 2 --route-agreement || rc=1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))
timeout 900 ./build/multinode_test 2 2 --tcp "$port" --replays 200 || rc=1
exit $rc
