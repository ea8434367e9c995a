from __future__ import annotations

from ctxd.context.tokens import context_tokens, estimate_tokens, js_len


def test_js_length_counts_utf16_units() -> None:
    assert js_len("abc") == 3
    assert js_len("é") == 1
    assert js_len("😀") == 2  # outside the BMP: a surrogate pair, as in JavaScript


def test_estimates_follow_pi() -> None:
    assert estimate_tokens({"role": "user", "content": "abcde"}) == 2
    img = {"type": "image", "data": "x" * 100, "mimeType": "image/png"}
    # pi 1.5.2 counts images in user messages too (4800 chars); the old literal 0 was wrong
    assert estimate_tokens({"role": "user", "content": [img]}) == 1200
    assert estimate_tokens({"role": "toolResult", "content": [img]}) == 1200
    call = {"type": "toolCall", "id": "1", "name": "read", "arguments": {"path": "a"}}
    # "read" + '{"path":"a"}' = 4 + 12 chars
    assert estimate_tokens({"role": "assistant", "content": [call]}) == 4
    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "a\nb"}) == 2
    assert estimate_tokens({"role": "compactionSummary", "summary": "x" * 9}) == 3


def test_context_tokens_use_last_trusted_usage() -> None:
    usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 100}
    msgs = [
        {"role": "user", "content": "x" * 40},
        {"role": "assistant", "content": [], "usage": usage, "stopReason": "stop"},
        {"role": "user", "content": "y" * 8},
        {"role": "assistant", "content": [], "usage": {**usage, "totalTokens": 999}, "stopReason": "aborted"},
    ]
    assert context_tokens(msgs) == 100 + 2 + 0
    assert context_tokens(msgs[:1]) == 10
    no_total = {"input": 5, "output": 6, "cacheRead": 7, "cacheWrite": 8, "totalTokens": 0}
    assert context_tokens([{"role": "assistant", "content": [], "usage": no_total, "stopReason": "stop"}]) == 26
