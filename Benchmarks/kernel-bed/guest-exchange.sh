#!/bin/bash
# Guest side of Benchmarks/kernel-bed/exchange.py: ROUNDS times, a fresh `tracer run --transport
# hci0` (new database: a new id and address, as if a new person walked in) until its database holds
# its first encounter with the host's node, then SIGTERM and a pause of the exchange's crowd memory
# (10 s). Each round's JSON log is round-N.log, the moment of the first encounter round-N.first,
# its CPU time and peak RSS round-N.usage.
set -u
results=$KBED_RESULTS
bench=$KBED_REPO/Benchmarks/kernel-bed
btmgmt --index 0 power off >/dev/null 2>&1
for round in $(seq "$KBED_ROUNDS"); do
    python3 "$bench/first_encounter.py" "/tmp/round-$round.db" 30 >"$results/round-$round.first" &
    poller=$!
    sleep 1  # Python's start-up, under TCG
    "$KBED_TRACER" run --db "/tmp/round-$round.db" --transport hci0 --continuous-scan --log-level debug --log-format json \
        2>"$results/round-$round.log" &
    node=$!
    wait "$poller"
    # utime + stime (clock ticks) and the peak resident set, read before the node stops.
    ticks=$(awk '{ print $14 + $15 }' "/proc/$node/stat")
    echo "ticks=$ticks hz=$(getconf CLK_TCK) peak_kb=$(awk '/VmHWM/ { print $2 }' "/proc/$node/status")" >"$results/round-$round.usage"
    kill -TERM "$node"; wait "$node"
    sleep 10
done
