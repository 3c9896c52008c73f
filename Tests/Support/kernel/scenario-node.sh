#!/bin/bash
# The kernel suite's guest scenario (Tests/KernelBedTests): runs in the kernel bed's guest with
# ttyS1 attached as hci0 (the node under test), ttyS2 as hci1 (BlueZ) and ttyS3 left a plain tty
# (the serial transport), all on the RootCanal phy where the host's nodes run. Each phase leaves
# its evidence in $KBED_RESULTS for the tests to judge; the scenario itself judges nothing, except
# that it says which step it is at (scenario.log) so that a failure can be read.
#   1. `tracer run --transport hci0` and `--transport serial:/dev/ttyS3` beside the host's nodes, until
#      each has met KBED_PEERS peers (or KBED_PHASE_SECONDS pass).
#   2. kill -9 of the hci0 node and a restart on the same database: it must take the channel again.
#   3. bluetoothd on hci1 (the node keeps hci0): gatttool as central reads the node's id at its
#      current random address and writes KBED_WRITTEN_ID, which the node logs.
#   4. SIGTERM of the hci0 node: bluetoothd takes hci0 back; a node started then meets EBUSY, and
#      what it and `tracer doctor` say is kept.
#   5. With bluetoothd still holding hci0 powered, `tracer run --take-adapter` powers it off and
#      exchanges with the host's nodes; after kill -9, bluetoothd powers hci0 again at once, and the
#      restarted node (--take-adapter) takes it again and exchanges again.
set -u
results=$KBED_RESULTS
tracer=$KBED_TRACER
phase_seconds=${KBED_PHASE_SECONDS:-60}
wanted_peers=${KBED_PEERS:-2}
service=a09a0000-5aaa-47f2-9c7f-93bdb3a65376
id_characteristic=a09a0001-5aaa-47f2-9c7f-93bdb3a65376
write_characteristic=a09a0002-5aaa-47f2-9c7f-93bdb3a65376

source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh"

