#!/bin/bash
# The package suite's guest scenario (Tests/TracerNodeTests/KernelBedPackageTests.swift): installs
# the Debian package KBED_PACKAGE (scripts/package) in the kernel bed's guest, whose root is an
# overlay with a tmpfs upper layer (so dpkg can write), and runs the installed node as its systemd
# unit would, on hci0 (ttyS1) beside a host node. Leaves its evidence in $KBED_RESULTS; judges nothing.
#   1. `dpkg -i`: what it said, its files, conffiles, the user, the unit's enablement.
#   2. /usr/bin/tracer as the unit runs it, with the User=, capabilities and Environment= read from
#      the installed unit (/lib/systemd/system/tracer.service), through setpriv, configured like a
#      user does (node.transport in /etc/tracer/tracer.toml), until it has met a peer.
#      The guest's init is the bed's script, not systemd, so the unit's sandboxing (ProtectSystem=,
#      PrivateDevices=, ...) is not applied: only its user and capabilities.
#   3. The same without any capability: what the node says.
#   4. `dpkg -r`, then `dpkg --purge`: what is left each time, and every path the package's life
#      left in the overlay's upper layer (/kbed-upper/data) compared with before the install.
set -u
results=$KBED_RESULTS
package=$KBED_PACKAGE
unit=/lib/systemd/system/tracer.service
# The installed node, which the shared helpers (peers) run.
tracer=/usr/bin/tracer
phase_seconds=${KBED_PHASE_SECONDS:-60}

source "$KBED_REPO/Tests/Support/kernel/scenario-lib.sh"
# The overlay's upper layer (every path the guest wrote), without the folders the bed itself uses.
written_paths() {
    (cd /kbed-upper/data && find . -mindepth 1 \( -type f -o -type l \) | sed 's|^\.||' \
        | grep -Ev '^/(kbed-results|kbed-upper|tmp|run|dev|proc|sys)(/|$)' | sort)
}
# The value of the unit's KEY= line(s) (the last one wins for single-valued keys).
unit_value() { sed -n "s/^$1=//p" "$unit"; }

say "phase 1: dpkg -i $package"
[ -d /kbed-upper/data ] || say "no /kbed-upper: the leftover check cannot run"
written_paths >"$results/upper-before.txt"
cp /etc/passwd /tmp/passwd-before; cp /etc/group /tmp/group-before
dpkg -i "$package" >"$results/dpkg-install.txt" 2>&1
echo "$?" >"$results/dpkg-install.exit"
dpkg -L tracer >"$results/installed-files.txt" 2>&1
dpkg-query -W -f='${Conffiles}\n' tracer >"$results/conffiles.txt" 2>&1
getent passwd tracer >"$results/user.txt"
ls -l /etc/systemd/system/multi-user.target.wants/ >"$results/enabled.txt" 2>&1
cp "$unit" "$results/installed-unit.service" 2>/dev/null

say "phase 2: the installed node as the unit runs it"
user=$(unit_value User | tail -1)
# systemd's CAP_NET_ADMIN is setpriv's +net_admin.
capabilities=$(unit_value AmbientCapabilities | tr ' ' '\n' | grep . | tr 'A-Z' 'a-z' | sed 's/^cap_/+/' | paste -sd, -)
bounding=$(unit_value CapabilityBoundingSet | tr ' ' '\n' | grep . | tr 'A-Z' 'a-z' | sed 's/^cap_/+/' | paste -sd, -)
# A unit without AmbientCapabilities= gives its user none; without CapabilityBoundingSet=, all.
capabilities=${capabilities:--all} bounding=${bounding:-+all}
no_new_privileges=()
[ "$(unit_value NoNewPrivileges | tail -1)" = yes ] && no_new_privileges=(--no-new-privs)
# Environment=TRACER_DB=%S/tracer/tracer.db: %S, %C, %E are /var/lib, /var/cache, /etc for a system unit.
environment=()
# (A here-string: the guest has no /dev/fd for a process substitution.)
while read -r assignment; do
    environment+=("$(echo "$assignment" | sed -e 's|%S|/var/lib|g' -e 's|%C|/var/cache|g' -e 's|%E|/etc|g')")
