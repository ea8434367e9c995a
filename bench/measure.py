"""What the benchmark scripts share: timing, percentiles, peak RSS, and the message an agent's tool
loop appends (the same one bench/pi_bench.mjs appends on pi's side)."""

from __future__ import annotations

import os
import resource
import time
from typing import Any


def rss_mb() -> float:
    """This process's peak resident set size, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(t: float) -> float:
    """Milliseconds since ``t`` (a ``time.perf_counter()``)."""
    return (time.perf_counter() - t) * 1000


def tool_loop_message(k: int) -> dict[str, Any]:
    """The k-th appended message: an assistant tool call with usage, then its 1,800-character result."""
    if k % 2 == 0:
        call = {"type": "toolCall", "id": f"call_{k}", "name": "read", "arguments": {"path": f"f{k}.ts"}}
        usage = {"input": 10, "output": 20, "cacheRead": 500000 + k, "cacheWrite": 100, "totalTokens": 500130 + k}
        return {
            "role": "assistant",
            "content": [call],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": usage,
            "stopReason": "toolUse",
            "timestamp": 1767261600000 + k,
        }
    text = [{"type": "text", "text": "x" * 1800}]
    return {"role": "toolResult", "toolCallId": f"call_{k - 1}", "toolName": "read", "content": text, "isError": False}


def checkout(path: str | os.PathLike[str]) -> str:
    """A folder holding a ctxd tree to compare with, resolved; exits with a message otherwise (a path that
    does not hold one would silently import the installed ctxd, and every answer would compare equal)."""
    found = os.path.realpath(path)
    if not os.path.isfile(os.path.join(found, "ctxd", "__init__.py")):
        raise SystemExit(f"{path}: not a ctxd checkout (no ctxd/__init__.py there)")
    return found
