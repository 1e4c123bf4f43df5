#!/usr/bin/env python3
"""A minimal StoreBus client in Python, speaking the wire protocol directly with pyzmq.

What it shows (the protocol is described in proto-schemas/README.md):
  1. a unary call: /storebus.health.v1.Health/Check;
  2. a call that can fail: /storebus.testkit.v1.Journal/Append, once valid, once with an empty key
     (INVALID_ARGUMENT with a field violation), decoding the storebus.common.v1.ErrorStatus body;
  3. following the journal's event log: a SUB socket for doorbells plus ReadEvents paging, never
     skipping a gap, keeping the position together with the effects in one atomically replaced file
     so that every event is applied exactly once across restarts.

Run it against the test fixture:
  pip install pyzmq
  mkdir -p /tmp/sbdoc
  .build/debug/storebus-testkit-journal --rpc-endpoint ipc:///tmp/sbdoc/rpc.sock \\
      --event-endpoint ipc:///tmp/sbdoc/ev.sock --data-dir /tmp/sbdoc/data &
  deploy/examples/python_client.py --rpc ipc:///tmp/sbdoc/rpc.sock --events ipc:///tmp/sbdoc/ev.sock

Every frame sent and received is printed (">>" sent, "<<" received, "bell" doorbells); --quiet
prints only the results. Run it twice: the second run resumes after the events the first applied.
"""
import argparse
import json
import math
import os
import time

import zmq

STATUS_NAMES = [
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
]
UNAVAILABLE, DEADLINE_EXCEEDED = 14, 4
TRACE = True


def trace(prefix, frames):
    if TRACE:
        print(prefix, frames)


class RPCError(Exception):
    """A non-OK answer; `status` is the decoded storebus.common.v1.ErrorStatus (a dict)."""

    def __init__(self, code, status):
        self.code, self.status = code, status
        name = STATUS_NAMES[code] if code < len(STATUS_NAMES) else "CODE_%d" % code
        super().__init__("%s: %s" % (name, status.get("message", "")))


class Client:
    """One DEALER connected to one service instance. Request ids are a per-connection counter."""

    def __init__(self, ctx, endpoint):
        self.ctx, self.endpoint = ctx, endpoint
        self.next_id = 1
        self._open()

    def _open(self):
        # No IMMEDIATE: with it, libzmq drops an answer that arrives just as its connection closes
        # (a server answering as it shuts down). A request can then wait in the socket for a
        # connection instead; the socket is replaced after a call that got no answer (_attempt),
        # so that such a request is never delivered after its caller gave up.
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)             # closing never blocks, and drops what waits
        self.sock.setsockopt(zmq.MAXMSGSIZE, 4 << 20)   # same 4 MiB limit as the servers
        self.sock.setsockopt(zmq.SNDHWM, 50000)
        self.sock.setsockopt(zmq.RCVHWM, 50000)
        self.sock.setsockopt(zmq.HEARTBEAT_IVL, 1000)   # ZMTP PING every second ...
        self.sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3000)  # ... a silent server is dropped after 3 s
        self.sock.setsockopt(zmq.HEARTBEAT_TTL, 3000)
        self.sock.setsockopt(zmq.RECONNECT_IVL, 100)
        self.sock.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        self.sock.connect(self.endpoint)

    def call(self, method, request, timeout_ms=5000, metadata=None, idempotent=False, attempts=3):
        """Calls `method` (a path such as /storebus.health.v1.Health/Check) with a dict; returns the
        response dict or raises RPCError. Retries UNAVAILABLE only when a second run is harmless."""
        metadata = metadata or {}
        retryable = idempotent or "idempotency-key" in metadata
        deadline = time.monotonic() + timeout_ms / 1000.0
        for attempt in range(1, attempts + 1):
            code, body = self._attempt(method, request, deadline, metadata)
            if code == 0:
                return body
            if code == UNAVAILABLE and retryable and attempt < attempts and time.monotonic() + 0.05 < deadline:
                time.sleep(0.05)
                continue
            raise RPCError(code, body)

    def _attempt(self, method, request, deadline, metadata):
        rid = str(self.next_id).encode()
        self.next_id += 1
        left_ms = max(0, math.ceil((deadline - time.monotonic()) * 1000))
        header = b"SB1Q\n" + rid + b"\n" + str(left_ms).encode() + b"\n" + method.encode()
        for key in sorted(metadata):
            header += b"\n" + key.encode() + b": " + metadata[key].encode()
        frames = [b"", header, json.dumps(request, separators=(",", ":")).encode()]
        self.sock.setsockopt(zmq.SNDTIMEO, max(1, left_ms))
        try:
            self.sock.send_multipart(frames)
        except zmq.Again:  # the send queue stayed full until the deadline: nothing was sent
            return UNAVAILABLE, {"code": UNAVAILABLE, "message": "the send queue stayed full until the deadline"}
        trace(">>", frames)
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not self.sock.poll(left_ms):
                # A server that got the request drops its work at the same deadline; one that never
                # did (no connection) must not get it later: the socket goes, with what waits in it.
                self.sock.close()
                self._open()
                return DEADLINE_EXCEEDED, {"code": DEADLINE_EXCEEDED, "message": "no answer before the deadline"}
            reply = self.sock.recv_multipart()
            trace("<<", reply)
            if len(reply) != 3 or reply[0] != b"":
                continue  # not a StoreBus answer: ignore
            lines = reply[1].split(b"\n")
            if len(lines) != 3 or lines[0] != b"SB1R" or lines[1] != rid:
                continue  # unknown tag, or a late answer to a call given up earlier
            body = json.loads(reply[2]) if reply[2] else {}
            return int(lines[2]), body

    def cancel(self, rid):
        """Tells the server to drop the work of request `rid` (bytes). No answer comes."""
        self.sock.send_multipart([b"", b"SB1C\n" + rid])