say "phase 1: the nodes on hci0 and on serial:/dev/ttyS3 beside the host's nodes"
btmgmt --index 0 power off >/dev/null 2>&1
start_node hci0-node hci0-node hci0
hci0_node=$node
start_node serial-node serial-node serial:/dev/ttyS3
serial_node=$node
deadline=$(( $(date +%s) + phase_seconds ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    hci0_peers=$(peers /tmp/hci0-node.db) serial_peers=$(peers /tmp/serial-node.db)
    [ "$hci0_peers" -ge "$wanted_peers" ] && [ "$serial_peers" -ge "$wanted_peers" ] && break
    sleep 2
done
say "phase 1: hci0 node met $(peers /tmp/hci0-node.db) peer ids, serial node $(peers /tmp/serial-node.db)"
echo "$(( $(date +%s) - deadline + phase_seconds ))" >"$results/phase1-seconds"
# A few more seconds, so that the host's nodes log what they learned by being written to.
sleep 5
# The address test needs a rotation at a 15 s boundary: a quick phase 1 may end before the first.
for _ in $(seq 20); do [ "$(grep -c 'rotated id' "$results/hci0-node.log")" -ge 2 ] && break; sleep 1; done
stop_node serial-node "$serial_node"
keep_database serial-node

say "phase 2: kill -9 of the hci0 node, and a restart"
kill -KILL "$hci0_node"; wait "$hci0_node" 2>/dev/null
before=$(peers /tmp/hci0-node.db)
restart_time=$(date +%s)
echo "$restart_time" >"$results/restart-time"
start_node hci0-restarted hci0-node hci0
hci0_node=$node
# The restart must take the channel (no EBUSY) and exchange again: a sighting after the restart's
# second, which only the restarted node can have logged, and only after reading or being written
# a host node's id again (it starts knowing no address), whether a new id or one met before the kill.
wait_for_sighting_after hci0-node "$phase_seconds" "$restart_time"
say "phase 2: the restarted node has met $(peers /tmp/hci0-node.db) peer ids (before the kill: $before), latest sighting $(latest_sighting /tmp/hci0-node.db) (restart $restart_time)"

say "phase 3: bluetoothd on hci1, gatttool as central"
dbus-daemon --system --fork --nopidfile
/usr/sbin/bluetoothd -n >"$results/bluetoothd.log" 2>&1 &
bluetoothd_pid=$!
for _ in $(seq 50); do btmgmt --index 1 info 2>/dev/null | grep -q "current settings:.*powered" && break; sleep 0.2; done
btmgmt --index 1 info >"$results/hci1-info.txt" 2>&1
# The node's current advertising address, from the btmon trace of hci0 (the last one it set).
node_address() { python3 "$KBED_REPO/Tests/Support/kernel/btsnoop_addresses.py" "$results/btmon.btsnoop" 0 | tail -1 | cut -d' ' -f2; }
read_ok=0 write_ok=0
for attempt in 1 2 3 4; do
    address=$(node_address)
    say "attempt $attempt: the node advertises as $address"
    echo "$address" >"$results/node-address"
    if [ "$read_ok" = 0 ] && timeout 10 gatttool -i hci1 -t random -b "$address" --char-read --uuid="$id_characteristic" \
        >"$results/gatttool-read.txt" 2>&1 && grep -q "value:" "$results/gatttool-read.txt"; then
        read_ok=1
    fi
    if [ "$read_ok" = 1 ]; then
        timeout 10 gatttool -i hci1 -t random -b "$address" --characteristics >"$results/gatttool-characteristics.txt" 2>&1
        handle=$(grep -i "uuid = $write_characteristic" "$results/gatttool-characteristics.txt" | grep -o 'char value handle = 0x[0-9a-f]*' | grep -o '0x[0-9a-f]*$')
        if [ -n "$handle" ] && timeout 10 gatttool -i hci1 -t random -b "$address" --char-write-req -a "$handle" -n "$KBED_WRITTEN_ID" \
            >"$results/gatttool-write.txt" 2>&1 && grep -q "successfully" "$results/gatttool-write.txt"; then
            write_ok=1
            break
        fi
    fi
    sleep 1
done
timeout 10 gatttool -i hci1 -t random -b "$address" --primary >"$results/gatttool-primary.txt" 2>&1
say "phase 3: read $read_ok, write $write_ok"
sleep 2

say "phase 4: SIGTERM of the hci0 node; bluetoothd takes hci0 back"
stop_node hci0-restarted "$hci0_node"
keep_database hci0-node
for _ in $(seq 50); do btmgmt --index 0 info 2>/dev/null | grep -q "current settings:.*powered" && break; sleep 0.2; done
btmgmt --index 0 info >"$results/hci0-info-after-sigterm.txt" 2>&1
start_node hci0-busy hci0-busy hci0
busy_node=$node
# Until it has refused (the whole line, which ends with its retry), for 30 s at most.
wait_for_log_line hci0-busy 30 'EBUSY.*reconnecting'
kill -KILL "$busy_node"; wait "$busy_node" 2>/dev/null
"$tracer" doctor --db /tmp/hci0-busy.db --transport hci0 >"$results/doctor-busy.txt" 2>&1
echo "$?" >"$results/doctor-busy.exit"

# Waits (up to $2 seconds) until hci0 reports powered, and keeps what btmgmt says in $results/$1.
hci0_powered() {
    for _ in $(seq $(( $2 * 5 ))); do btmgmt --index 0 info 2>/dev/null | grep -q "current settings:.*powered" && break; sleep 0.2; done
    btmgmt --index 0 info >"$results/$1" 2>&1
}
# The waits end as soon as they are met; their bounds are for a slow, shared CI machine.
take_seconds=${KBED_TAKE_SECONDS:-$phase_seconds}
say "phase 5: --take-adapter while bluetoothd holds hci0 powered"
hci0_powered hci0-info-before-take.txt 30
date +%s >"$results/take-time"
start_node hci0-take hci0-take hci0 --take-adapter
take_node=$node
wait_for_peers hci0-take "$take_seconds" 0
say "phase 5: the taking node met $(peers /tmp/hci0-take.db) peer ids; kill -9"
kill -KILL "$take_node"; wait "$take_node" 2>/dev/null
before=$(peers /tmp/hci0-take.db)
hci0_powered hci0-info-after-take-kill.txt 30
restart_time=$(date +%s)
echo "$restart_time" >"$results/take-restart-time"
start_node hci0-take-restarted hci0-take hci0 --take-adapter
take_node=$node
# As in phase 2: a sighting that only the restarted node can have logged.
wait_for_sighting_after hci0-take "$take_seconds" "$restart_time"
say "phase 5: the restarted taking node has met $(peers /tmp/hci0-take.db) peer ids (before the kill: $before), latest sighting $(latest_sighting /tmp/hci0-take.db) (restart $restart_time)"
stop_node hci0-take-restarted "$take_node"
keep_database hci0-take
kill "$bluetoothd_pid"
say "done"
