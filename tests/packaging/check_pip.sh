#!/usr/bin/env bash
# A non-editable install of the Python package (pip install ./python into a scratch
# directory), used from another directory: iris_gpu.__version__ matches iris.h's version,
# and iris_gpu.library() finds this tree's build/libiris.so (make lib) without IRIS_LIB.
# Prints PASS / FAIL / SKIP lines (SKIP: pip cannot build here, e.g. no network for the
# build backend and no local setuptools + wheel).
set -u
cd "$(dirname "$0")/../.."
root=$PWD
py=${PYTHON:-python3}
t=$(mktemp -d)
trap 'rm -rf "$t" "$root/python/build" "$root/python/iris_gpu.egg-info"' EXIT
if ! "$py" -m pip --version >/dev/null 2>&1; then echo "SKIP: pip install ./python: pip not installed"; exit 0; fi
flags=""
"$py" -c 'import setuptools, wheel' >/dev/null 2>&1 && flags="--no-build-isolation"
# shellcheck disable=SC2086
if ! timeout 300 "$py" -m pip install -q --no-deps $flags --target "$t/site" ./python >"$t/pip.log" 2>&1; then
  if grep -qiE "network|connection|resolve|No matching distribution|Could not find a version" "$t/pip.log"; then
    echo "SKIP: pip install ./python: the build backend cannot be fetched here ($(grep -m1 -iE 'network|connection|No matching|Could not find' "$t/pip.log" | cut -c1-120))"
    exit 0
  fi
  echo "FAIL: pip install ./python (non-editable)"; tail -n 20 "$t/pip.log" | sed 's/^/    /'; exit 1
fi
want=$(sed -n 's/^#define IRIS_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' iris.h | paste -sd.)
cd "$t" || exit 1
got=$(env -u IRIS_LIB PYTHONPATH="$t/site" "$py" -c 'import iris_gpu; print(iris_gpu.__version__)' 2>&1)
if [ "$got" = "$want" ]; then echo "PASS: pip install ./python: iris_gpu.__version__ is $got, iris.h's version"
else echo "FAIL: pip install ./python: iris_gpu.__version__ is '$got', iris.h says $want"; fi
if [ ! -f "$root/build/libiris.so" ]; then echo "SKIP: pip install ./python finds build/libiris.so: make lib has not run"; exit 0; fi
out=$(env -u IRIS_LIB PYTHONPATH="$t/site" "$py" -c 'import iris_gpu; print(iris_gpu.library().path)' 2>&1)
if [ "$out" = "$root/build/libiris.so" ]; then echo "PASS: pip install ./python: iris_gpu.library() loads this tree's build/libiris.so from another directory"
else echo "FAIL: pip install ./python: iris_gpu.library() gave: $(echo "$out" | tail -n 3 | tr '\n' ' ')"; fi
if [ -f "$t/site/iris_gpu/libiris.so" ]; then echo "PASS: pip install ./python ships a copy of libiris.so in the package"
else echo "FAIL: pip install ./python: no libiris.so in the installed package"; fi
# iris_gpu.jax loads libiris_jax.so from beside the libiris.so it uses: with the shipped copy, the package's
if [ -f "$root/build/libiris_jax.so" ]; then
  if [ -f "$t/site/iris_gpu/libiris_jax.so" ]; then echo "PASS: pip install ./python ships a copy of libiris_jax.so beside its libiris.so"
  else echo "FAIL: pip install ./python: build/libiris_jax.so exists but the installed package has no copy (iris_gpu.jax would not find it beside the shipped libiris.so)"; fi
fi
