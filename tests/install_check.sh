#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and checks the result:
#   - P/bin/ps-net --version runs with LD_LIBRARY_PATH unset and loads P/lib's libraries;
#   - the programs' RUNPATH is $ORIGIN/../lib, naming no build-tree path;
#   - a consumer project (tests/install_consumer) configures with find_package(PSTrain),
#     builds against P and runs.
# Usage: install_check.sh <build dir> <source dir>. Each failed check prints FAIL and
# exits 1; the temporary prefix is removed either way.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pstrain-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

timeout 120 cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
  { cat "$tmp/install.log"; fail "cmake --install $build --prefix $prefix"; }
for program in ps-net ps-data ps-worker ps-server; do
  [[ -x $prefix/bin/$program ]] || fail "$prefix/bin/$program not installed"
done
for header in include/pstrain/common/status.hpp include/pstrain/proto/caffe.pb.h \
              lib/cmake/PSTrain/PSTrainConfig.cmake lib/cmake/PSTrain/PSTrainConfigVersion.cmake; do
  [[ -f $prefix/$header ]] || fail "$prefix/$header not installed"
done

version=$(env -u LD_LIBRARY_PATH timeout 30 "$prefix/bin/ps-net" --version) ||
  fail "$prefix/bin/ps-net --version did not run"
[[ $version == "ps-net "* ]] || fail "ps-net --version printed '$version'"
echo "installed: $version"
libs=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/ps-net")
grep -qE "libpstrain_common.so => $prefix/(bin/\.\./)?lib/" <<<"$libs" ||
  fail "ps-net does not load libpstrain_common from $prefix/lib:"$'\n'"$libs"

for program in "$prefix"/bin/*; do
  dynamic=$(readelf -d "$program")
  grep -q 'RUNPATH.*\[\$ORIGIN/\.\./lib\]' <<<"$dynamic" ||
    fail "$program: RUNPATH is not \$ORIGIN/../lib:"$'\n'"$(grep -i path <<<"$dynamic")"
  if grep -qF "$build" <<<"$dynamic"; then fail "$program names the build tree $build"; fi
done

consumer=$tmp/consumer-build
env -u LD_LIBRARY_PATH timeout 300 cmake -S "$source/tests/install_consumer" -B "$consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; fail "find_package(PSTrain) against $prefix"; }
timeout 300 cmake --build "$consumer" >>"$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; fail "building the consumer against $prefix"; }
env -u LD_LIBRARY_PATH timeout 30 "$consumer/consumer" || fail "the consumer did not run"
echo "PASS"
