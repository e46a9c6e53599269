#!/usr/bin/env bash
# Codegen check: compile tests/codegen/signal_wait.cu for one backend and check that
# each flag helper holds the instructions it promises. Usage: check.sh ptx|gfx90a|gfx940
set -u
backend=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/build/codegen_$backend.s
mkdir -p "$root/build"
case $backend in
  ptx) ${NVCC:-/usr/local/cuda/bin/nvcc} -arch=sm_90 -O2 -ptx "$here/signal_wait.cu" -o "$out" || exit 1 ;;
  gfx90a|gfx940) ${HIPCC:-hipcc} -x hip --offload-arch=$backend -O2 --cuda-device-only -S "$here/signal_wait.cu" -o "$out" 2>/dev/null || exit 1 ;;
  *) echo "usage: $0 ptx|gfx90a|gfx940"; exit 2 ;;
esac

fail=0
# body KERNEL: the lines of one kernel's code
body() {
  if [ "$backend" = ptx ]; then
    awk -v k="$1" '$0 ~ "\\.entry "k"\\(" {on=1} on {print} on && /^}/ {exit}' "$out"
  else
    awk -v k="$1" '$0 ~ "^"k":" {on=1; next} on && /s_endpgm/ {exit} on {print}' "$out"
  fi
}
# expect KERNEL "what it promises" REGEX...: every regex must match, in this order
expect() {
  local k=$1 what=$2; shift 2
  local b; b=$(body "$k")
  if [ -z "$b" ]; then echo "  $backend $k: kernel not found"; fail=1; return; fi
  local rest="$b" re
  for re in "$@"; do
    local line; line=$(printf '%s\n' "$rest" | grep -n -E -m1 "$re" | cut -d: -f1)
    if [ -z "$line" ]; then echo "  $backend $k ($what): no /$re/ (in order)"; fail=1; return; fi
    rest=$(printf '%s\n' "$rest" | tail -n +$((line + 1)))
  done
  echo "  $backend $k: $what"
}
refuse() { # refuse KERNEL "why" REGEX: the regex must not match
  if body "$1" | grep -q -E "$3"; then echo "  $backend $1: $2"; fail=1; fi
}

case $backend in
  ptx)
    expect cg_signal "release store at system scope" 'st\.release\.sys\.global\.u32'
    expect cg_signal_add "release add at system scope" 'atom\.release\.sys\.global\.add\.u32'
    expect cg_wait "acquire load at system scope" 'ld\.acquire\.sys\.global\.u32'
    expect cg_signal_relaxed "relaxed store at system scope" 'st\.relaxed\.sys\.global\.u32'
    refuse cg_signal_relaxed "relaxed signal must not release" 'release'
    expect cg_wait_relaxed "relaxed poll at system scope" 'ld\.relaxed\.sys\.global\.u32'
    refuse cg_wait_relaxed "relaxed wait must not acquire" 'acquire'
    ;;
  gfx90a)
    expect cg_signal "write back L2, wait, then store" 'buffer_wbl2' 's_waitcnt vmcnt\(0\)' 'global_store_dword'
    expect cg_signal_add "write back L2, wait, then atomic add" 'buffer_wbl2' 's_waitcnt vmcnt\(0\)' 'global_atomic_add'
    expect cg_wait "coherent load, then invalidate L2 and L1" 'global_load_dword .* glc' 's_waitcnt vmcnt\(0\)' 'buffer_invl2' 'buffer_wbinvl1_vol'
    refuse cg_signal_relaxed "relaxed signal must not write back" 'buffer_wbl2'
    refuse cg_wait_relaxed "relaxed wait must not invalidate" 'buffer_inv'
    ;;
  gfx940)
    expect cg_signal "system write-back, wait, then system-coherent store" 'buffer_wbl2 sc0 sc1' 's_waitcnt vmcnt\(0\)' 'global_store_dword .* sc0 sc1'
    expect cg_signal_add "system write-back, wait, then system atomic add" 'buffer_wbl2 sc0 sc1' 's_waitcnt vmcnt\(0\)' 'global_atomic_add .* sc1'
    expect cg_wait "system-coherent load, then system invalidate" 'global_load_dword .* sc0 sc1' 's_waitcnt vmcnt\(0\)' 'buffer_inv sc0 sc1'
    refuse cg_signal_relaxed "relaxed signal must not write back" 'buffer_wbl2'
    refuse cg_wait_relaxed "relaxed wait must not invalidate" 'buffer_inv'
    ;;
esac
exit $fail
