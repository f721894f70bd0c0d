#!/usr/bin/env bash
# The test suite on a busy machine: `npm test` while CPU-bound processes (two, or BURNERS; at this shell's
# priority, no nice) keep the cores busy. The burners start first and the run waits (up to a minute) for the
# 1-minute load average to reach the CPU count, as on a machine that was busy before the tests began. Arguments
# go to tap (`scripts/busy-test.sh test/e2e`). Ends with the test summary and the duration; exits as npm test
# did; the burners are killed however the script ends.
set -uo pipefail
cd "$(dirname "$0")/.."

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill -9 "$pid" 2>/dev/null; done
  burners=()
}
trap stop_burners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cpus=$(nproc)
for _ in $(seq "${BURNERS:-2}"); do
  node -e 'for (;;) {}' &
  burners+=("$!")
done
count=${#burners[@]}
echo "== $count CPU burners running (pids ${burners[*]}) on $cpus CPUs"
for _ in $(seq 60); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  awk -v load="$load" -v cpus="$cpus" 'BEGIN { exit !(load >= cpus) }' && break
  sleep 1
done
echo "== 1-minute load average $(cut -d' ' -f1 /proc/loadavg) at the start"

log=$(mktemp)
started=$(date +%s)
npm test -- "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
ended=$(date +%s)
stop_burners

summary=$(grep -aE '^# \{ total: [0-9]+' "$log" | tail -n 1)
passed=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary")
failed=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
echo "== busy run: npm test took $((ended - started)) s beside $count burners (exit $status); load average now $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$log"
echo "${summary:-no test summary found}"
echo "${passed:-0} passed, ${failed:-0} failed"
exit "$status"
