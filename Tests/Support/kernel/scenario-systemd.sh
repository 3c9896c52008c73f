#!/bin/bash
# The systemd suite's guest scenario (KernelBedPackageTests.swift, KernelBedSystemd), in a guest
# booted with `scripts/kernel-bed --init systemd`: installs the Debian package KBED_PACKAGE with
# `dpkg -i`, configures node.transport = "hci0" as a user does, `systemctl start tracer`, so the
# unit runs with all its sandboxing on the real kernel beside a host node, waits for an encounter,
# keeps `systemctl status` and the unit's journal, then `systemctl stop tracer`. Judges nothing.
set -u
results=$KBED_RESULTS
package=$KBED_PACKAGE
tracer=/usr/bin/tracer
phase_seconds=${KBED_PHASE_SECONDS:-60}
source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh"

say "pid 1: $(cat /proc/1/comm), system $(systemctl is-system-running 2>&1)"
cat /proc/1/comm >"$results/pid1.txt"
dpkg -i "$package" >"$results/dpkg-install.txt" 2>&1
echo "$?" >"$results/dpkg-install.exit"
cp /lib/systemd/system/tracer.service "$results/installed-unit.service" 2>/dev/null
# What a user does: names the adapter (and, here, scans continuously so that the run is short).
sed -i 's/^# transport = "hci0"$/transport = "hci0"\ncontinuous_scan = true/' /etc/tracer/tracer.toml
cp /etc/tracer/tracer.toml "$results/configured.toml"
btmgmt --index 0 power off >/dev/null 2>&1

say "systemctl start tracer"
systemctl start tracer >"$results/systemctl-start.txt" 2>&1
echo "$?" >"$results/systemctl-start.exit"
sleep 2
main_pid=$(systemctl show -p MainPID --value tracer)
grep -E '^(Name|Uid|Gid|CapEff|CapPrm|CapAmb|CapBnd|NoNewPrivs|Seccomp):' "/proc/$main_pid/status" >"$results/unit-process.txt" 2>&1
database=/var/lib/tracer/tracer.db
deadline=$(( $(date +%s) + phase_seconds ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(peers "$database")" -ge 1 ] && break
    systemctl is-active -q tracer || break
    sleep 2
done
say "the unit's node met $(peers "$database") peer ids"
# A few more seconds, so that the host's node logs what it learned by being written to.
sleep 5
systemctl status --no-pager -l tracer >"$results/systemctl-status.txt" 2>&1
systemctl show -p NRestarts -p Result -p ActiveState tracer >"$results/unit-before-stop.txt" 2>&1

say "systemctl stop tracer"
systemctl stop tracer >"$results/systemctl-stop.txt" 2>&1
echo "$?" >"$results/systemctl-stop.exit"
systemctl show -p Result -p ExecMainStatus -p ExecMainCode -p ActiveState tracer >"$results/unit-after-stop.txt" 2>&1
journalctl -u tracer --no-pager -o cat >"$results/tracer-journal.txt" 2>&1
for file in "$database"*; do [ -e "$file" ] && cp "$file" "$results/"; done
say "done"
