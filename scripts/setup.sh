#!/usr/bin/env bash
# PSTrain setup: installs every dependency on Debian 12 (apt and pip), builds
# into build/, and then optionally runs something.
#
#   bash scripts/setup.sh          set up and build the programs
#   bash scripts/setup.sh run      ... then install ps-train, prepare Fashion-MNIST and run
#                                  the default job (configs/fmnist_lenet.yaml)
#   bash scripts/setup.sh test     ... install what the tests need, build the tests and
#                                  benchmarks too, and run every test (ctest, pytest)
#   bash scripts/setup.sh bench [ARGS] ... install the benchmarks' peers too (PyTorch:
#                                  Debian's python3-torch), prepare Fashion-MNIST and run
#                                  bench/torch_peer.py ARGS (PSTrain beside PyTorch; --quick)
#   bash scripts/setup.sh fuzz [ARGS]  install clang and libFuzzer, then run
#                                  scripts/fuzz.sh ARGS (sanitizer build in build-fuzz/,
#                                  every fuzz target for PSTRAIN_FUZZ_SECONDS, default 60)
#
# `run` builds only the four programs the job needs; `test` reuses those objects
# and adds the test suites. Idempotent: installed packages and an up-to-date build
# are left alone. At the end it prints how long each phase took.
# Environment:
#   PSTRAIN_BUILD_DIR       build folder (default build)
#   PSTRAIN_JOBS            parallel compile jobs (default: all cores)
#   PSTRAIN_WITH_CUDA       AUTO|ON|OFF (default AUTO: CUDA only where nvcc and a GPU are)
#   PSTRAIN_RUN_ITERATIONS  `run` only: train the default job for this many iterations
#                           per worker instead of 3000 (e.g. 300 for a quick check),
#                           testing at the last one
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
action="${1:-build}"
build_dir="${PSTRAIN_BUILD_DIR:-build}"
jobs="${PSTRAIN_JOBS:-$(nproc)}"

case "$action" in
  build|run|test|bench|fuzz) ;;
  *)
    echo "setup: unknown action '$action' (use: build, run, test, bench, fuzz)" >&2
    exit 2
    ;;
esac
if [[ -n "${PSTRAIN_RUN_ITERATIONS:-}" && ! "$PSTRAIN_RUN_ITERATIONS" =~ ^[1-9][0-9]*$ ]]; then
  echo "setup: PSTRAIN_RUN_ITERATIONS must be a positive whole number, got '$PSTRAIN_RUN_ITERATIONS'" >&2
  exit 2
fi

# What building and running need. ocl-icd-opencl-dev: Debian's oneDNN CMake config
# asks for OpenCL (it is only a Recommends of libdnnl-dev, which --no-install-recommends skips).
# libhdf5-dev: the HDF5Data and HDF5Output layers; libleveldb-dev: LevelDB data sources.
apt_packages=(
  build-essential cmake pkg-config ccache
  libzmq3-dev cppzmq-dev libsodium-dev
  libprotobuf-dev protobuf-compiler
  liblmdb-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev libhdf5-dev libleveldb-dev
  libboost-program-options-dev
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev
  dataset-fashion-mnist
  python3 python3-pip python3-dev
)
# What the tests and benchmarks add. graphviz (with pydot, scikit-image and h5py from
# PyPI): what pstrain.caffe's draw, io and save_hdf5 use, as pycaffe's do.
# chromium: the headless browser check of TensorBoard
# (tests/e2e/test_tensorboard_browser.py). The multi-host tests (tests/multihost, root
# only) make hosts of network namespaces with real sshd, and a one-node Slurm cluster.
apt_test_packages=(libgtest-dev libgmock-dev libbenchmark-dev chromium graphviz
  iproute2 openssh-client openssh-server munge slurmctld slurmd slurm-client)
# What the peer benchmarks add (bench/torch_peer.py; never CI's `test`): PyTorch,
# importable from Debian's /usr/bin/python3 (numpy comes with it); linux-perf for
# `bench/scaling_cpu.py --sched` (perf sched record).
apt_bench_packages=(python3-torch python3-numpy linux-perf)
# What the fuzz targets add (scripts/fuzz.sh): clang with libFuzzer and the
# sanitizer runtimes, and clang's OpenMP runtime.
apt_fuzz_packages=(clang libclang-rt-14-dev libomp-dev)

# Python modules: import name and PyPI requirement, for ps-train, then for the tests.
# numpy, nanobind and scikit-build-core: the engine's Python module (pstrain._core,
# pstrain.caffe) and the package's build backend.
pip_modules=("yaml pyyaml" "tqdm tqdm" "matplotlib matplotlib" "google.protobuf protobuf"
  "numpy numpy" "nanobind nanobind>=2.0" "scikit_build_core scikit-build-core>=0.10")
pip_test_modules=("pytest pytest" "cv2 opencv-python-headless<5" "zmq pyzmq"
  "tensorboard tensorboard" "hypothesis hypothesis"
  "skimage scikit-image" "pydot pydot" "h5py h5py")

phase_times=()
phase() {  # phase NAME COMMAND...: runs COMMAND and records how long it took
  local name="$1" t0=$SECONDS
  shift
  "$@"
  phase_times+=("$name $((SECONDS - t0)) s")
}

