#!/usr/bin/env bash
# The vendor seam: no vendor or compiler conditional (#if on IRIS_USE_HIP, __CUDA_ARCH__,
# __HIP_PLATFORM_*, __CUDACC__, ...) in the library's headers outside the two vendor
# layers, internal/core/platform.h (host) and internal/device/platform.h (device).
# Everything else tests what those layers define (IRIS_DEVICE_TMA, IRIS_GPU_* ...).
# The allow-list below names the few other places, each with why and its most lines.
set -u
cd "$(dirname "$0")/../.."
pat='(IRIS_USE_HIP|IRIS_USE_CUDA|__CUDA_ARCH|__CUDACC|__NVCC__|__HIPCC__|__HIP__|__HIP_PLATFORM|__HIP_DEVICE_COMPILE__|__AMDGCN|__gfx|CUDART_VERSION|HIP_VERSION)'
layers="internal/core/platform.h internal/device/platform.h"
# file  most-lines  why
allow=$(cat <<'LIST'
iris.h 6 the platform block: the vendor's choice, its runtime API header and stream type, IRIS_DETAIL_GPU_COMPILER (the contract needs them before any implementation file)
internal/gemm/core.h 4 a GEMM core, vendor-specific by nature: the CUDA body (mma.sync, wgmma) and what it shares with the AMD one
internal/gemm/core_mfma.h 2 a GEMM core, vendor-specific by nature: the AMD body (MFMA builtins, wave64)
LIST
)
fail=0
for f in iris*.h $(find internal -name '*.h' | sort); do
  case " $layers " in *" $f "*) continue ;; esac
  hits=$(grep -nE "^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif)\b.*$pat" "$f")
  n=$(printf '%s' "$hits" | grep -c .)
  [ "$n" -eq 0 ] && continue
  most=$(printf '%s\n' "$allow" | awk -v f="$f" '$1 == f {print $2}')
  if [ -z "$most" ]; then
    echo "FAIL: $f: $n vendor/compiler conditional(s) outside the vendor layers ($layers):"; printf '%s\n' "$hits" | sed 's/^/    /'; fail=1
  elif [ "$n" -gt "$most" ]; then
    echo "FAIL: $f: $n vendor/compiler conditionals, the allow-list says at most $most:"; printf '%s\n' "$hits" | sed 's/^/    /'; fail=1
  fi
done
[ $fail -eq 0 ] && echo "vendor_seam: vendor conditionals only in $layers and the allow-list ($(printf '%s\n' "$allow" | awk '{printf "%s%s", s, $1; s=", "}'))"
exit $fail
