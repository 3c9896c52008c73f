#!/bin/bash
# The adapters suite's guest scenario (Tests/KernelBedAdapters): ttyS1 attached as hci0, ttyS2 as
# hci1, and one line per further RootCanal model (KBED_MODELS, in order) as hci2, hci3, ..., all on
# the RootCanal phy where the host's nodes run. Each phase leaves its evidence in $KBED_RESULTS for
# the tests to judge; the scenario judges nothing, but says which step it is at (scenario.log).
#   1. Nodes on hci0 (DEFAULT) and on each model's adapter, beside the host's nodes, until each has
#      met KBED_PEERS peers (or KBED_PHASE_SECONDS pass); then the model nodes stop.
#   2. The adapter vanishing and returning: the btattach of hci0's line is killed (hci0 is
#      unregistered) while the node runs; `tracer status` is kept; btattach is started again and the
#      node must take hci0 again and exchange.
#   3. A dedicated adapter beside bluetoothd: bluetoothd holds hci0 powered, hci1 is powered off
#      with btmgmt and the node runs on it; hci0's power is sampled throughout, and `tracer doctor`
#      is run while the node holds hci1.
set -u
results=$KBED_RESULTS
tracer=$KBED_TRACER
phase_seconds=${KBED_PHASE_SECONDS:-45}
wanted_peers=${KBED_PEERS:-2}

source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh"
# hciN is registered and initialised.
adapter_ready() { hciconfig "$1" 2>/dev/null | grep -q "BD Address" && ! hciconfig "$1" | grep -q INIT; }
powered() { btmgmt --index "$1" info 2>/dev/null | grep -q "current settings:.*powered"; }

