#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan + UBSan, -DPSTRAIN_FUZZ=ON,
# in build-fuzz/) and runs each for a bounded time from its committed seed
# corpus. Any crash, leak, sanitizer report or broken property fails the run;
# the input that did it is left in build-fuzz/fuzz-out/<target>/ (crash-*,
# leak-*, oom-*, timeout-*): fix the code, then keep the input under
# fuzz/regressions/<target>/ so ctest's fuzz.replay.<target> replays it.
#
#   bash scripts/fuzz.sh                  every target for 60 s
#   bash scripts/fuzz.sh -t 600 message   one target for 10 minutes
#   bash scripts/fuzz.sh --build-only
#
# Options: -t|--seconds N (per target, default $PSTRAIN_FUZZ_SECONDS or 60),
# -j|--parallel N (targets run side by side, default 1), --build-only.
# Targets: message net_prototxt datum caffemodel solverstate (default: all).
# Dependencies (clang, libFuzzer, the OpenMP runtime for clang): the
# apt_fuzz_packages of scripts/setup.sh; `bash scripts/setup.sh fuzz` installs
# them and then runs this script. Environment: PSTRAIN_FUZZ_BUILD_DIR (default
# build-fuzz), PSTRAIN_JOBS (compile jobs, default all cores).
# At the end it prints one line per target: executions, coverage (libFuzzer's
# cov: edges and ft: features), corpus size and the verdict.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
all_targets=(message net_prototxt datum caffemodel solverstate)
seconds="${PSTRAIN_FUZZ_SECONDS:-60}"
parallel=1
build_only=0
targets=()
while (($#)); do
  case "$1" in
    -t|--seconds) seconds="$2"; shift 2 ;;
    -j|--parallel) parallel="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *)
      if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
        echo "fuzz: unknown target or option '$1' (targets: ${all_targets[*]})" >&2
        exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")
if [[ ! "$seconds" =~ ^[1-9][0-9]*$ || ! "$parallel" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: --seconds and --parallel take positive whole numbers" >&2
  exit 2
fi
for tool in clang clang++; do
  command -v "$tool" >/dev/null || {
    echo "fuzz: $tool not found; install scripts/setup.sh's apt_fuzz_packages (bash scripts/setup.sh fuzz)" >&2
    exit 2
  }
done

build_dir="${PSTRAIN_FUZZ_BUILD_DIR:-build-fuzz}"
# ccache may reuse objects compiled in another checkout (paths are rewritten
# relative to the tree; the line tables then name that checkout's files).
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
t0=$SECONDS
# -O1 and line tables: sanitizer reports with file:line, fast enough to fuzz.
# The sanitizers' checks keep some `omp simd` loops of the CPU kernels scalar
# (vectorised in every other build); -Wno-pass-failed spares a warning for each.
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -Wno-pass-failed" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  -DPSTRAIN_WITH_CUDA=OFF -DPSTRAIN_FUZZ=ON -DPSTRAIN_BUILD_TESTS=OFF \
  -DPSTRAIN_BUILD_BENCH=OFF >/dev/null
build_targets=()
for t in "${targets[@]}"; do build_targets+=(--target "fuzz_$t"); done
cmake --build "$build_dir" -j "${PSTRAIN_JOBS:-$(nproc)}" "${build_targets[@]}"
echo "fuzz: build took $((SECONDS - t0)) s"
((build_only)) && exit 0

out="$root/$build_dir/fuzz-out"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

run_one() {  # run_one TARGET: fuzz it for $seconds from a working copy of its seeds
  local t="$1" dir="$out/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -r fuzz/corpus/"$t"/. "$dir/corpus/" 2>/dev/null || true
  [[ -d fuzz/regressions/$t ]] && cp -r fuzz/regressions/"$t"/. "$dir/corpus/"
  if [[ $t == net_prototxt ]]; then cp configs/nets/*.prototxt "$dir/corpus/"; fi
  local extra=()
  [[ -f fuzz/dict/$t.dict ]] && extra+=("-dict=fuzz/dict/$t.dict")
  # The scratch files of the loader targets go to the target's own folder.
  TMPDIR="$dir" "$build_dir/bin/fuzz_$t" "$dir/corpus" "${extra[@]}" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1
}

summary() {  # summary TARGET STATUS: one line from libFuzzer's log
  local t="$1" status="$2" log="$out/$1/log" line
  line=$(grep -E '^#[0-9]+.*(DONE|cov:)' "$log" | tail -1 || true)
  local runs cov ft corp
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$line")
  corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9a-zA-Z]+).*/\1/p' <<<"$line")
  local verdict="clean"
  ((status == 0)) || verdict="FAILED (see $log and $out/$t/artifacts/)"
  printf 'fuzz: %-13s %ss  runs %s  cov %s  ft %s  corpus %s  %s\n' \
    "$t" "$seconds" "${runs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$verdict"
}

declare -A pids=()
failed=0
pending=("${targets[@]}")
declare -A statuses=()
while ((${#pending[@]})) || ((${#pids[@]})); do
  while ((${#pending[@]})) && ((${#pids[@]} < parallel)); do
    t="${pending[0]}"
    pending=("${pending[@]:1}")
    run_one "$t" &
    pids[$t]=$!
  done
  for t in "${!pids[@]}"; do
    if ! kill -0 "${pids[$t]}" 2>/dev/null; then
      s=0
      wait "${pids[$t]}" || s=$?
      statuses[$t]=$s
      ((s == 0)) || failed=1
      unset "pids[$t]"
    fi
  done
  sleep 1
done
for t in "${targets[@]}"; do
  summary "$t" "${statuses[$t]}"
  if ((statuses[$t] != 0)); then tail -40 "$out/$t/log" >&2; fi
done
echo "fuzz: total $((SECONDS - t0)) s"
exit $failed
