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

# Waits (up to $2 seconds) until the database /tmp/$1.db holds more than $3 distinct peer ids.
wait_for_peers() {
    local deadline=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        [ "$(peers "/tmp/$1.db")" -gt "$3" ] && break
        sleep 2
    done
}
