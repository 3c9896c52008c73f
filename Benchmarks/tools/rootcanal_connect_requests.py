#!/usr/bin/env python3
"""What became of every LE connect request in a RootCanal 1.10.0 log, and how long controllers stayed stuck.

Usage: rootcanal_connect_requests.py LOG [LONGEST]

RootCanal 1.10.0 clears a controller's pending LE connection only when that connection is made or on
HCI Reset. A connect request (CONNECT_IND) that the advertiser does not answer leaves the initiator
"stuck": it refuses every later connect request to its own advertising ("connection already pending"),
and each initiator it refuses is stuck in turn. This script reads rootcanal's log (the launchers keep it:
TRACER_ROOTCANAL_LOG_DIR, or the crowd benchmark's folder) and classifies each request:

- answered: the advertiser accepted it and the initiator got the connection;
- refused by a stuck advertiser: the advertiser logged "CreatePendingLeConnection failed" for it;
- lost a race: the advertiser accepted another initiator's request within 50 ms;
- stale pending: accepted, but the initiator's own pending connection was for another peer, so the
  link exists on the advertiser's side only (a "ghost" the advertiser's host must time out).

A stuck span runs from a device's first unanswered request to its next answered one ("healed") or to
its host closing the controller ("reset"); LONGEST lists that many of the longest.
"""
import collections
import re
import sys

LINE = re.compile(r'^root-canal (\w) \S+ (\d+):(\d+):([\d.]+) (\S+)\s+(\d+)\s+(.*)$')
ADDRESS = r'([0-9a-f:]{17})'


def read(path):
    events = []
    with open(path, errors='replace') as log:
        for raw in log:
            match = LINE.match(raw.rstrip('\n'))
            if match:
                seconds = int(match[2]) * 3600 + int(match[3]) * 60 + float(match[4])
                events.append((seconds, int(match[6]), match[7]))
    return events


def main():
    events = read(sys.argv[1])
    if not events:
        sys.exit(f"no rootcanal log lines in {sys.argv[1]}")
    sends, accepts, refusals, closed = [], [], [], {}
    answered = collections.defaultdict(list)
    stale_sends = ghosts = 0
    for time, device, message in events:
        if match := re.search(r'Sending LE Connect request to ' + ADDRESS + r'.*initiating address ' + ADDRESS, message):
            sends.append((time, device, match[1], match[2]))
        elif match := re.search(r'Received LE Connect complete response with advertising address ' + ADDRESS, message):
            answered[device].append((time, match[1]))
        elif match := re.search(r'Accepting LE Connect request .*from initiating address ' + ADDRESS, message):
            accepts.append((time, device, match[1]))
        elif match := re.search(r'CreatePendingLeConnection failed for connection from ' + ADDRESS, message):
            refusals.append((time, device, match[1]))
        elif 'CreatePendingLeConnection failed for connection to' in message:
            stale_sends += 1
        elif 'No pending connection' in message:
            ghosts += 1
        elif 'HCI transport closed' in message:
            closed[device] = time

    def was_answered(time, device, target):
        return any(0 <= answer - time < 0.5 and address == target for answer, address in answered[device])

    kinds = collections.Counter()
    for time, device, target, own in sends:
        near = lambda entries: [e for e in entries if abs(e[0] - time) < 0.05]
        if was_answered(time, device, target):
            kinds['answered'] += 1
        elif any(e[2] == own for e in near(refusals)):
            kinds['refused by a stuck advertiser'] += 1
        elif any(e[2] == own for e in near(accepts)):
            kinds['accepted, but the initiator was stuck on another peer (link on the advertiser only)'] += 1
        elif any(e[2] != own for e in near(accepts)):
            kinds['lost a race (the advertiser accepted another initiator within 50 ms)'] += 1
        else:
            kinds['unanswered, other'] += 1
    print(f"{len(sends)} connect requests in {events[-1][0] - events[0][0]:.0f} s of log")
    for kind, count in kinds.most_common():
        print(f"  {count:6d}  {kind}")
    print(f"  requests sent while the initiator's own pending connection was stale: {stale_sends}")
    print(f"  connections made on the advertiser's side only: {ghosts}")

    spans = []
    by_device = collections.defaultdict(list)
    for time, device, target, _ in sends:
        by_device[device].append((time, target))
    for device, requests in by_device.items():
        since = None
        for time, target in requests:
            ok = was_answered(time, device, target)
            if since is None and not ok:
                since = time
            elif since is not None and ok:
                spans.append((device, since, time, 'healed'))
                since = None
        if since is not None:
            spans.append((device, since, closed.get(device, events[-1][0]), 'reset' if device in closed else 'end of log'))
    if not spans:
        print("stuck spans: none")
        return
    durations = sorted(end - start for _, start, end, _ in spans)
    refused = [sum(1 for r in refusals if r[1] == device and start <= r[0] <= end) for device, start, end, _ in spans]
    print(f"stuck spans: {len(spans)} ({dict(collections.Counter(kind for *_, kind in spans))}); "
          f"median {durations[len(durations) // 2]:.2f} s, p90 {durations[int(len(durations) * 0.9)]:.2f} s, "
          f"longest {durations[-1]:.2f} s; requests refused during them: {sum(refused)} (at most {max(refused)} in one)")
    for device, start, end, kind in sorted(spans, key=lambda span: span[1] - span[2])[:int(sys.argv[2]) if len(sys.argv) > 2 else 0]:
        print(f"  device {device}: {end - start:.1f} s ({kind})")


if __name__ == '__main__':
    main()
