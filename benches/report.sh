#!/usr/bin/env bash
# One table of mco's performance figures (DESIGN.md section 8 and issue 13), each beside its
# floor measured in the same run on this machine, with the ratio and the target.
#
#   benches/report.sh                 # every bench, 5 s measurement per figure (about 25 min)
#   MEASURE=2 benches/report.sh fleet # one bench, shorter measurements
#
# Each bench prints its figures as `report: metric | mco | floor | ratio | target` lines
# (benches/common/report.rs); the raw criterion output is kept in target/bench-report.log.
set -euo pipefail
cd "$(dirname "$0")/.."
measure=${MEASURE:-5}
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(store etcd render drift history fleet daemon api)
log=target/bench-report.log
mkdir -p target
: >"$log"
for b in "${benches[@]}"; do
  echo "running cargo bench --bench $b (measurement ${measure}s)..." >&2
  one=target/bench-report-$b.log
  cargo bench --locked --bench "$b" -- --warm-up-time 1 --measurement-time "$measure" >"$one" 2>&1 || {
    cat "$one" >>"$log"
    echo "cargo bench --bench $b failed; see $log" >&2
    exit 1
  }
  cat "$one" >>"$log"
  # A bench that ran nothing (a filter that skipped it, a figure it could not take) fails
  # the report instead of leaving its rows out.
  if ! grep -q '^report: ' "$one"; then
    echo "cargo bench --bench $b printed no report: line; see $log" >&2
    exit 1
  fi
done
echo "| metric | mco | floor (same run) | ratio | target |"
echo "|---|---|---|---|---|"
grep '^report: ' "$log" | sed -e 's/^report: /| /' -e 's/$/ |/'
