#!/usr/bin/env bash
# The README's quick start works as written: copies ONLY what its copy list names ("Copy
# ... into your project" in "## Quick start") into an empty folder, writes each block that
# follows a line <!-- vendoring-check: NAME --> there as NAME, and runs the README's own
# compile line(s) on it there: the nvcc line, or with `hip` the hipcc gfx90a line; then
# a unit that includes every copied header (the copy list is complete).
#   tests/packaging/check_vendoring.sh [nvcc|hip]
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-nvcc}
readme=README.md
quick=$(awk '/^## /{on = ($0 == "## Quick start")} on' "$readme")
[ -n "$quick" ] || { echo "check_vendoring: no '## Quick start' section in $readme" >&2; exit 1; }
# the copy list: backquoted names in the sentence "Copy ... into your project"
sentence=$(printf '%s\n' "$quick" | tr '\n' ' ' | awk '{ i = index($0, "Copy "); if (!i) exit; t = substr($0, i); j = index(t, " into your project"); if (j) print substr(t, 1, j) }')
items=$(printf '%s\n' "$sentence" | grep -oE '`[^`]+`' | tr -d '`')
[ -n "$items" ] || { echo "check_vendoring: no copy list ('Copy ... into your project') in the quick start" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/iris_vendoring.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for it in $items; do
  [ -e "$it" ] || { echo "check_vendoring: the README's copy list names '$it', which does not exist" >&2; exit 1; }
  cp -R "${it%/}" "$dir/"
done
echo "copied: $(printf '%s ' $items)"
# the marked program(s), verbatim
names=$(printf '%s\n' "$quick" | sed -n 's/^<!-- vendoring-check: \([A-Za-z0-9_.-]*\) -->$/\1/p')
[ -n "$names" ] || { echo "check_vendoring: no <!-- vendoring-check: NAME --> block in the quick start" >&2; exit 1; }
for n in $names; do
  printf '%s\n' "$quick" | awk -v m="<!-- vendoring-check: $n -->" '
    $0 == m { want = 1; next }
    want == 1 && /^```/ { want = 2; next }
    want == 2 && /^```/ { exit }
    want == 2 { print }' >"$dir/$n"
  [ -s "$dir/$n" ] || { echo "check_vendoring: the block after <!-- vendoring-check: $n --> is empty" >&2; exit 1; }
done
# the README's compile line for this compiler (the first one naming the program), verbatim
case $mode in
  nvcc) pat='^nvcc ' ;;
  hip) pat='^hipcc .*--offload-arch=gfx90a' ;;
  *) echo "usage: $0 [nvcc|hip]" >&2; exit 2 ;;
esac
for n in $names; do
  line=$(printf '%s\n' "$quick" | grep -E "$pat" | grep -F " $n " | head -n 1 | sed 's/[[:space:]]*#.*$//')
  [ -n "$line" ] || { echo "check_vendoring: no '$mode' compile line for $n in the quick start" >&2; exit 1; }
  case $line in # the compilers that the Makefile uses
    nvcc\ *) line="${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}${line#nvcc}" ;;
    hipcc\ *) line="${HIPCC:-hipcc}${line#hipcc}" ;;
  esac
  echo "in $(basename "$dir"): $line"
  (cd "$dir" && eval "$line")
done
# and every copied header compiles there, all in one unit (the copy list is complete)
hdrs=$(for it in $items; do case $it in *.h) printf '#include "%s"\n' "$it" ;; esac; done)
printf '%s\n' "$hdrs" >"$dir/vendoring_all_headers.cu"
case $mode in
  nvcc) cc=("${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}" -std=c++17 -arch=sm_90) ;;
  hip) cc=("${HIPCC:-hipcc}" -x hip --offload-arch=gfx90a) ;;
esac
(cd "$dir" && "${cc[@]}" -I. -c vendoring_all_headers.cu -o vendoring_all_headers.o)
echo "check_vendoring: the quick start and the $(printf '%s\n' "$hdrs" | grep -c .) headers compile from the $(echo $items | wc -w) copied items"
