"""Fuzzing the webhook intake: random headers and bodies at the real ``forksync serve``.

The server runs as its own process on 127.0.0.1 (token mode, the real handlers and
jobs). Each example is written on a raw socket, so header values may hold any byte
but CR and LF, and travels next to a correctly signed delivery. Nothing a sender
controls may produce a 5xx, touch the signed delivery beside it, or crash the process;
the log must hold no traceback.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.serving import ServeProcess, sign


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    srv = ServeProcess(tmp_path_factory.mktemp("fuzz"), FORKSYNC_MAX_BODY_BYTES="65536",
                       FORKSYNC_RETRY_BACKOFF_SECONDS="600")
    yield srv
    srv.stop()
    assert intake_tracebacks(srv.log_text()) == []


_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \w+ (\S+): (.*)$", re.M)


def intake_tracebacks(log: str) -> list[str]:
    """Log records with a traceback, except a job's: a signed payload of a shape no GitHub
    event has may fail its handler later, in a job, which is no concern of the intake."""
    starts = [m for m in _RECORD.finditer(log)]
    found = []
    for m, end in zip(starts, [*(n.start() for n in starts[1:]), len(log)], strict=True):
        record = log[m.start():end]
        is_job = m.group(2).startswith(("job ", "handler "))
        if "Traceback" in record and not is_job:
            found.append(record[:2000])
    if "Traceback" in log[:starts[0].start() if starts else len(log)]:
        found.append(log[:2000])
    return found


def request(fields: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    head = b"".join(name + b": " + value + b"\r\n" for name, value in fields)
    return (b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n" + head
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


SIGNED_COUNT = [0]


def signed_delivery() -> bytes:
    """A correct delivery that must be taken whatever travels next to it."""
    SIGNED_COUNT[0] += 1
    body = json.dumps({"ref": "refs/heads/dev", "after": "0" * 40,
                       "repository": {"full_name": "fuzz/fork"}}).encode()
    return request([(b"X-GitHub-Event", b"push"),
                    (b"X-GitHub-Delivery", f"good-{SIGNED_COUNT[0]}-{time.time_ns()}".encode()),
                    (b"X-Hub-Signature-256", sign(body)),
                    (b"Content-Type", b"application/json")], body)


# Bytes an HTTP parser lets through in a header value (visible ASCII, tab, obs-text), so
# most examples reach the handler; some are any byte at all but CR and LF.
_VALUE_BYTES = [b"\t"[0], *range(0x20, 0x7F), *range(0x80, 0x100)]
field_value = (st.lists(st.sampled_from(_VALUE_BYTES), max_size=80).map(bytes)
               | st.binary(max_size=80).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")))
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4), max_leaves=20)
events = st.sampled_from([b"push", b"pull_request", b"issue_comment", b"installation",
                          b"check_run", b"ping", b"pull_request_review_comment"]) | field_value
bodies = st.one_of(
    st.binary(max_size=2000),
    st.fixed_dictionaries({"ref": st.just("refs/heads/dev"), "after": st.text(max_size=40),
                           "repository": st.fixed_dictionaries({"full_name": st.text(
                               max_size=30)})}).map(lambda v: json.dumps(v).encode()),
    json_value.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"action": json_value, "repository": json_value,
                           "installation": json_value, "issue": json_value,
                           "comment": json_value, "pull_request": json_value,
                           "sender": json_value, "ref": json_value},
                          ).map(lambda v: json.dumps(v).encode()))


@st.composite
def deliveries(draw: st.DrawFn) -> bytes:
    body = draw(bodies)
    signature = draw(st.sampled_from(["right", "wrong", "random", "sha256=random", "none"]))
    fields: list[tuple[bytes, bytes]] = [(b"X-GitHub-Event", draw(events)),
                                         (b"X-GitHub-Delivery", draw(field_value))]
    if signature == "right":
        fields.append((b"X-Hub-Signature-256", sign(body)))
    elif signature == "wrong":
        fields.append((b"X-Hub-Signature-256", b"sha256=" + b"0" * 64))
    elif signature == "random":
        fields.append((b"X-Hub-Signature-256", draw(field_value)))
    elif signature == "sha256=random":
        fields.append((b"X-Hub-Signature-256", b"sha256=" + draw(field_value)))
    fields.append((b"Content-Type", draw(st.sampled_from(
        [b"application/json", b"application/x-www-form-urlencoded", b"text/plain"])
        | field_value)))
    extra = st.tuples(st.from_regex(rb"\AX-[A-Za-z0-9-]{1,20}\Z"), field_value)
    fields += draw(st.lists(extra, max_size=3))
    return request(draw(st.permutations(fields)), body)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(raw=deliveries())
def test_no_delivery_gets_a_5xx_or_disturbs_a_signed_one(server: ServeProcess, raw: bytes) -> None:
    statuses: dict[str, int | None] = {}

    def send(name: str, data: bytes) -> None:
        statuses[name] = server.exchange(data)

    threads = [threading.Thread(target=send, args=("fuzz", raw)),
               threading.Thread(target=send, args=("signed", signed_delivery()))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses["signed"] == 202, statuses
    assert statuses["fuzz"] is not None and statuses["fuzz"] < 500, statuses
    assert server.proc.poll() is None


def test_malformed_framing_is_4xx_and_the_server_lives_on(server: ServeProcess) -> None:
    for raw in (b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                b"POST /webhook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-A\x00: b\r\nContent-Length: 0\r\n\r\n",
                b"\xff\xfe GARBAGE\r\n\r\n"):
        status = server.exchange(raw)
        assert status is None or 400 <= status < 500, (raw, status)
    assert server.exchange(signed_delivery()) == 202


def test_the_log_check_tells_an_intake_traceback_from_a_jobs() -> None:
    log = ("2026-01-01 00:00:00,001 INFO bot.app.server: forksync serving\n"
           "2026-01-01 00:00:01,002 ERROR bot.app.workers: job 3 (event o/r) failed\n"
           "Traceback (most recent call last):\nKeyError: 'id'\n"
           "2026-01-01 00:00:02,003 ERROR aiohttp.server: Error handling request\n"
           "Traceback (most recent call last):\nTypeError: boom\n")
    (found,) = intake_tracebacks(log)
    assert "aiohttp.server" in found and "job 3" not in found