done <<<"$(unit_value Environment)"
# What systemd does for StateDirectory= and CacheDirectory= (mode 0700, owned by the unit's user).
install -d -m 0700 -o "$user" -g "$user" /var/lib/tracer /var/cache/tracer
# What a user does: names the adapter in the configuration (and, here, scans continuously so that
# the run is short).
sed -i 's/^# transport = "hci0"$/transport = "hci0"\ncontinuous_scan = true/' /etc/tracer/tracer.toml
cp /etc/tracer/tracer.toml "$results/configured.toml"
btmgmt --index 0 power off >/dev/null 2>&1
# run_as_unit NAME CAPS BOUNDING [ARGUMENTS...]: the unit's ExecStart as its user, log in NAME.log.
run_as_unit() {
    local name=$1 caps=$2 bounding_set=$3
    shift 3
    local command=(setpriv --reuid "$user" --regid "$user" --init-groups --inh-caps "$caps" --ambient-caps "$caps"
        --bounding-set "$bounding_set" "${no_new_privileges[@]}" env "${environment[@]}" $(unit_value ExecStart | tail -1) "$@")
    echo "${command[*]}" >"$results/$name.command"
    "${command[@]}" >>"$results/$name.log" 2>&1 &
    node=$!
}
echo "user=$user ambient=$capabilities bounding=$bounding environment=${environment[*]}" >"$results/unit-reading.txt"
run_as_unit package-node "$capabilities" "-all,$bounding" --rotation-interval 15
package_node=$node
# Until setpriv and env have exec'd the node (for 10 s at most).
for _ in $(seq 50); do [ "$(cat "/proc/$package_node/comm" 2>/dev/null)" = tracer ] && break; sleep 0.2; done
# The running process's own view: its user and its capability sets (from /proc, as the kernel sees them).
# setpriv and env exec, so the pid is the node's.
grep -E '^(Name|Uid|Gid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' "/proc/$package_node/status" >"$results/package-node-process.txt" 2>&1
database=/var/lib/tracer/tracer.db
deadline=$(( $(date +%s) + phase_seconds ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(peers "$database")" -ge 1 ] && break
    sleep 2
done
say "phase 2: the installed node met $(peers "$database") peer ids"
# A few more seconds, so that the host's node logs what it learned by being written to.
sleep 5
kill -TERM "$package_node"; wait "$package_node"; echo "$?" >"$results/package-node.exit"
ls -ln /var/lib/tracer >"$results/state-directory.txt" 2>&1
for file in "$database"*; do [ -e "$file" ] && cp "$file" "$results/"; done

say "phase 3: the same without the capability"
run_as_unit nocap-node -all -all --rotation-interval 15
nocap_node=$node
# Until it has refused (the whole JSON line), for 30 s at most.
wait_for_log_line nocap-node 30 'EPERM.*needs CAP_NET_ADMIN.*}$'
kill -KILL "$nocap_node" 2>/dev/null; wait "$nocap_node" 2>/dev/null

say "phase 4: dpkg -r, dpkg --purge"
dpkg -r tracer >"$results/dpkg-remove.txt" 2>&1
echo "$?" >"$results/dpkg-remove.exit"
{
    for path in /usr/bin/tracer "$unit" /etc/tracer/tracer.toml /var/lib/tracer/tracer.db; do
        [ -e "$path" ] && echo "present $path" || echo "absent $path"
    done
    getent passwd tracer >/dev/null && echo "user tracer" || echo "no user tracer"
} >"$results/after-remove.txt"
dpkg --purge tracer >"$results/dpkg-purge.txt" 2>&1
echo "$?" >"$results/dpkg-purge.exit"
{
    for path in /usr/bin/tracer "$unit" /etc/tracer /var/lib/tracer /var/cache/tracer; do
        [ -e "$path" ] && echo "present $path" || echo "absent $path"
    done
    getent passwd tracer >/dev/null && echo "user tracer" || echo "no user tracer"
    getent group tracer >/dev/null && echo "group tracer" || echo "no group tracer"
    cmp -s /etc/passwd /tmp/passwd-before && echo "passwd unchanged" || echo "passwd changed"
    cmp -s /etc/group /tmp/group-before && echo "group unchanged" || echo "group changed"
    dpkg-query -W -f='${Status}\n' tracer 2>&1 | sed 's/^/dpkg-query: /'
} >"$results/after-purge.txt"
written_paths >"$results/upper-after.txt"
comm -13 "$results/upper-before.txt" "$results/upper-after.txt" >"$results/left-after-purge.txt"
say "done"
