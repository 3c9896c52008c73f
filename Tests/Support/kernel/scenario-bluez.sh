#!/bin/bash
# The BlueZ suite's guest scenario (Tests/KernelBedBlueZTests): BlueZ as a foreign peer of a Tracer
# node, in both roles. ttyS1 is hci0 (the node, over the HCI user channel), ttyS2 is hci1, held by
# bluetoothd, which runs with debug logging to $KBED_RESULTS/bluetoothd.log. Each phase leaves its
# evidence in $KBED_RESULTS for the tests to judge; the scenario judges nothing, except that it
# says which step it is at (scenario.log) so that a failure can be read.
#   1. BlueZ as peripheral: bluez_tracer_peripheral.py registers the Tracer service and an
#      advertisement through bluetoothd's D-Bus API, serving the id KBED_BLUEZ_ID; the node finds
#      it, reads that id and writes its own, which the app records (bluez-written.txt).
#   2. BlueZ as central: bluetoothctl scans, connects to the node's current random address and
#      lets bluetoothd discover its GATT database (MTU exchange, every service and characteristic,
#      the GAP name and appearance); what bluetoothctl printed is kept (bluetoothctl.txt), and where
#      phase 2 starts in bluetoothd's log and in the btmon trace (central-start).
set -u
results=$KBED_RESULTS
tracer=$KBED_TRACER
phase_seconds=${KBED_PHASE_SECONDS:-30}

source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh"
# The node's current advertising address, from the btmon trace of hci0 (the last one it set).
node_address() { python3 "$KBED_REPO/Tests/Support/kernel/btsnoop_addresses.py" "$results/btmon.btsnoop" 0 | tail -1 | cut -d' ' -f2; }
# Waits (up to $2 seconds) until the command $1 succeeds.
wait_until() {
    local deadline=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        eval "$1" && return 0
        sleep 0.5
    done
    return 1
}

say "phase 1: the node on hci0, bluetoothd (debug) on hci1"
btmgmt --index 0 power off >/dev/null 2>&1
# The node takes hci0's user channel before bluetoothd starts, so bluetoothd manages hci1 alone.
# A daily id keeps the node's address steady while bluetoothctl uses it.
"$tracer" run --db /tmp/node.db --transport hci0 --continuous-scan --rotation-interval 86400 >"$results/node.log" 2>&1 &
node=$!
# Holding the user channel takes hci0 out of the management interface, where bluetoothd would find it.
wait_until '! btmgmt info 2>/dev/null | grep -q "^hci0:"' 15
btmgmt info >"$results/adapters-before-bluetoothd.txt" 2>&1
dbus-daemon --system --fork --nopidfile
/usr/sbin/bluetoothd -n -d >"$results/bluetoothd.log" 2>&1 &
bluetoothd=$!
wait_until 'btmgmt --index 1 info 2>/dev/null | grep -q "current settings:.*powered"' 10
btmgmt --index 1 info >"$results/hci1-info.txt" 2>&1

say "phase 1: BlueZ as peripheral offering the Tracer service (id $KBED_BLUEZ_ID)"
: >"$results/bluez-written.txt"
python3 "$KBED_REPO/Tests/Support/kernel/bluez_tracer_peripheral.py" --adapter hci1 --id "$KBED_BLUEZ_ID" \
    --record "$results/bluez-written.txt" >"$results/bluez-peripheral.log" 2>&1 &
peripheral=$!
wait_until '[ -s "$results/bluez-written.txt" ] && [ "$(peers /tmp/node.db)" -ge 1 ]' "$phase_seconds"
say "phase 1: the app recorded $(wc -l <"$results/bluez-written.txt") write(s); the node met $(peers /tmp/node.db) peer id(s)"
kill -TERM "$peripheral"; wait "$peripheral"
echo "$?" >"$results/bluez-peripheral.exit"

say "phase 2: BlueZ as central (bluetoothctl) connects to the node"
# Where phase 2 starts: in the guest's clock (the btmon trace's) and in bluetoothd's log, so that
# the tests judge what bluetoothd said as a central apart from phase 1, where the node itself ends
# its link once its exchange is done, whatever bluetoothd was still discovering.
echo "$(date +%s.%N) $(wc -l <"$results/bluetoothd.log")" >"$results/central-start"
# One bluetoothctl session per attempt, fed as a person would type: scan, connect by the node's
# address, and time for bluetoothd to discover the database and read the GAP name and appearance
# (the node closes an incoming link after 10 s). Its events (ServicesResolved, the services and
# characteristics found) go to bluetoothctl.txt.
for attempt in 1 2 3; do
    address=$(node_address)
    echo "$address" >"$results/node-address"
    say "attempt $attempt: the node advertises as $address"
    # Forgotten first (bluetoothd keeps what it learned in phase 1 at the same address), so that
    # this connection discovers the whole database again.
    {
        echo "remove $address"; sleep 0.5
        echo "scan le"; sleep 4
        echo "scan off"; echo "connect $address"; sleep 6
        echo "info $address"; sleep 1
        echo "disconnect $address"; sleep 1
        echo "quit"
    } | timeout 30 bluetoothctl >"$results/bluetoothctl-$attempt.txt" 2>&1
    cat "$results/bluetoothctl-$attempt.txt" >>"$results/bluetoothctl.txt"
    grep -q "ServicesResolved: yes" "$results/bluetoothctl-$attempt.txt" && break
done
say "phase 2: services resolved $(grep -c 'ServicesResolved: yes' "$results/bluetoothctl.txt") time(s)"

kill -TERM "$node"; wait "$node"; echo "$?" >"$results/node.exit"
rm -f "$results"/node.db*
for file in /tmp/node.db*; do [ -e "$file" ] && cp "$file" "$results/"; done
kill -TERM "$bluetoothd"; wait "$bluetoothd"
say "done"
