#!/bin/bash
# The clock suite's guest scenario (Tests/TracerNodeTests/KernelBedClockTests.swift): two nodes in
# the guest, on hci0 and hci1, and the guest's clock stepped under them as NTP or `date -s` would.
# The guest's clock starts KBED_CLOCK_BEHIND seconds behind (a machine without a real-time clock
# booting with a stale time), then:
#   1. both nodes run until each has met the other;
#   2. the clock steps forward to the true time (NTP's first sync): how long until each node rotates
#      (on the guest's monotonic clock) goes to step-forward-NAME.ms; then until each meets
#      the other's new id;
#   3. the clock steps back KBED_CLOCK_BACK seconds, behind the start of the nodes' windows: how many
#      rotations follow within 5 s (step-back-NAME.rotations, must be 0), then the nodes keep
#      exchanging (b logs a sighting within 10 s);
#   4. a suspend of KBED_SUSPEND_SECONDS as the nodes live it (SIGSTOP, the wall clock stepped on,
#      SIGCONT 0.2 s later): how long after the resume each node rotates (resume-NAME.ms).
# Evidence in $KBED_RESULTS; the scenario judges nothing.
set -u
results=$KBED_RESULTS
tracer=$KBED_TRACER
behind=${KBED_CLOCK_BEHIND:-10800}
back=${KBED_CLOCK_BACK:-1200}
suspend_seconds=${KBED_SUSPEND_SECONDS:-3600}
interval=${KBED_ROTATION_INTERVAL:-30}
phase_seconds=${KBED_PHASE_SECONDS:-45}
source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh"

uptime_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
rotations() { grep -c "rotated id" "$results/$1.log" 2>/dev/null || echo 0; }
# Waits (up to $2 s of monotonic time) for node $1 to log more than $3 rotations; prints the
# milliseconds it took, or "none".
time_to_rotation() {
    local node=$1 limit_ms=$(( $2 * 1000 )) before=$3 started
    started=$(uptime_ms)
    while [ $(( $(uptime_ms) - started )) -lt "$limit_ms" ]; do
        if [ "$(rotations "$node")" -gt "$before" ]; then echo $(( $(uptime_ms) - started )); return; fi
        sleep 0.05
    done
    echo none
}
# Times both nodes' next rotation at once (after $2 and $3 rotations) into $results/PHASE-a.ms and -b.ms.
time_both_to_rotation() {
    local phase=$1 timing_a timing_b
    time_to_rotation a 10 "$2" >"$results/$phase-a.ms" & timing_a=$!
    time_to_rotation b 10 "$3" >"$results/$phase-b.ms" & timing_b=$!
    wait "$timing_a" "$timing_b"
}
run_node() {
    "$tracer" run --db "/tmp/$1.db" --transport "$2" --continuous-scan --rotation-interval "$interval" >>"$results/$1.log" 2>&1 &
}

true_time=$(date +%s)
date -s "@$(( true_time - behind ))" >/dev/null
say "clock set $behind s behind: $(date -u +%FT%TZ)"
btmgmt --index 0 power off >/dev/null 2>&1
btmgmt --index 1 power off >/dev/null 2>&1
run_node a hci0; node_a=$!
run_node b hci1; node_b=$!

say "phase 1: the nodes meet on the stale clock"
wait_for_peers a "$phase_seconds" 0
wait_for_peers b "$phase_seconds" 0
peers /tmp/a.db >"$results/phase1-a.peers"; peers /tmp/b.db >"$results/phase1-b.peers"
say "phase 1: a met $(cat "$results/phase1-a.peers"), b met $(cat "$results/phase1-b.peers")"

say "phase 2: the clock steps forward to the true time"
before_a=$(rotations a) before_b=$(rotations b)
# The true time now: the time at the start plus what passed on the guest's stale clock.
date -s "@$(( $(date +%s) + behind ))" >/dev/null
say "clock now $(date -u +%FT%TZ)"
time_both_to_rotation step-forward "$before_a" "$before_b"
say "phase 2: a rotated after $(cat "$results/step-forward-a.ms") ms, b after $(cat "$results/step-forward-b.ms") ms"
wait_for_peers a "$phase_seconds" "$(cat "$results/phase1-a.peers")"
wait_for_peers b "$phase_seconds" "$(cat "$results/phase1-b.peers")"
peers /tmp/a.db >"$results/phase2-a.peers"; peers /tmp/b.db >"$results/phase2-b.peers"
say "phase 2: a met $(cat "$results/phase2-a.peers"), b met $(cat "$results/phase2-b.peers")"

say "phase 3: the clock steps back $back s"
before_a=$(rotations a) before_b=$(rotations b)
date -s "@$(( $(date +%s) - back ))" >/dev/null
say "clock now $(date -u +%FT%TZ)"
sleep 5
echo $(( $(rotations a) - before_a )) >"$results/step-back-a.rotations"
echo $(( $(rotations b) - before_b )) >"$results/step-back-b.rotations"
# Sightings summed over a `tracer encounters --json` output on stdin.
sightings() { grep -o '"sightings" *: *[0-9]*' | grep -o '[0-9]*$' | awk '{ t += $1 } END { print t + 0 }'; }
sightings_before=$("$tracer" encounters --json --db /tmp/b.db 2>/dev/null | sightings)
echo "$sightings_before" >"$results/phase3-b-sightings-before"
# Until b logs a sighting after the step (it flushes them every second), for 10 s at most.
deadline=$(( $(date +%s) + 10 ))
while :; do
    sleep 1
    "$tracer" encounters --json --db /tmp/b.db >"$results/phase3-b-encounters.json" 2>&1
    [ "$(sightings <"$results/phase3-b-encounters.json")" -gt "$sightings_before" ] && break
    [ "$(date +%s)" -lt "$deadline" ] || break
done
say "phase 3: rotations after the step: a $(cat "$results/step-back-a.rotations"), b $(cat "$results/step-back-b.rotations")"

say "phase 4: the nodes suspended for an hour"
# Back to the true time first, then an hour's suspend as the nodes live it: frozen, their monotonic
# clock on by a moment only, the wall clock on by the hour. (The guest's own suspend-to-idle,
# `rtcwake -m freeze`, never woke under QEMU's emulation: the guest hung until the bed's timeout.)
date -s "@$(( $(date +%s) + back ))" >/dev/null
sleep 2
before_a=$(rotations a) before_b=$(rotations b)
kill -STOP "$node_a" "$node_b"
mono_before=$(uptime_ms)
date -s "@$(( $(date +%s) + suspend_seconds ))" >/dev/null
sleep 0.2
kill -CONT "$node_a" "$node_b"
echo "wall clock on by $suspend_seconds s, the nodes frozen for $(( $(uptime_ms) - mono_before )) ms" >"$results/suspend.txt"
time_both_to_rotation resume "$before_a" "$before_b"
say "phase 4: $(cat "$results/suspend.txt"); a rotated $(cat "$results/resume-a.ms") ms after the resume, b $(cat "$results/resume-b.ms") ms"

stop_node a "$node_a"
stop_node b "$node_b"
keep_database a
keep_database b
say "done"
