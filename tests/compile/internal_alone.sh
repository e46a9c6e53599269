#!/usr/bin/env bash
# Every internal header compiles alone: a unit that includes nothing but it compiles (as
# NCCL and CCCL check their headers), so each file includes what it uses. Every header
# under nvcc (-x cu, sm_90a), syntax and semantics only: the host preprocessor and the
# front end (cudafe++) that nvcc's own --dryrun lists first, not the device compilation
# (which instantiates every kernel: minutes for one header); the C ones (internal/core,
# internal/rendezvous, and the few C files of the others) also as strict C99 and as C++11
# with the host compiler (-fsyntax-only). In parallel, one unit per header and compiler;
# each failure is printed with the compiler's first lines. Then: the includes among the
# internal files form no circle.
#   tests/compile/internal_alone.sh [nvcc|c|all]
set -u
cd "$(dirname "$0")/../.."
what=${1:-all}
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
CC=${CC:-cc}
CXX=${CXX:-c++}
CUDA_INC=${CUDA_HOME:-/usr/local/cuda}/include
dir=build/internal_alone
rm -rf "$dir" && mkdir -p "$dir"
# C headers: the host implementation of iris.h, and the host/device C parts of the others
is_c() {
  case $1 in
    internal/core/* | internal/rendezvous/* | internal/coll/plan.h | internal/coll/fp8.h | internal/coll/mn_route.h | internal/gemm/types.h | internal/moe/grid.h) return 0 ;;
  esac
  return 1
}
jobs=()
for h in $(find internal -name '*.h' | sort); do
  n=$(echo "${h#internal/}" | tr '/.' '__')
  if [ "$what" = all ] || [ "$what" = nvcc ]; then
    printf '#include "%s"\n' "$h" >"$dir/$n.cu"
    jobs+=("nvcc $h $n")
  fi
  if is_c "$h" && { [ "$what" = all ] || [ "$what" = c ]; }; then
    printf '#include "%s"\n' "$h" >"$dir/$n.c"
    jobs+=("c99 $h $n" "cxx $h $n")
  fi
done
one() { # compiler header name
  local out="$dir/$3.$1.log"
  case $1 in
    nvcc) nvcc_front "$dir/$3.cu" >"$out" 2>&1 ;;
    c99) "$CC" -std=c99 -D_GNU_SOURCE -Wall -Wextra -Werror -pedantic -Wno-unused-function -I. -I"$CUDA_INC" -fsyntax-only "$dir/$3.c" >"$out" 2>&1 ;;
    cxx) "$CXX" -std=c++11 -Wall -Wextra -Werror -Wno-unused-function -I. -I"$CUDA_INC" -fsyntax-only -x c++ "$dir/$3.c" >"$out" 2>&1 ;;
  esac || { echo "FAIL: $2 alone ($1)"; head -n 12 "$out" | sed 's/^/    /'; return 1; }
}
# nvcc's first two steps for a unit (gcc -E, cudafe++), as its --dryrun prints them; the
# whole compile where it prints no such steps
nvcc_front() {
  local tmp cmds rc
  tmp=$(mktemp -d)
  cmds=$(TMPDIR=$tmp "$NVCC" -std=c++17 -arch=sm_90a -I. -x cu -c "$1" -o "$tmp/x.o" --dryrun 2>&1 | sed -n 's/^#\$ //p' |
    grep -E '^(gcc|g\+\+|c\+\+|cudafe\+\+) ' | awk '{print} /^cudafe\+\+ /{exit}')
  if printf '%s\n' "$cmds" | grep -q '^cudafe++ '; then
    (PATH=$(dirname "$NVCC"):$PATH; eval "$cmds"); rc=$?
  else
    TMPDIR=$tmp "$NVCC" -std=c++17 -arch=sm_90a -I. -x cu -c "$1" -o "$tmp/x.o"; rc=$?
  fi
  rm -rf "$tmp"
  return $rc
}
export -f one nvcc_front
export NVCC CC CXX CUDA_INC dir
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc 2>/dev/null || echo 2)" -L 1 bash -c 'one "$0" "$1" "$2"'
rc=$?
# and the includes among internal files form no circle (a root header may be included by
# the files of its room: its include guard makes that a no-op, not a circle)
if command -v python3 >/dev/null 2>&1; then
  python3 - <<'PY' || rc=1
import os, re, sys
files = sorted(os.path.join(d, f) for d, _, fs in os.walk("internal") for f in fs if f.endswith(".h"))
edges = {}
for f in files:
    incs = re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(f).read(), re.M)
    edges[f] = [p for p in (os.path.normpath(os.path.join(os.path.dirname(f), i)) for i in incs) if p.startswith("internal" + os.sep)]
state, stack = {}, []
def visit(f):
    state[f] = 1
    stack.append(f)
    for g in edges.get(f, []):
        if state.get(g) == 1:
            print("FAIL: include circle: " + " -> ".join(stack[stack.index(g):] + [g]))
            sys.exit(1)
        if g not in state:
            visit(g)
    stack.pop()
    state[f] = 2
for f in files:
    if f not in state:
        visit(f)
PY
fi
n=$(printf '%s\n' "${jobs[@]}" | grep -c .)
[ $rc -eq 0 ] && echo "internal_alone: $n units compile ($(find internal -name '*.h' | wc -l) headers), no include circle"
exit $rc
