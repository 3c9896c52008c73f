"""Schemathesis hooks for the API conformance test (schemathesis.toml beside this file).

Whether a history's entries are acceptable depends on the server's clock: an id's window must end
within the last `retentionDays` (28 by default) and start at most `clockSkewSeconds` ahead, a key's
day likewise; and on the entry's other fields: validUntil after validFrom and at most
`maxWindowSeconds` (3600) later, one key per day and interval. JSON Schema cannot state such rules
(docs/openapi.yaml says them in words, with their 422 codes), so nearly every history Schemathesis
draws from the schema alone is rightly refused, and the check that valid data is accepted
(positive_data_acceptance) could never see a stored history.

This hook moves each entry of a *positive* (schema-valid) history into the window the server
accepts now, keeping what was drawn as far as it can (the id, the key, the offsets taken from the
drawn numbers), so that positive cases are valid by every rule and must be answered 201 or 200.
A positive case's Idempotency-Key gets a suffix made from its body: the server refuses a key
used before with another body (422 `idempotency_key_reused`, documented), which Schemathesis,
drawing short keys, would otherwise send again and again. The same key with the same body still
gives the same key, so a repeated request is still answered 200 with the first receipt.

Negative cases are never touched: they must still be refused.
"""

import copy
import hashlib
import json
import time

import schemathesis
from schemathesis.generation import GenerationMode

# The server's defaults, which the test's configuration keeps.
MAX_WINDOW_SECONDS = 3600
DAY = 86400


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE or case.method.upper() != "POST":
        return case
    if not isinstance(case.body, dict):
        return case
    # Copies, changed: Schemathesis may share one drawn body or header dict between cases, and
    # changing it in place would change cases already given their Idempotency-Key.
    body = case.body = copy.deepcopy(case.body)
    now = int(time.time())
    if case.path == "/v1/histories" and isinstance(body.get("ids"), list):
        for entry in body["ids"]:
            if not isinstance(entry, dict):
                continue
            drawn_from, drawn_until = entry.get("validFrom"), entry.get("validUntil")
            if not isinstance(drawn_from, int) or not isinstance(drawn_until, int):
                continue
            # Started between 1 hour and 21 days ago, lasting 1 to 3600 seconds: inside the
            # retention period, not in the future, not longer than maxWindowSeconds.
            start = now - 3600 - drawn_from % (20 * DAY)
            entry["validFrom"] = start
            entry["validUntil"] = start + 1 + drawn_until % MAX_WINDOW_SECONDS
    elif case.path == "/v1/key-histories" and isinstance(body.get("keys"), list):
        today = now // DAY
        # One key per day of the 27 days that end within the retention period (today included):
        # a longer history would repeat a day, which the server refuses (duplicate_day).
        body["keys"] = body["keys"][:27]
        for position, entry in enumerate(body["keys"]):
            if isinstance(entry, dict) and isinstance(entry.get("day"), int):
                entry["day"] = today - position
    # After the entries moved: the suffix is the digest of the body as sent.
    _separate_idempotency_keys(case)
    return case


def _separate_idempotency_keys(case):
    if not case.headers:
        return
    headers = case.headers = dict(case.headers)
    for name, value in list(headers.items()):
        if name.lower() == "idempotency-key" and isinstance(value, str) and value:
            # Members in the order they are sent: the server compares the bytes, so the same
            # members in another order are another body.
            digest = hashlib.sha256(json.dumps(case.body).encode()).hexdigest()[:16]
            # Still 1 to 200 visible ASCII characters, as the schema asks.
            headers[name] = value[:183] + "-" + digest
