"""A daemon that crashes: it answers ``initialize`` like ``ctxd serve``, then dies (exit 3) on the
first request it is sent, as a daemon killed mid-compaction would. Only the pi tests use it."""

from __future__ import annotations

import json
import sys


def read() -> dict[str, object] | None:
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if not line.strip():
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length or 0))


def send(message: dict[str, object]) -> None:
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    sys.stdout.buffer.flush()


while (message := read()) is not None:
    if message.get("method") == "initialize":
        ctxd = {"version": "crashing", "methods": ["compact/summarize"], "notifications": [], "clientRequests": []}
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {"experimental": {"ctxd": ctxd}}}})
    elif "id" in message and message.get("method") not in ("shutdown",):
        sys.exit(3)
    elif message.get("method") == "shutdown":
        send({"jsonrpc": "2.0", "id": message["id"], "result": None})
    elif message.get("method") == "exit":
        sys.exit(0)
