#!/usr/bin/env bash
# A project that uses iris (tests/packaging/consumer: one small .cu, iris.h +
# iris_collectives.h, linked to libiris.so) built three ways, then run (no GPU needed: it
# compares the library's version and struct sizes with the headers'):
#   add_subdirectory  CMake, iris as a subdirectory
#   find_package      CMake, against `cmake --install` of iris into build/packaging/prefix
#   pkg-config        nvcc $(pkg-config --cflags --libs iris) against the same prefix
# All use build/libiris.so (make lib) as the README says: iris's CMake finds it fresh (newer
# than every header) and imports it, so none compiles lib/iris.cu again; the check fails if
# the configure step does not say so.
#   tests/packaging/consumers.sh add_subdirectory|find_package|pkg-config
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
mode=${1:?usage: consumers.sh add_subdirectory|find_package|pkg-config}
lib=$root/build/libiris.so
[ -f "$lib" ] || { echo "consumers: $lib not found (make lib)" >&2; exit 1; }
out=$root/build/packaging
prefix=$out/prefix
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
mkdir -p "$out"
cmake_consumer() { # build dir, extra cmake arguments...
  local b=$1; shift
  rm -rf "$b"
  cmake -S tests/packaging/consumer -B "$b" -DCMAKE_CUDA_COMPILER="$nvcc" "$@" | tee "$b.log"
  cmake --build "$b"
  "$b/consumer"
}
install_iris() { # configure iris alone (no CUDA language, the prebuilt library) and install it
  rm -rf "$out/iris-build" "$prefix"
  cmake -S . -B "$out/iris-build" -DCMAKE_INSTALL_PREFIX="$prefix" | tee "$out/iris-build.log"
  grep -q "iris::shared is the prebuilt" "$out/iris-build.log" || { echo "consumers: iris's configure did not take build/libiris.so" >&2; exit 1; }
  cmake --install "$out/iris-build"
}
case $mode in
  add_subdirectory)
    cmake_consumer "$out/consumer-subdir" -DIRIS_SOURCE_DIR="$root"
    grep -q "iris::shared is the prebuilt" "$out/consumer-subdir.log" || { echo "consumers: add_subdirectory did not take build/libiris.so" >&2; exit 1; } ;;
  find_package)
    install_iris
    cmake_consumer "$out/consumer-package" -DCMAKE_PREFIX_PATH="$prefix"
    # iris::iris links the same libraries installed as in the tree (dlopen's, for the
    # implementation's NCCL/RCCL loader: libdl before glibc 2.34)
    dl=$(cmake --system-information 2>/dev/null | sed -n 's/^CMAKE_DL_LIBS "\(.*\)"$/\1/p' | head -n 1)
    links=$(sed -n 's/^-- iris::iris links: //p' "$out/consumer-package.log")
    echo "find_package: iris::iris links: $links (CMAKE_DL_LIBS: '$dl')"
    for l in $dl; do
      case ";$links;" in *";$l;"*) ;; *) echo "consumers: find_package's iris::iris does not link $l (add_subdirectory's does)" >&2; exit 1 ;; esac
    done ;;
  pkg-config)
    [ -f "$prefix/lib/pkgconfig/iris.pc" ] || install_iris
    flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs iris)
    echo "pkg-config --cflags --libs iris: $flags"
    # shellcheck disable=SC2086
    "$nvcc" -std=c++17 -arch=sm_90 -cudart shared tests/packaging/consumer/consumer.cu $flags -Xlinker -rpath,"$prefix/lib" -o "$out/consumer-pc"
    "$out/consumer-pc" ;;
  *) echo "consumers: unknown mode '$mode'" >&2; exit 2 ;;
esac