say "phase 1: nodes on hci0 and on every model's adapter"
read -r -a models <<<"${KBED_MODELS:-}"
model_nodes=()
# Without bluetoothd the kernel still powers a new adapter up for a moment: a user channel binds once it is off.
for index in $(seq 0 $(( ${#models[@]} + 1 ))); do btmgmt --index "$index" power off >/dev/null 2>&1; done
start_node hci0-node hci0-node hci0
hci0_node=$node
for position in "${!models[@]}"; do
    start_node "model-${models[$position]}" "model-${models[$position]}" "hci$((position + 2))"
    model_nodes+=("$node")
done
deadline=$(( $(date +%s) + phase_seconds ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    done_all=1
    for database in hci0-node "${models[@]/#/model-}"; do
        [ "$(peers "/tmp/$database.db")" -ge "$wanted_peers" ] || { done_all=0; break; }
    done
    [ "$done_all" = 1 ] && break
    sleep 2
done
for position in "${!models[@]}"; do
    say "phase 1: ${models[$position]} on hci$((position + 2)) met $(peers "/tmp/model-${models[$position]}.db") peer ids"
done
say "phase 1: hci0 node met $(peers /tmp/hci0-node.db) peer ids"
# A few more seconds, so that the host's nodes log what they learned by being written to.
sleep 3
for position in "${!models[@]}"; do
    stop_node "model-${models[$position]}" "${model_nodes[$position]}"
    keep_database "model-${models[$position]}"
done

say "phase 2: btattach of hci0's line (ttyS1) stopped while the node runs"
ended_before=$(grep -c "reconnecting" "$results/hci0-node.log")
line_pid=$(cat /run/btattach-ttyS1.pid)
kill -TERM "$line_pid"
wait "$line_pid" 2>/dev/null
for _ in $(seq 50); do hciconfig hci0 >/dev/null 2>&1 || break; sleep 0.1; done
hciconfig -a >"$results/adapters-gone.txt" 2>&1
date +%s >"$results/gone-time"
# Until the node has noticed and tried again at least twice (its retries back off from 1 s; each
# ends in a "reconnecting" line), for 20 s at most.
for _ in $(seq 100); do
    [ "$(grep -c "reconnecting" "$results/hci0-node.log")" -ge $(( ended_before + 3 )) ] && break
    sleep 0.2
done
say "phase 2: the node logged $(( $(grep -c "reconnecting" "$results/hci0-node.log") - ended_before )) reconnection(s) since hci0 went"
"$tracer" status --db /tmp/hci0-node.db >"$results/status-gone.txt" 2>&1
before=$(peers /tmp/hci0-node.db)
# A controller that returns after being unplugged was powered off: it starts reset and quiet.
# RootCanal's controller behind the line stayed on (the vanished host had it scanning and
# advertising), and a btattach started on that line may begin reading in the middle of a packet:
# the kernel then logs "hci0: Frame reassembly failed (-84)", its HCI Reset times out ("Opcode
# 0x0c03 failed: -110") and hci0 stays DOWN at 00:00:00:00:00:00 (in one of three runs without this). So
# the line is reset as a power cycle would: an HCI Reset, and its answer read away.
if [ "${KBED_LINE_RESET:-1}" = 1 ]; then
    stty -F /dev/ttyS1 115200 raw -echo
    exec 3<>/dev/ttyS1
    printf '\x01\x03\x0c\x00' >&3
    timeout 1 cat <&3 >"$results/line-drained.bin"
    exec 3<&-
fi
say "phase 2: btattach again"
btattach -B /dev/ttyS1 -P h4 -S 115200 >>"$results/btattach-ttyS1.log" 2>&1 &
for _ in $(seq 200); do adapter_ready hci0 && break; sleep 0.1; done
hciconfig -a >"$results/adapters-returned.txt" 2>&1
return_time=$(date +%s)
echo "$return_time" >"$results/return-time"
# A sighting after the return's second: the node's new controller session starts knowing no
# address, so only an exchange on the returned hci0 (a new id or one met before) logs one.
wait_for_sighting_after hci0-node "$phase_seconds" "$return_time"
say "phase 2: after the return the node has met $(peers /tmp/hci0-node.db) peer ids (before: $before), latest sighting $(latest_sighting /tmp/hci0-node.db) (return $return_time)"
"$tracer" status --db /tmp/hci0-node.db >"$results/status-returned.txt" 2>&1
stop_node hci0-node "$hci0_node"
keep_database hci0-node

say "phase 3: bluetoothd holds hci0; the node on hci1"
dbus-daemon --system --fork --nopidfile
/usr/sbin/bluetoothd -n >"$results/bluetoothd.log" 2>&1 &
bluetoothd_pid=$!
for _ in $(seq 50); do powered 0 && powered 1 && break; sleep 0.2; done
btmgmt --index 0 info >"$results/hci0-info-before.txt" 2>&1
btmgmt --index 1 power off >"$results/hci1-power-off.txt" 2>&1
date +%s >"$results/dedicated-time"
start_node hci1-node hci1-node hci1
hci1_node=$node
deadline=$(( $(date +%s) + phase_seconds ))
: >"$results/hci0-powered-samples.txt"
doctor_done=0
while [ "$(date +%s)" -lt "$deadline" ]; do
    powered 0 && echo "$(date +%s) powered" >>"$results/hci0-powered-samples.txt" || echo "$(date +%s) off" >>"$results/hci0-powered-samples.txt"
    if [ "$doctor_done" = 0 ] && grep -q '"state" *: *"running"' /tmp/hci1-node.db-status.json 2>/dev/null; then
        "$tracer" doctor --db /tmp/hci1-node.db --transport hci1 >"$results/doctor-dedicated.txt" 2>&1
        doctor_done=1
    fi
    [ "$(peers /tmp/hci1-node.db)" -ge "$wanted_peers" ] && [ "$doctor_done" = 1 ] && break
    sleep 2
done
say "phase 3: the node on hci1 met $(peers /tmp/hci1-node.db) peer ids"
sleep 3
btmgmt --index 0 info >"$results/hci0-info-after.txt" 2>&1
stop_node hci1-node "$hci1_node"
keep_database hci1-node
kill "$bluetoothd_pid"
say "done"
