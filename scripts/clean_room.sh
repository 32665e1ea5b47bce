#!/usr/bin/env bash
# The README's first command on a fresh Debian 12, as a new user would run it.
#
#   sudo bash scripts/clean_room.sh
#
# Makes a minimal Debian 12 root with mmdebstrap (variant minbase: less than any
# real machine has, so every package the project needs must come from its own
# scripts), puts a clean clone of this checkout's HEAD in it at /root/pstrain, and
# there runs `bash scripts/setup.sh run` with PSTRAIN_RUN_ITERATIONS (default 300
# here) in a private mount and PID namespace. It passes when the run folder's
# summary.json says "ok" and the final test accuracy shows it learned. Whatever happens, it then ends every process it
# started, unmounts and deletes the root.
#
# Only the host's network settings go in, nothing the project needs: its DNS
# resolver, its apt options and certificate authorities (where a proxy inspects
# TLS) and pip's configuration.
#
# Environment:
#   PSTRAIN_RUN_ITERATIONS    iterations per worker of the default job (default 300)
#   PSTRAIN_CLEAN_ROOM_LOG    the full log of the run (default /tmp/pstrain-clean-room.log)
#   PSTRAIN_CLEAN_ROOM_MIRROR Debian mirror (default http://deb.debian.org)
#   PSTRAIN_CLEAN_ROOM_KEEP   1: keep the root for a look afterwards (its path is printed)
#   PSTRAIN_CLEAN_ROOM_MIN_ACCURACY  the final test accuracy it must reach (default 0.7)
# Needs root (mmdebstrap's root mode, chroot, mounts) and Debian's mmdebstrap,
# which it installs when missing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
iterations="${PSTRAIN_RUN_ITERATIONS:-300}"
log="${PSTRAIN_CLEAN_ROOM_LOG:-/tmp/pstrain-clean-room.log}"
mirror="${PSTRAIN_CLEAN_ROOM_MIRROR:-http://deb.debian.org}"
keep="${PSTRAIN_CLEAN_ROOM_KEEP:-0}"

say() { echo "clean-room: $*"; }
fail() { echo "clean-room: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "needs root (mmdebstrap, chroot and mounts); run it with sudo"
[[ "$iterations" =~ ^[1-9][0-9]*$ ]] || fail "PSTRAIN_RUN_ITERATIONS must be a positive whole number"

root_dir=""
cleanup() {
  local status=$?
  set +e  # clean up as far as possible, whatever fails on the way
  if [ -n "$root_dir" ] && [ -d "$root_dir" ]; then
    # The mounts live in a private namespace that is gone by now; this only catches
    # what an interrupted run could have left in ours.
    findmnt -rn -o TARGET | grep -F "$root_dir" | sort -r | while read -r m; do
      umount -l "$m"
    done
    if [ "$keep" = 1 ]; then
      say "root kept at $root_dir"
    elif ! rm -rf --one-file-system "$root_dir"; then
      echo "clean-room: could not remove $root_dir" >&2
      [ "$status" -eq 0 ] && status=1
    fi
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! command -v mmdebstrap >/dev/null; then
  say "installing mmdebstrap"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
fi

: >"$log"
t_start=$SECONDS
root_dir="$(mktemp -d /var/tmp/pstrain-clean-room.XXXXXX)"
say "making a minimal Debian 12 root in $root_dir (full log: $log)"
apt_opts=(--aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Retries "3"')
if ! mmdebstrap --variant=minbase --mode=root "${apt_opts[@]}" bookworm "$root_dir" \
     "deb $mirror/debian bookworm main" \
     "deb $mirror/debian bookworm-updates main" \
     "deb $mirror/debian-security bookworm-security main" >>"$log" 2>&1; then
  tail -n 40 "$log" >&2
  fail "mmdebstrap could not make the root"
fi
t_root=$((SECONDS - t_start))

# The host's network settings (see the header): resolver, hosts, CAs, pip config.
cp -L /etc/resolv.conf "$root_dir/etc/resolv.conf"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$root_dir/etc/hosts"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root_dir/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root_dir/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root_dir/etc/pip.conf"

say "cloning $(git -C "$repo" rev-parse --short HEAD) into /root/pstrain"
git clone -q --no-hardlinks "$repo" "$root_dir/root/pstrain"

# Inside: a private mount and PID namespace, so the mounts vanish and every
# process ends when the command does. A clean environment, as after a login.
inner='mount -t proc proc "$R/proc" && mount --rbind /dev "$R/dev" &&
  mount -t tmpfs tmpfs "$R/dev/shm" && mount -t sysfs sysfs "$R/sys" 2>/dev/null;
  exec chroot "$R" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PSTRAIN_RUN_ITERATIONS="$N" /bin/bash -c "cd /root/pstrain && bash scripts/setup.sh run"'
say "running 'bash scripts/setup.sh run' (PSTRAIN_RUN_ITERATIONS=$iterations) in the root"
t_run0=$SECONDS
set +e
R="$root_dir" N="$iterations" unshare --mount --propagation private --pid --fork \
  bash -c "$inner" 2>&1 | tee -a "$log" | grep --line-buffered -E '^(setup:|\[fmnist-lenet\]|ok|failed)'
run_status=${PIPESTATUS[0]}
set -e
t_run=$((SECONDS - t_run0))

if [ "$run_status" -ne 0 ]; then
  echo "clean-room: the last 60 lines of the log:" >&2
  tail -n 60 "$log" >&2
  fail "'bash scripts/setup.sh run' exited with status $run_status in the fresh root"
fi

summary="$root_dir/root/pstrain/runs/fmnist-lenet/summary.json"
[ -f "$summary" ] || fail "the run left no $summary"
# A short run must still learn: 300 iterations reach about 80%; chance is 10%.
if ! python3 - "$summary" "$iterations" "${PSTRAIN_CLEAN_ROOM_MIN_ACCURACY:-0.7}" <<'EOF'; then
import json, sys
summary = json.load(open(sys.argv[1]))
status = summary.get("status")
print(f"clean-room: summary.json: status {status}, iterations {summary.get('iterations')}, "
      f"test accuracy {summary.get('final_test_accuracy')}")
accuracy = summary.get("final_test_accuracy") or 0.0
if status != "ok":
    sys.exit(1)
if accuracy < float(sys.argv[3]):
    print(f"clean-room: the test accuracy {accuracy} is below {sys.argv[3]}: it did not learn")
    sys.exit(1)
EOF
  fail "summary.json does not show a finished job that learned: $(cat "$summary")"
fi
say "passed: root $t_root s, clone to trained model $t_run s, in all $((SECONDS - t_start)) s"
