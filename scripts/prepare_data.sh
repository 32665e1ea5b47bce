#!/usr/bin/env bash
# Converts Fashion-MNIST (Debian's dataset-fashion-mnist package) into the
# LMDBs the default jobs read:
#
#   data/fashion-mnist/train_lmdb   60000 records
#   data/fashion-mnist/test_lmdb    10000 records
#
# usage: scripts/prepare_data.sh [BUILD_DIR [SOURCE_DIR]]
#   BUILD_DIR   where ps-data was built (default: build); the program is BUILD_DIR/bin/ps-data
#   SOURCE_DIR  the IDX files (default: /usr/share/datasets/fashion-mnist)
#
# Idempotent: an LMDB that already exists is left alone. ps-data writes each
# LMDB under a temporary name and renames it into place, so an interrupted run
# leaves no half LMDB behind and a rerun finishes the job.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
source_dir="${2:-/usr/share/datasets/fashion-mnist}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
ps_data="$build/bin/ps-data"
out_dir="$root/data/fashion-mnist"

if [[ ! -x "$ps_data" ]]; then
  echo "prepare_data.sh: $ps_data not found; build first (cmake --build $build --target ps-data)" >&2
  exit 1
fi

convert() {  # convert PREFIX OUT_NAME
  local images="$source_dir/$1-images-idx3-ubyte.gz"
  local labels="$source_dir/$1-labels-idx1-ubyte.gz"
  local out="$out_dir/$2"
  if [[ -e "$out" ]]; then
    echo "prepare_data.sh: $out exists, skipped"
    return
  fi
  for f in "$images" "$labels"; do
    if [[ ! -f "$f" ]]; then
      echo "prepare_data.sh: $f not found (install Debian's dataset-fashion-mnist package)" >&2
      exit 1
    fi
  done
  "$ps_data" mnist "$images" "$labels" "$out"
}

mkdir -p "$out_dir"
convert train train_lmdb
convert t10k test_lmdb