install_apt() {
  local missing=()
  for p in "$@"; do
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
  local missing=() entry module requirement
  for entry in "$@"; do
    module="${entry%% *}"
    requirement="${entry#* }"
    python3 -c "import $module" 2>/dev/null || missing+=("$requirement")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing Python packages: ${missing[*]}"
  # Debian's own python3 refuses pip outside a virtual environment (PEP 668) unless told.
  python3 -m pip install -q "${missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${missing[@]}"
}

# The pstrain Python package (ps-train, pstrain.caffe), editable, so the checkout is
# what runs. PSTRAIN_PIP_NO_CMAKE=1 (pyproject.toml): pip compiles nothing; the
# engine module pstrain._core is the one build() put in $build_dir/python.
install_package() {
  local here="$root/python/pstrain/__init__.py"
  local installed
  installed="$(cd / && python3 -c 'import pstrain; print(pstrain.__file__)' 2>/dev/null || true)"
  [ "$installed" = "$here" ] && return 0
  echo "setup: installing the pstrain package (pip install -e .)"
  local pip=(env PSTRAIN_PIP_NO_CMAKE=1 python3 -m pip install -q --no-build-isolation -e .)
  "${pip[@]}" 2>/dev/null || "${pip[@]}" --break-system-packages
}

# ps-net and ps-data next to ps-train (where pip put it: Python's scripts folder), as
# links to this build's programs, so the README's first command leaves all three on
# PATH. An existing file that is not such a link is left alone.
link_programs() {
  local scripts p bin
  case "$build_dir" in /*) bin="$build_dir/bin" ;; *) bin="$root/$build_dir/bin" ;; esac
  scripts="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  [ -d "$scripts" ] && [ -w "$scripts" ] || return 0
  for p in ps-net ps-data; do
    if [ -e "$scripts/$p" ] && [ ! -L "$scripts/$p" ]; then
      echo "setup: $scripts/$p exists and is not ours; leaving it"
      continue
    fi
    ln -sfn "$bin/$p" "$scripts/$p"
  done
  # pyenv puts its shims on PATH, not the scripts folder: make shims for the links.
  if command -v pyenv > /dev/null; then pyenv rehash 2> /dev/null || true; fi
}

ps_train() {
  if command -v ps-train >/dev/null; then
    PSTRAIN_BUILD_DIR="$build_dir" ps-train "$@"
  else
    PSTRAIN_BUILD_DIR="$build_dir" python3 -m pstrain "$@"
  fi
}

build() {  # build TESTS(ON|OFF) [TARGET...]
  local tests="$1"
  shift
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
    -DPSTRAIN_WITH_CUDA="${PSTRAIN_WITH_CUDA:-AUTO}" \
    -DPython_EXECUTABLE="$(command -v python3)" \
    -DPSTRAIN_BUILD_TESTS="$tests" -DPSTRAIN_BUILD_BENCH="$tests" >/dev/null
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
}

report_phases() {
  local line="" entry
  for entry in "${phase_times[@]}"; do line+="${line:+, }$entry"; done
  echo "setup: time per phase: $line"
}

programs=(ps-server ps-worker ps-net ps-data _core)
case "$action" in
  build)
    phase apt install_apt "${apt_packages[@]}"
    phase pip install_pip "${pip_modules[@]}"
    phase build build OFF "${programs[@]}"
    report_phases
    ;;
  run)
    phase apt install_apt "${apt_packages[@]}"
    phase pip install_pip "${pip_modules[@]}"
    phase build build OFF "${programs[@]}"
    phase package install_package
    link_programs
    phase data bash scripts/prepare_data.sh "$build_dir"
    overrides=()
    if [[ -n "${PSTRAIN_RUN_ITERATIONS:-}" ]]; then
      overrides=(--set "solver_overrides.max_iter=$PSTRAIN_RUN_ITERATIONS")
      # The job tests every 500 iterations; test at the last one too.
      if ((PSTRAIN_RUN_ITERATIONS % 500 != 0)); then
        overrides+=(--set "solver_overrides.test_interval=$PSTRAIN_RUN_ITERATIONS")
      fi
    fi
    phase job ps_train configs/fmnist_lenet.yaml "${overrides[@]}"
    report_phases
    ;;
  bench)
    phase apt install_apt "${apt_packages[@]}" "${apt_bench_packages[@]}"
    phase pip install_pip "${pip_modules[@]}"
    phase build build OFF "${programs[@]}"
    phase package install_package
    link_programs
    phase data bash scripts/prepare_data.sh "$build_dir"
    phase bench python3 bench/torch_peer.py --build "$build_dir" "${@:2}"
    report_phases
    ;;
  fuzz)
    phase apt install_apt "${apt_packages[@]}" "${apt_fuzz_packages[@]}"
    phase fuzz bash scripts/fuzz.sh "${@:2}"
    report_phases
    ;;
  test)
    phase apt install_apt "${apt_packages[@]}" "${apt_test_packages[@]}"
    phase pip install_pip "${pip_modules[@]}" "${pip_test_modules[@]}"
    phase build build ON
    phase package install_package
    link_programs
    phase data bash scripts/prepare_data.sh "$build_dir"
    status=0
    t0=$SECONDS
    (cd "$build_dir" && ctest --output-on-failure -j "$jobs") || status=1
    phase_times+=("ctest $((SECONDS - t0)) s")
    t0=$SECONDS
    # -rs: every skipped test is listed with its reason.
    PSTRAIN_BUILD_DIR="$build_dir" python3 -m pytest -q -rs --durations=15 tests || status=1
    phase_times+=("pytest $((SECONDS - t0)) s")
    report_phases
    exit $status
    ;;
esac
