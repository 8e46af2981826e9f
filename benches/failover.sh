#!/usr/bin/env bash
# Failover time of `mco up --ha` (issue 26): TRIALS times, SIGKILL the leader's process and
# read the Lease kube-system/mco-controllers until a takeover has renewed it; the figure is
# the Lease's renewTime (written by the new leader's first controller write) minus the time
# of the kill, so the polling's own delay is not counted. Prints each trial, then p50 and p99.
#
#   benches/failover.sh [TRIALS]            (default 20; builds the debug binary first)
#   MCO=target/release/mco benches/failover.sh 20
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-20}
if [ -z "${MCO:-}" ]; then
  cargo build --quiet
  MCO=${CARGO_TARGET_DIR:-target}/debug/mco
fi
D=$(mktemp -d)/data
"$MCO" up --ha --listen 127.0.0.1:0 --masters 0 --workers 1 --reboot-seconds 0 --data-dir "$D" > "$D.out" 2> "$D.err" &
UP=$!
trap 'kill -TERM $UP 2>/dev/null; wait $UP 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do grep -q "Stop with" "$D.out" 2>/dev/null && break; sleep 1; done
S=$(head -1 "$D.out" | sed 's/mco is up: servers //; s/ .*//')
export MCO_TOKEN_FILE=$D/admin.token MCO_CA_FILE=$D/pki/ca.crt
# The controllers' Lease as "HOLDER RENEW_EPOCH_SECONDS", asked again until a server answers.
lease() {
  local out=""
  while [ -z "$out" ]; do
    out=$("$MCO" --server "$S" get leases -o json 2>/dev/null | python3 -c '
import json, sys, datetime
d = json.load(sys.stdin)
s = [i for i in d["items"] if i["metadata"]["name"] == "mco-controllers"][0]["spec"]
t = datetime.datetime.fromisoformat(s["renewTime"].replace("Z", "+00:00")).timestamp()
print(s["holderIdentity"], t)' 2>/dev/null || true)
  done
  echo "$out"
}
TIMES=()
for t in $(seq 1 "$TRIALS"); do
  read -r holder renewed < <(lease)
  pid=$(cat "$D/servers/$holder/server.pid")
  killed=$(date +%s.%N)
  kill -9 "$pid"
  while :; do
    read -r now_holder now_renewed < <(lease)
    [ "$now_renewed" != "$renewed" ] && break
    sleep 0.1
  done
  took=$(python3 -c "print(f'{$now_renewed - $killed:.3f}')")
  TIMES+=("$took")
  echo "trial $t: killed $holder (pid $pid); $now_holder led after $took s"
  # The killed replica is started again (1 s) and waits as a standby before the next kill.
  sleep 2
done
printf '%s\n' "${TIMES[@]}" | python3 -c '
import sys, statistics
v = sorted(float(x) for x in sys.stdin)
p = lambda q: v[min(len(v) - 1, int(round(q * (len(v) - 1))))]
print(f"{len(v)} trials: p50 {statistics.median(v):.2f} s, p99 {p(0.99):.2f} s, min {v[0]:.2f} s, max {v[-1]:.2f} s")'
