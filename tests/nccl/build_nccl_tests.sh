#!/usr/bin/env bash
# tests/nccl/build_nccl_tests.sh SRC [OUT] — build NVIDIA's nccl-tests (not part of this
# repository) for the shim's GPU checks (tests/nccl/gpu_shim.sh).
#   SRC  a checkout of github.com/NVIDIA/nccl-tests, or a bare git directory of one
#        (its HEAD is exported first)
#   OUT  where the binaries go (default build/nccl-tests): the threaded build (one
#        process, -t ranks) in OUT/, and, when Open MPI's headers are installed, the MPI
#        build (one process per rank) in OUT/mpi/ (suffix _mpi)
# Only sm_90 code (H100 / H200) to keep the binaries small; NVCC_GENCODE overrides.
# They link libnccl.so.2 as usual: gpu_shim.sh runs them on the real NCCL and with the
# shim preloaded. Variables: CUDA_HOME (/usr/local/cuda), NCCL_HOME (CUDA_HOME: nccl.h in
# include/, libnccl in lib/), MPI_HOME (/usr/lib/x86_64-linux-gnu/openmpi), JOBS.
set -eu
src=$(cd "${1:?usage: build_nccl_tests.sh <nccl-tests checkout or bare git dir> [out dir]}" && pwd)
cd "$(dirname "$0")/../.."
out=$(mkdir -p "${2:-build/nccl-tests}" && cd "${2:-build/nccl-tests}" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
MPI_HOME=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}
JOBS=${JOBS:-$(nproc)}
bins="all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf broadcast_perf reduce_perf sendrecv_perf"
if [ ! -f "$src/src/common.cu" ]; then # a bare repository: export its HEAD
  tree=$out/src-tree
  rm -rf "$tree" && mkdir -p "$tree"
  git --git-dir="$src" archive HEAD | tar -x -C "$tree"
  src=$tree
fi
echo "# nccl-tests $(sed -n 's/.*NCCL_TESTS_VERSION *"\{0,1\}\([0-9.]*\).*/\1/p' "$src/src/common.h" 2>/dev/null | head -1) from $src -> $out"
build() { # builddir suffix mpi
  local targets="" b
  for b in $bins; do targets="$targets $1/$b$2"; done
  make -C "$src/src" -j"$JOBS" BUILDDIR="$1" NAME_SUFFIX="$2" MPI="$3" MPI_HOME="$MPI_HOME" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$NCCL_HOME" \
       NVCC_GENCODE="$GENCODE" $targets
}
build "$out" "" 0
if [ -f "$MPI_HOME/include/mpi.h" ]; then build "$out/mpi" _mpi 1
else echo "# no $MPI_HOME/include/mpi.h: MPI build skipped (apt-get install libopenmpi-dev)"; fi
# only the binaries stay (about 6 MB each), so the folder can be carried to a GPU machine
rm -rf "$out/src-tree" "$out"/*.o "$out/os" "$out/verifiable" "$out/mpi"/*.o "$out/mpi/os" "$out/mpi/verifiable"
for b in $bins; do ls -la "$out/$b"; done