def parse_doorbell(frames):
    """[b"<log>/<key>\\n", b"SB1E\\n<seq>\\n<key_seq>"(\\n<shard>\\n<topics>)(, event JSON)] -> (log, key, seq, key_seq), or None.

    A third frame, when present, is the event itself; this follower reads events with ReadEvents
    anyway, so it only needs the positions."""
    if len(frames) not in (2, 3) or not frames[0].endswith(b"\n") or b"/" not in frames[0]:
        return None
    lines = frames[1].split(b"\n")
    if len(lines) < 3 or lines[0] != b"SB1E":
        return None  # unknown tag (a newer protocol version): ignore it
    log, key = frames[0][:-1].split(b"/", 1)
    return log.decode(), key.decode(), int(lines[1]), int(lines[2])


class JournalProjection:
    """The follower's state: its position and its effects, saved together in one file."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path) as f:
                saved = json.load(f)
        except FileNotFoundError:
            saved = {"position": 0, "counts": {}}
        self.position, self.counts = saved["position"], saved["counts"]

    def apply(self, event, position):
        entry = event["payload"]
        self.counts[entry["key"]] = self.counts.get(entry["key"], 0) + 1
        self.position = position
        # Effect and position land in one atomic rename: after a crash both or neither are there.
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"position": self.position, "counts": self.counts}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def follow(ctx, client, events_endpoint, state, key="", page_size=2, seconds=3.0, on_caught_up=None):
    """Applies every event after state.position, in order, for `seconds`. key "" follows the whole
    log (positions are seq); a key follows that key only (positions are key_seq)."""
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVHWM, 10000)
    sub.setsockopt(zmq.HEARTBEAT_IVL, 2000)
    sub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 6000)
    # Subscribe before the first read, so no commit after that read goes unannounced.
    sub.setsockopt(zmq.SUBSCRIBE, b"journal/" + (key.encode() + b"\n" if key else b""))
    sub.connect(events_endpoint)
    position_field = "keySeq" if key else "seq"
    stop_at = time.monotonic() + seconds
    announced = 0
    while time.monotonic() < stop_at:
        page = client.call("/storebus.eventlog.v1.EventLog/ReadEvents",
                           {"key": key, "afterSeq": str(state.position), "limit": page_size},
                           idempotent=True)
        gap = False
        for event in page.get("events", []):
            at = int(event[position_field])
            if at <= state.position:
                continue  # already applied
            if at != state.position + 1:
                print("gap: expected %d, got %d; reading again" % (state.position + 1, at))
                gap = True
                break
            state.apply(event, at)
            print("applied %s=%d key=%s text=%r" % (position_field, at, event["key"], event["payload"].get("text")))
        head = int(page.get("headSeq", "0"))
        if gap:
            time.sleep(0.1)
            continue
        if state.position < head:
            continue  # more pages
        if state.position > head:
            # The log ends before events we applied: it is not the log our position came from.
            raise SystemExit("the log ends at %d, before our position %d: it was replaced; start over from 0" % (head, state.position))
        if on_caught_up:
            on_caught_up()
            on_caught_up = None
        # Caught up: sleep until a doorbell announces something beyond our position, or 1 s passes
        # (doorbells can be lost, so we read again anyway).
        wait_until = min(stop_at, time.monotonic() + 1.0)
        while announced <= state.position:
            left_ms = int((wait_until - time.monotonic()) * 1000)
            if left_ms <= 0 or not sub.poll(left_ms):
                break
            frames = sub.recv_multipart()
            trace("bell", frames)
            bell = parse_doorbell(frames)
            if bell:
                announced = max(announced, bell[3] if key else bell[2])
    sub.close()


def main():
    global TRACE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rpc", default="ipc:///tmp/sbdoc/rpc.sock")
    parser.add_argument("--events", default="ipc:///tmp/sbdoc/ev.sock")
    parser.add_argument("--state", default="journal-follower.json", help="position + effects file")
    parser.add_argument("--follow-key", default="", help="follow one key instead of the whole log")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    TRACE = not args.quiet
    ctx = zmq.Context()
    client = Client(ctx, args.rpc)

    print("# 1. Health/Check")
    health = client.call("/storebus.health.v1.Health/Check", {}, idempotent=True)
    print("status=%s process=%s services=%s" % (health.get("status"), health.get("process"), health.get("services")))

    print("# 2. Journal/Append")
    ok = client.call("/storebus.testkit.v1.Journal/Append", {"key": "demo", "text": "hello"})
    print("appended seq=%s keySeq=%s" % (ok["seq"], ok["keySeq"]))
    try:
        client.call("/storebus.testkit.v1.Journal/Append", {"key": "", "text": "no key"})
    except RPCError as error:
        print("error %s" % error)
        for violation in error.status.get("fieldViolations", []):
            print("  field %r: %s" % (violation.get("field", ""), violation.get("description", "")))

    print("# 3. follow the journal's event log")
    state = JournalProjection(args.state)
    print("resuming after position %d" % state.position)

    def append_more():  # once caught up, commit one more entry: its doorbell wakes the follower
        print("caught up; appending one more entry")
        client.call("/storebus.testkit.v1.Journal/Append", {"key": "demo", "text": "rung"})

    follow(ctx, client, args.events, state, key=args.follow_key, on_caught_up=append_more)
    print("position=%d counts=%s" % (state.position, state.counts))
    client.sock.close()
    ctx.term()


if __name__ == "__main__":
    main()
