#!/usr/bin/env bash
# PSTrain setup: installs every dependency on Debian 12 (apt and pip), builds
# into build/, and then optionally runs something.
#
#   bash scripts/setup.sh          set up and build
#   bash scripts/setup.sh run      ... then install ps-train, prepare Fashion-MNIST and run
#                                  the default job (configs/fmnist_lenet.yaml)
#   bash scripts/setup.sh test     ... then install ps-train and run every test (ctest, pytest)
#
# Idempotent: installed packages and an up-to-date build are left alone.
# Environment: PSTRAIN_BUILD_DIR (default build), PSTRAIN_JOBS (default: all cores),
# PSTRAIN_WITH_CUDA (AUTO|ON|OFF, default AUTO).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
action="${1:-build}"
build_dir="${PSTRAIN_BUILD_DIR:-build}"
jobs="${PSTRAIN_JOBS:-$(nproc)}"

apt_packages=(
  build-essential cmake pkg-config ccache
  libzmq3-dev cppzmq-dev libsodium-dev
  libprotobuf-dev protobuf-compiler
  liblmdb-dev zlib1g-dev
  libboost-program-options-dev
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  python3 python3-pip
)

install_apt() {
  local missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

install_pip() {
  local missing=()
  python3 -c "import yaml" 2>/dev/null || missing+=(pyyaml)
  python3 -c "import tqdm" 2>/dev/null || missing+=(tqdm)
  python3 -c "import matplotlib" 2>/dev/null || missing+=(matplotlib)
  python3 -c "import pytest" 2>/dev/null || missing+=(pytest)
  python3 -c "import numpy" 2>/dev/null || missing+=(numpy)
  python3 -c "import cv2; cv2.dnn.readNetFromCaffe" 2>/dev/null || missing+=("opencv-python-headless<5")
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing Python packages: ${missing[*]}"
  python3 -m pip install -q "${missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${missing[@]}"
}

# The pstrain Python package (ps-train), editable, so the checkout is what runs.
install_package() {
  local here="$root/python/pstrain/__init__.py"
  local installed
  installed="$(cd / && python3 -c 'import pstrain; print(pstrain.__file__)' 2>/dev/null || true)"
  [ "$installed" = "$here" ] && return 0
  echo "setup: installing the pstrain package (pip install -e .)"
  python3 -m pip install -q -e . 2>/dev/null ||
    python3 -m pip install -q --break-system-packages -e .
}

ps_train() {
  if command -v ps-train >/dev/null; then
    PSTRAIN_BUILD_DIR="$build_dir" ps-train "$@"
  else
    PSTRAIN_BUILD_DIR="$build_dir" python3 -m pstrain "$@"
  fi
}

build() {
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
    -DPSTRAIN_WITH_CUDA="${PSTRAIN_WITH_CUDA:-AUTO}" >/dev/null
  cmake --build "$build_dir" -j "$jobs"
}

install_apt
install_pip
build

case "$action" in
  build) ;;
  run)
    install_package
    bash scripts/prepare_data.sh "$build_dir"
    ps_train configs/fmnist_lenet.yaml
    ;;
  test)
    install_package
    bash scripts/prepare_data.sh "$build_dir"
    status=0
    (cd "$build_dir" && ctest --output-on-failure -j "$jobs") || status=1
    if [ -d tests/python ] || [ -d tests/e2e ]; then
      PSTRAIN_BUILD_DIR="$build_dir" python3 -m pytest -q tests || status=1
    fi
    exit $status
    ;;
  *)
    echo "setup: unknown action '$action' (use: build, run, test)" >&2
    exit 2
    ;;
esac
