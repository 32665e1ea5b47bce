#!/usr/bin/env bash
# Packs a CUDA build of PSTrain into a self-contained bundle for running
# bench/gpu_check.sh on a GPU machine that has the NVIDIA driver, CUDA 13,
# cuDNN 9 and cuBLAS but none of PSTrain's other build dependencies (a rented
# GPU box, a CUDA container image):
#
#   bash bench/gpu_bundle.sh [BUILD_DIR [OUT_DIR]]      (defaults: build-gpu, .gpu)
#
# OUT_DIR/pstrain-gpu.tar.xz holds bin/ (the programs and pstrain_tests), lib/
# (PSTrain's libraries and every shared library they load that is neither part
# of the C runtime nor of CUDA: protobuf, ZeroMQ, LMDB, oneDNN, OpenBLAS...),
# and OUT_DIR/fashion-mnist/ the IDX files the LeNet check trains on. On the GPU
# machine:  BUNDLE=OUT_DIR bash bench/gpu_check.sh
# The C runtime (glibc, libstdc++) comes from the GPU machine and must be at least
# as new as the build machine's; CUDA's libraries come from the GPU machine too
# (gpu_check.sh finds cuDNN and cuBLAS in the CUDA toolkit or in Python's nvidia-*
# packages).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-gpu}"
out="${2:-$root/.gpu}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
case "$out" in /*) ;; *) out="$root/$out" ;; esac
programs=(pstrain_tests ps-server ps-worker ps-net ps-data)
for p in "${programs[@]}"; do
  [[ -x "$build/bin/$p" ]] || { echo "gpu_bundle.sh: $build/bin/$p is missing; build it first" >&2; exit 1; }
done
grep -q 'PSTRAIN_WITH_CUDA:STRING=ON' "$build/CMakeCache.txt" ||
  { echo "gpu_bundle.sh: $build is not a CUDA build (configure with -DPSTRAIN_WITH_CUDA=ON)" >&2; exit 1; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for p in "${programs[@]}"; do cp "$build/bin/$p" "$stage/bin/"; done
cp -L "$build"/lib/*.so* "$stage/lib/"
# pstrain._core (for the Python GPU tests), when it was built.
if compgen -G "$build/python/pstrain/_core*.so" > /dev/null; then
  mkdir -p "$stage/python/pstrain"
  cp "$build"/python/pstrain/_core*.so "$stage/python/pstrain/"
fi

# Every library the programs load, less the C runtime and CUDA's own.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libmvec|libdl\.|librt\.|libpthread\.|libresolv|libnss|libanl|libutil|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink)'
for p in "${programs[@]}"; do
  ldd "$build/bin/$p" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  [[ "$path" == "$build"/* ]] && continue
  cp -L "$path" "$stage/lib/$name"
done

mkdir -p "$out"
XZ_OPT="${XZ_OPT:--T0}" tar -C "$stage" -cJf "$out/pstrain-gpu.tar.xz" bin lib \
  $([[ -d "$stage/python" ]] && echo python)
mkdir -p "$out/fashion-mnist"
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$out/fashion-mnist/"
du -sh "$out/pstrain-gpu.tar.xz" "$out/fashion-mnist"
