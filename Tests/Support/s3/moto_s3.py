"""An S3-compatible server for the object-store tests: moto's in-memory S3 on 127.0.0.1:PORT.

Usage: moto_s3.py [--no-auth] PORT BUCKET [BUCKET...]

Unlike `python -m moto.server`, this launcher turns moto's request authentication on: every
request must carry a valid AWS Signature Version 4 of an IAM user it creates (so the tests prove
that libcurl's signing is accepted, and that wrong credentials are refused), and anonymous GETs
are allowed only through a public-read bucket policy, as on a real bucket behind a CDN. It creates
each BUCKET with that policy, prints `READY PORT ACCESS_KEY_ID SECRET_ACCESS_KEY` followed by a
role's temporary `ACCESS_KEY_ID SECRET_ACCESS_KEY SESSION_TOKEN`, and serves until
its standard input closes (or SIGTERM), so it cannot outlive a crashed test run.

SIGUSR1 takes the endpoint down (the port refuses connections, as an unreachable store's does)
and SIGUSR2 brings it back on the same port, with every bucket and object kept: an outage of the
store, not the loss of its data.

--no-auth leaves moto's authentication off (any signature passes): for the one test of key
prefixes, because moto 5.1 with authentication refuses the signature of every listing whose
prefix holds a "/" (boto3's included; real S3 accepts them).
"""
import json
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from launcher_support import block_until_stdin_closes  # noqa: E402

try:
    from moto import settings  # noqa: E402
    from moto.core import DEFAULT_ACCOUNT_ID  # noqa: E402
    from moto.iam.models import iam_backends  # noqa: E402
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer  # noqa: E402
    from moto.s3.models import s3_backends  # noqa: E402
except ImportError as error:
    print(f"MISSING moto[server] is not installed in {sys.executable} ({error}); run ./scripts/setup", flush=True)
    sys.exit(3)

USER = "tracer-sync"
ROLE = "tracer-sync-role"


def allow_anonymous_object_reads() -> None:
    """With authentication on, moto 5.1 fails (500) on any request without an Authorization
    header. Real S3 evaluates such a request against the bucket policy instead, so: an anonymous
    GET or HEAD of an object goes on to moto's own bucket-policy check (which refuses objects the
    public-read policy does not cover), and every other anonymous request is refused."""
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.s3.exceptions import S3AccessDeniedError

    authenticate = ActionAuthenticatorMixin._authenticate_and_authorize_action

    def authenticate_unless_anonymous_read(self, iam_request_cls, resource="*"):
        if "Authorization" in self.headers or "X-Amz-Signature=" in self.uri:
            return authenticate(self, iam_request_cls, resource)
        is_object = "/" in resource.split(":::", 1)[-1]
        if self.method in ("GET", "HEAD") and is_object:
            return None
        raise S3AccessDeniedError()

    ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate_unless_anonymous_read


def assume_sync_role(iam, policy: str):
    """Temporary credentials (key id, secret and session token) of a role with the sync user's
    policy, as STS AssumeRole hands them out: moto accepts their key id only with the matching
    x-amz-security-token header."""
    from moto.sts.models import sts_backends

    trust = json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:root"},
                       "Action": "sts:AssumeRole"}],
    })
    role = iam.create_role(ROLE, trust, "/", None, "tracer sync", [], None)
    iam.put_role_policy(ROLE, "sync", policy)
    sts = sts_backends[DEFAULT_ACCOUNT_ID]["aws"]
    return sts.assume_role(region_name="us-east-1", role_session_name="sync", role_arn=role.arn,
                           policy=None, duration=3600, external_id=None)


def main() -> None:
    arguments = sys.argv[1:]
    authenticate = "--no-auth" not in arguments
    arguments = [argument for argument in arguments if argument != "--no-auth"]
    port = int(arguments[0])
    buckets = arguments[1:]
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    iam.create_user("us-east-1", USER, path="/")
    key = iam.create_access_key(USER)
    # The four actions deploy/object-store/README.md asks for a real bucket's sync user, so the
    # tests fail if sync needs another. The test-only requests (a stranger's object, a bucket
    # listing) need nothing more either.
    sync_policy = json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow",
                       "Action": ["s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                       "Resource": "*"}],
    })
    iam.put_user_policy(USER, "sync", sync_policy)
    temporary = assume_sync_role(iam, sync_policy)
    s3 = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for bucket in buckets:
        s3.create_bucket(bucket, "us-east-1")
        s3.put_bucket_policy(bucket, json.dumps({
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": "PublicRead", "Effect": "Allow", "Principal": "*",
                "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*",
            }],
        }).encode())
    # From now on every request is authenticated (the setup above went to the backends directly).
    if authenticate:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        allow_anonymous_object_reads()
    servers = [ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)]
    servers[0].start()
    outage = threading.Lock()

    # The backends are this process's module state, so a new server on the port finds them all.
    def go_down(_signal, _frame):
        with outage:
            if servers:
                server = servers.pop()
                server.stop()
                # stop() ends the serving loop but leaves the socket listening, and the kernel
                # would go on accepting connections that nobody answers.
                server._server.server_close()
            print("DOWN", file=sys.stderr, flush=True)

    def come_back(_signal, _frame):
        with outage:
            if not servers:
                servers.append(ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False))
                servers[0].start()
            print("UP", file=sys.stderr, flush=True)

    signal.signal(signal.SIGUSR1, go_down)
    signal.signal(signal.SIGUSR2, come_back)
    # A child inherits its parent's blocked signals, and the Swift test process blocks these.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1, signal.SIGUSR2})
    print(f"READY {port} {key.access_key_id} {key.secret_access_key} "
          f"{temporary.access_key_id} {temporary.secret_access_key} {temporary.session_token}", flush=True)
    waiter = threading.Thread(target=block_until_stdin_closes, daemon=True)
    waiter.start()
    # In steps, so that the signals above are handled on this (the main) thread meanwhile.
    while waiter.is_alive():
        waiter.join(0.2)
    for server in servers:
        server.stop()


if __name__ == "__main__":
    main()
