#!/bin/bash
# PID 1 of the kernel bed's guest with `scripts/kernel-bed --init systemd`: prepares the overlay root
# for systemd, then hands over to it. systemd boots only kbed.target: the bed's own init
# (guest-init.sh, as the unit kbed.service) with journald, so that a scenario can use systemctl and
# journalctl on real units. Units that cannot work in this guest (no udev database, no network, no
# console login) or that wait for them are masked (symlinks to /dev/null in /etc, in the overlay's
# tmpfs upper layer, so the host is untouched): systemd-tmpfiles-setup.service hung the boot.
set -u
units=/etc/systemd/system
for unit in systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service systemd-tmpfiles-clean.timer \
    systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket systemd-udev-trigger.service \
    systemd-udev-settle.service getty.target serial-getty@ttyS0.service console-getty.service \
    networking.service systemd-networkd.service systemd-networkd-wait-online.service systemd-timesyncd.service \
    systemd-remount-fs.service systemd-random-seed.service systemd-firstboot.service systemd-binfmt.service \
    systemd-machine-id-commit.service systemd-update-utmp.service systemd-logind.service \
    dev-hugepages.mount dev-mqueue.mount sys-kernel-debug.mount sys-kernel-tracing.mount sys-fs-fuse-connections.mount \
    sys-kernel-config.mount systemd-modules-load.service systemd-sysctl.service systemd-sysusers.service \
    systemd-journal-flush.service systemd-hwdb-update.service systemd-journal-catalog-update.service \
    ldconfig.service apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer fstrim.timer \
    cron.service ssh.service nginx.service postgresql.service bluetooth.service dbus.service dbus.socket; do
    ln -sf /dev/null "$units/$unit"
done
cat >"$units/kbed.target" <<'UNIT'
[Unit]
Description=Kernel bed
Requires=kbed.service
After=kbed.service
UNIT
cat >"$units/kbed.service" <<UNIT
[Unit]
Description=Kernel bed scenario
DefaultDependencies=no
Wants=systemd-journald.socket systemd-journald.service
After=systemd-journald.socket systemd-journald.service
[Service]
Type=simple
Environment=KBED_INIT=systemd
ExecStart=/bin/bash ${0%/*}/guest-init.sh
StandardOutput=null
UNIT
exec /lib/systemd/systemd systemd.unit=kbed.target
