#!/bin/bash
# The systemd suite's guest scenario (KernelBedPackageTests.swift, KernelBedSystemd), in a guest
# booted with `scripts/kernel-bed --init systemd`: installs the Debian package KBED_PACKAGE with
# `dpkg -i`, configures node.transport = "hci0" as a user does, `systemctl start tracer`, so the
# unit runs with all its sandboxing on the real kernel beside a host node, waits for an encounter,
# keeps `systemctl status` and the unit's journal, then `systemctl stop tracer`. Judges nothing.
# Between the encounter and the stop, the watchdog: the guest's controller stops answering (the bed's
# stall relay on ttyS1, scripts/kernel-bed --stall-line 1) until systemd restarts the unit, then
# answers again until the restarted node meets the host node. The unit's own watchdog is only made
# shorter (a drop-in, and node.watchdog_dark_limit), never added: a unit without one is not restarted.
# KBED_WATCHDOG=packaged keeps the packaged timings (WatchdogSec=, RestartSec=, the 180 s dark limit)
# and waits up to KBED_STALL_SECONDS (480 s then) for the restart: what BENCHMARKS.md measures.
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
watchdog=${KBED_WATCHDOG:-short}
# What a user does: names the adapter (and, here, scans continuously and, unless the packaged
# timings are measured, gives up on a dark controller after 10 s rather than 180, so that the run is short).
if [ "$watchdog" = packaged ]; then
    sed -i 's/^# transport = "hci0"$/transport = "hci0"\ncontinuous_scan = true/' /etc/tracer/tracer.toml
else
    sed -i 's/^# transport = "hci0"$/transport = "hci0"\ncontinuous_scan = true\nwatchdog_dark_limit = 10/' /etc/tracer/tracer.toml
fi
cp /etc/tracer/tracer.toml "$results/configured.toml"
# The unit's own watchdog as configured (systemctl show reports WatchdogUSec only once the unit runs).
{ systemctl show -p Type -p NotifyAccess -p WatchdogSignal tracer; systemctl cat tracer | grep '^WatchdogSec='; } >"$results/unit-watchdog.txt" 2>&1
if [ "$watchdog" != packaged ] && systemctl cat tracer | grep -q '^WatchdogSec=[1-9]'; then
    # The packaged period (a minute) and restart delay, shortened for the run.
    mkdir -p /etc/systemd/system/tracer.service.d
    printf '[Service]\nWatchdogSec=5\nRestartSec=1\n' >/etc/systemd/system/tracer.service.d/short-watchdog.conf
    systemctl daemon-reload
fi
btmgmt --index 0 power off >/dev/null 2>&1

say "systemctl start tracer"
systemctl start tracer >"$results/systemctl-start.txt" 2>&1
echo "$?" >"$results/systemctl-start.exit"
# The unit's main process, once it is the node (for 10 s at most; Type=notify has it by now).
for _ in $(seq 50); do
    main_pid=$(systemctl show -p MainPID --value tracer)
    [ "$main_pid" != 0 ] && [ "$(cat "/proc/$main_pid/comm" 2>/dev/null)" = tracer ] && break
    sleep 0.2
done
[ "$(cat "/proc/$main_pid/comm" 2>/dev/null)" = tracer ] || say "the unit's main process is not the node after 10 s (MainPID $main_pid)"
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
systemctl show -p NRestarts -p Result -p ActiveState -p SubState -p StatusText -p WatchdogUSec tracer >"$results/unit-before-stall.txt" 2>&1

# Times are the guest's wall clock, in seconds with fractions (the journal's short-unix format).
now() { date +%s.%N | cut -c1-14; }
# The latest first sighting in the node's database (0 while it has none).
latest_first_seen() {
    "$tracer" encounters --json --details --db "$database" 2>/dev/null | grep -o '"firstSeen" *: *[0-9]*' | grep -o '[0-9]*$' \
        | sort -n | tail -1 | awk '{ print $1 + 0 }'
}
say "the controller stops answering"
stalled_pid=$(systemctl show -p MainPID --value tracer)
now >"$results/stalled-at.txt"
touch "$results/controller-stalled"
[ "$watchdog" = packaged ] && stall_default=480 || stall_default=75
deadline=$(( $(date +%s) + ${KBED_STALL_SECONDS:-$stall_default} ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(systemctl show -p NRestarts --value tracer)" -ge 1 ] && break
    sleep 0.5
done
now >"$results/restart-seen-at.txt"
say "restarts: $(systemctl show -p NRestarts --value tracer); the controller answers again"
rm -f "$results/controller-stalled"
now >"$results/resumed-at.txt"
resumed=$(date +%s)
deadline=$(( resumed + ${KBED_MEET_AGAIN_SECONDS:-40} ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(latest_first_seen)" -ge "$resumed" ] && break
    sleep 1
done
now >"$results/met-again-seen-at.txt"
say "met again: latest first sighting $(latest_first_seen), resumed at $resumed"
echo "$stalled_pid" >"$results/stalled-pid.txt"
systemctl show -p NRestarts -p Result -p ActiveState -p SubState -p StatusText -p MainPID tracer >"$results/unit-before-stop.txt" 2>&1

say "systemctl stop tracer"
systemctl stop tracer >"$results/systemctl-stop.txt" 2>&1
echo "$?" >"$results/systemctl-stop.exit"
systemctl show -p Result -p ExecMainStatus -p ExecMainCode -p ActiveState tracer >"$results/unit-after-stop.txt" 2>&1
journalctl -u tracer --no-pager -o cat >"$results/tracer-journal.txt" 2>&1
journalctl -u tracer --no-pager -o short-unix >"$results/tracer-journal-times.txt" 2>&1
for file in "$database"*; do [ -e "$file" ] && cp "$file" "$results/"; done
say "done"
