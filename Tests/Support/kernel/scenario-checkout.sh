#!/bin/bash
# The checkout suite's guest scenario (Tests/KernelBedCheckoutTests): the bed run from a checkout
# under /tmp, which the guest's own /tmp must not hide. Sources the scenarios' helpers from the
# checkout, runs the checkout's `tracer` on hci0 for a few seconds, and keeps its database.
set -u
results=$KBED_RESULTS
tracer=$KBED_TRACER

echo "checkout: $KBED_REPO"
source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh" || exit 10
"$tracer" version >"$results/version.txt" 2>&1 || exit 11
say "node on hci0"
start_node node node hci0
sleep "${KBED_NODE_SECONDS:-8}"
stop_node node "$node"
keep_database node
say "done"
