#!/usr/bin/env bash
# tests/nccl/cpu_checks.sh — libiris_nccl.so on a machine without a GPU (make test runs it):
# its exports against nccl.h, its soname, nothing else exported, forwarding to the real
# NCCL linked, preloaded and found by search (skipping itself), the errors without a real
# NCCL, and the routing decisions (nccl/route.h). One PASS / FAIL / SKIP line per check.
set -u
cd "$(dirname "$0")/../.."
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_INC=${NCCL_INC:-$CUDA_HOME/include}
REAL=${IRIS_NCCL_TEST_REAL:-$CUDA_HOME/lib64/libnccl.so.2}
lib=build/libiris_nccl.so
log=build/nccl_cpu_checks.log
: >"$log"
say() { case $1 in PASS) echo "PASS: $2" ;; FAIL) echo "FAIL: $2${3:+: $3}" ;; SKIP) echo "SKIP: $2: $3" ;; esac; }

if ! make -s lib-nccl >>"$log" 2>&1; then say FAIL "make lib-nccl builds build/libiris_nccl.so" "$(tail -5 "$log" | tr '\n' ' ')"; exit 1; fi
say PASS "make lib-nccl builds build/libiris_nccl.so"

# (a) every function of nccl.h (and the device API's host functions) and its pnccl alias,
#     read from the headers here independently of tools/gen_nccl_shim.py
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
want=$( { sed 's@//.*@@' "$NCCL_INC/nccl.h" | tr '\n' ' ' | tr ';' '\n' |
            grep -oE '(ncclResult_t|const char *\*|void) +p?nccl[A-Za-z0-9_]+ *\([^()]*\) *$' | grep -oE 'p?nccl[A-Za-z0-9_]+ *\(' | tr -d ' (';
          cat "$NCCL_INC"/nccl_device/*.h 2>/dev/null | tr '\n' ' ' | tr ';' '\n' | grep -E 'NCCL_EXTERN_C +__host__' | grep -oE 'nccl[A-Za-z0-9_]+ *\(' | tr -d ' (';
          printf '%s\n' ncclDevCommCreate ncclDevCommDestroy ncclGetPeerDevicePointer ncclGetLsaMultimemDevicePointer; } | sed 's/^p//' | sort -u)
n_h=$(echo "$want" | wc -l)
missing=""
for f in $want; do
  echo "$exported" | grep -qx "$f" || missing="$missing $f"
  echo "$exported" | grep -qx "p$f" || missing="$missing p$f"
done
n_nccl_h=$(sed 's@//.*@@' "$NCCL_INC/nccl.h" | tr '\n' ' ' | tr ';' '\n' | grep -cE '(ncclResult_t|const char *\*|void) +nccl[A-Za-z0-9_]+ *\([^()]*\) *$')
if [ -z "$missing" ] && [ "$n_nccl_h" -ge 30 ]; then
  say PASS "exports: every function of nccl.h ($n_nccl_h), of the device API's host side and torch 2.14's four, each with its pnccl alias ($((2 * n_h)) names)"
else say FAIL "exports: every function of nccl.h and its pnccl alias" "missing:${missing:- (none; but only $n_nccl_h declarations parsed)}"; fi
extra=$(echo "$exported" | grep -vE '^(p?nccl[A-Za-z0-9_]+|iris_nccl_[a-z_]+)$' | tr '\n' ' ')
if [ -z "$extra" ]; then say PASS "exports: nothing but nccl*, pnccl* and iris_nccl_* (iris and the CUDA runtime stay inside)"
else say FAIL "exports: nothing but nccl*, pnccl* and iris_nccl_*" "also: $extra"; fi

# (b) the soname
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\].*/\1/p')
if [ "$soname" = libnccl.so.2 ]; then say PASS "soname is libnccl.so.2"; else say FAIL "soname is libnccl.so.2" "it is '$soname'"; fi

# (c) forwarding, linked three ways
if [ ! -f "$REAL" ]; then
  say SKIP "forwarding to the real NCCL" "no $REAL (set IRIS_NCCL_TEST_REAL)"
  exit 0
fi
cc=${CC:-cc}
flags="-std=c99 -O1 -Wall -Wextra -Werror -I$NCCL_INC -I$CUDA_HOME/include"
if ! $cc $flags tests/nccl/version_test.c -o build/nccl_version_shim -Lbuild/nccl -lnccl -Wl,-rpath,'$ORIGIN/nccl' -ldl >>"$log" 2>&1 ||
   ! $cc $flags tests/nccl/version_test.c -o build/nccl_version_real -L"$(dirname "$REAL")" -lnccl -Wl,-rpath,"$(dirname "$REAL")" -ldl >>"$log" 2>&1; then
  say FAIL "version_test builds" "$(tail -5 "$log" | tr '\n' ' ')"
  exit 1
fi
run() { # label env... -- command: its PASS/FAIL lines, and a FAIL if it printed none or crashed
  local out rc
  out=$(env "$@" 2>>"$log"); rc=$?
  echo "$out" >>"$log"
  echo "$out" | grep -E '^(PASS|FAIL): '
  if [ "$rc" -ne 0 ] && ! echo "$out" | grep -q '^FAIL: '; then say FAIL "$* " "exit $rc"; fi
}
# linked against the shim (build/nccl/libnccl.so.2), the real NCCL found by search
run -u IRIS_NCCL_LIB ./build/nccl_version_shim real "$REAL" "linked against the shim: "
# linked against the real NCCL, the shim preloaded (torch's way), IRIS_NCCL_LIB naming the real one
run LD_PRELOAD="$PWD/$lib" IRIS_NCCL_LIB="$REAL" ./build/nccl_version_real real "$REAL" "LD_PRELOAD, IRIS_NCCL_LIB: "
# the shim first on LD_LIBRARY_PATH as libnccl.so.2: its search must skip itself
run -u IRIS_NCCL_LIB LD_LIBRARY_PATH="$PWD/build/nccl:$(dirname "$REAL")" ./build/nccl_version_real real "$REAL" "LD_LIBRARY_PATH (the shim's folder first): "
# an nvidia-nccl wheel beside another NVIDIA wheel's library the process has mapped (torch's case)
wheel=$PWD/build/nccl_fake_wheel/site-packages/nvidia
mkdir -p "$wheel/cuda_runtime/lib" "$wheel/nccl/lib"
echo 'int iris_nccl_fake_wheel_lib;' | ${CC:-cc} -shared -fPIC -x c - -o "$wheel/cuda_runtime/lib/libfake.so"
ln -sf "$REAL" "$wheel/nccl/lib/libnccl.so.2"
run -u IRIS_NCCL_LIB LD_PRELOAD="$PWD/$lib:$wheel/cuda_runtime/lib/libfake.so" IRIS_NCCL_TEST_EXPECT_LIB="$wheel/nccl/lib/libnccl.so.2" \
  ./build/nccl_version_real real "$REAL" "LD_PRELOAD, the real NCCL from the nvidia-nccl wheel beside a loaded NVIDIA wheel: "
# no real NCCL
run IRIS_NCCL_LIB=/nonexistent/libnccl.so.2 ./build/nccl_version_shim missing /nonexistent/libnccl.so.2 "IRIS_NCCL_LIB missing: "
# set but empty: an error (every IRIS_* variable's rule), not a search
run IRIS_NCCL_LIB= ./build/nccl_version_shim missing "set but empty" "IRIS_NCCL_LIB set but empty: "

# (d) the routing decisions
if ${CXX:-c++} -std=c++17 -O1 -Wall -Wextra -Werror -Wno-format-truncation -I. -I"$NCCL_INC" -I"$CUDA_HOME/include" tests/nccl/route_test.cc -o build/nccl_route_test >>"$log" 2>&1; then
  ./build/nccl_route_test 2>>"$log"
else
  say FAIL "route_test builds" "$(tail -5 "$log" | tr '\n' ' ')"
fi
