#!/bin/bash
# The checkout suite's guest scenario (Tests/KernelBedCheckoutTests): the bed run from a checkout
# under /tmp, which the guest's own /tmp must not hide. Sources the scenarios' helpers from the
# checkout, runs the checkout's `tracer` on hci0 until it has taken its id there, and keeps its database.
set -u
results=$KBED_RESULTS
tracer=$KBED_TRACER

echo "checkout: $KBED_REPO"
source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh" || exit 10
"$tracer" version >"$results/version.txt" 2>&1 || exit 11
say "node on hci0"
start_node node node hci0
# Until the node runs on hci0 with its id (its exchange set the id's address on the controller:
# the adapter is up and takes commands; advertising starts just after), for KBED_NODE_SECONDS at most.
wait_for_log_line node "${KBED_NODE_SECONDS:-30}" '\[GATTExchange\] rotated'
stop_node node "$node"
keep_database node
say "done"
