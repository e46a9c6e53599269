#!/usr/bin/env bash
# Every IRIS_API function declared in the public headers (and internal/core/detail_api.h) is a defined, exported
# function of the shared library: nm -D --defined-only LIB against the declarations
# "IRIS_API <type> iris_xxx(" (an entry point cannot go missing from make lib).
#   tests/packaging/check_exports.sh [build/libiris.so]
set -euo pipefail
cd "$(dirname "$0")/../.."
lib=${1:-build/libiris.so}
[ -f "$lib" ] || { echo "check_exports: $lib not found (make lib)" >&2; exit 1; }
api=$(grep -hoE '^[[:space:]]*IRIS_API[^(;]*[^A-Za-z0-9_]iris_[A-Za-z0-9_]+\(' iris*.h internal/core/detail_api.h |
      grep -oE 'iris_[A-Za-z0-9_]+\($' | tr -d '(' | sort -u)
n=$(printf '%s\n' "$api" | grep -c . || true)
[ "$n" -ge 40 ] || { echo "check_exports: only $n IRIS_API declarations found in the headers: the extraction is broken" >&2; exit 1; }
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | sort -u)
missing=$(comm -23 <(printf '%s\n' "$api") <(printf '%s\n' "$exported"))
if [ -n "$missing" ]; then
  echo "check_exports: IRIS_API functions not exported by $lib:" >&2
  printf '  %s\n' $missing >&2
  exit 1
fi
echo "check_exports: all $n IRIS_API functions are exported by $lib"
