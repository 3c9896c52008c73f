#!/bin/bash
# PID 1 of the kernel bed's guest (after the initramfs, Tests/Support/kernel/initramfs-init): a real
# Linux kernel Bluetooth stack whose controllers are RootCanal's, reached over the guest's serial
# lines. Attaches the lines the bed names (btattach, H4) as hci0, hci1, ... in that order, records
# every adapter's traffic with btmon, runs the scenario, and powers the guest off.
# Everything it and the scenario write goes to /kbed-results (the host's results folder).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
results=/kbed-results
exec >>"$results/guest.log" 2>&1
# shellcheck source=/dev/null
source "$results/bed.env"

seconds() { awk '{print $1}' /proc/uptime; }
finish() {
    echo "$1" >"$results/exit-status"
    echo "kernel-bed: guest done at $(seconds) s (status $1)"
    # btmon writes the rest of its trace when it ends: until it has (5 s at most).
    if [ -n "${btmon_pid:-}" ] && kill "$btmon_pid" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$btmon_pid" 2>/dev/null || break; sleep 0.1; done
    fi
    sync
    echo o >/proc/sysrq-trigger
    sleep 30
}

# Under systemd (guest-systemd-init.sh) this runs as kbed.service, and systemd has mounted these.
if [ "${KBED_INIT:-}" != systemd ]; then
    # A checkout under /tmp (a fresh clone there) would vanish under the guest's own /tmp, and with
    # it the scenarios' helpers and the built binaries: keep the host's /tmp aside and bind the
    # checkout back at its own path.
    case "$KBED_REPO" in
        /tmp/*) mkdir -p /kbed-host-tmp && mount --bind /tmp /kbed-host-tmp ;;
    esac
    mount -t tmpfs -o mode=1777 tmpfs /tmp
    case "$KBED_REPO" in
        /tmp/*) mkdir -p "$KBED_REPO" && mount --bind "/kbed-host-tmp${KBED_REPO#/tmp}" "$KBED_REPO" ;;
    esac
    mount -t tmpfs -o mode=755 tmpfs /run
    mkdir -p /run/dbus /var/run /dev/pts
    mount -t devpts devpts /dev/pts
fi
hostname kernel-bed
echo "kernel-bed: guest init at $(seconds) s, kernel $(uname -r)"

modprobe hci_uart || { echo "kernel-bed: modprobe hci_uart failed"; finish 91; }
btmon -w "$results/btmon.btsnoop" >/dev/null 2>&1 &
btmon_pid=$!

index=0
for line in ${KBED_ATTACH:-}; do
    btattach -B "/dev/ttyS$line" -P h4 -S 115200 >"$results/btattach-ttyS$line.log" 2>&1 &
    echo "$!" >"/run/btattach-ttyS$line.pid"
    # Attached one at a time, so that ttyS<first> is hci0, the next hci1, and so on.
    for _ in $(seq 200); do
        hciconfig "hci$index" 2>/dev/null | grep -q "BD Address" && ! hciconfig "hci$index" | grep -q INIT && break
        sleep 0.1
    done
    hciconfig "hci$index" >/dev/null 2>&1 || { echo "kernel-bed: ttyS$line did not become hci$index"; finish 92; }
    index=$((index + 1))
done
hciconfig -a >"$results/adapters.txt" 2>&1
echo "kernel-bed: $index adapter(s) up at $(seconds) s"

cd /tmp
bash "$KBED_SCENARIO" >"$results/scenario.log" 2>&1
finish $?
