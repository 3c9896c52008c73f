# Helpers the kernel bed's scenarios share; a scenario sources this after setting $results (the
# results folder) and, for the node helpers, $tracer (the tracer binary it runs).

say() { echo "[$(awk '{print $1}' /proc/uptime) s] $*"; }

# Distinct peer ids a node's database holds, summed over days (0 while it has none).
peers() {
    "$tracer" encounters --json --db "$1" 2>/dev/null | grep -o '"distinctPeerIDs" *: *[0-9]*' | grep -o '[0-9]*$' \
        | awk '{ total += $1 } END { print total + 0 }'
}

# Starts a node in the background (its log: $results/LOG.log, its database /tmp/DB.db; further
# arguments go to `tracer run`) and sets $node to its pid. Ids rotate every 15 s, so that a run
# sees the node's address change with its id and a restarted node meets ids it had not met.
start_node() {
    local log=$1 database=$2 transport=$3
    shift 3
    "$tracer" run --db "/tmp/$database.db" --transport "$transport" --continuous-scan --rotation-interval 15 "$@" \
        >>"$results/$log.log" 2>&1 &
    node=$!
}

# Copies a stopped node's database (kept on the guest's tmpfs: SQLite's WAL needs shared memory, which 9p lacks).
keep_database() {
    rm -f "$results/$1".db*
    for file in /tmp/"$1".db*; do [ -e "$file" ] && cp "$file" "$results/"; done
}

# Stops node NAME (pid $2) with SIGTERM and keeps its exit status in $results/NAME.exit.
stop_node() { kill -TERM "$2" 2>/dev/null; wait "$2"; echo "$?" >"$results/$1.exit"; }

# A wait that ran out says so in the scenario's output (which the host test shows when it fails)
# and returns 1; the scenario goes on, so that what it keeps afterwards still tells the rest.
wait_expired() { say "wait expired: $*"; return 1; }

# Waits (up to $2 seconds) until the database /tmp/$1.db holds more than $3 distinct peer ids.
wait_for_peers() {
    local deadline=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        [ "$(peers "/tmp/$1.db")" -gt "$3" ] && return 0
        sleep 2
    done
    wait_expired "$1.db held $(peers "/tmp/$1.db") peer ids after $2 s, not more than $3"
}

# The latest last sighting (Unix seconds) in database $1 (0 while it has none).
latest_sighting() {
    "$tracer" encounters --json --details --db "$1" 2>/dev/null | grep -o '"lastSeen" *: *[0-9]*' | grep -o '[0-9]*$' \
        | awk 'BEGIN { latest = 0 } $1 > latest { latest = $1 } END { print latest + 0 }'
}

# Waits (up to $2 seconds) until the database /tmp/$1.db holds a sighting from after second $3:
# one that a node started after that second logged (whole seconds, rounded down).
wait_for_sighting_after() {
    local deadline=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        [ "$(latest_sighting "/tmp/$1.db")" -gt "$3" ] && return 0
        sleep 1
    done
    wait_expired "$1.db's latest sighting after $2 s is at $(latest_sighting "/tmp/$1.db"), not after $3"
}

# Waits (up to $2 seconds) until the log $results/$1.log has a whole line matching the pattern $3.
wait_for_log_line() {
    local deadline=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        grep -q -- "$3" "$results/$1.log" 2>/dev/null && return 0
        sleep 0.2
    done
    wait_expired "no line of $1.log matched '$3' within $2 s"
}
