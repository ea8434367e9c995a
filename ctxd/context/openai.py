"""The context as OpenAI-style chat messages (what litellm takes), ready to send to a model.

pi's rendering rules: compaction and branch summaries become user messages wrapping the summary
in ``<summary>`` tags; bash executions become "Ran `cmd`" with their output; custom messages are
user messages; thinking is not sent.  The result is always a valid request: a tool call without
its result gets a placeholder result, a result without its call is dropped (and reported).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

COMPACTION_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUFFIX = "</summary>"
MISSING_RESULT = "(no result: the tool call was interrupted before it returned)"


def bash_text(message: Mapping[str, Any]) -> str:
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif message.get("exitCode") not in (None, 0):
        text += f"\n\nCommand exited with code {message.get('exitCode')}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def _parts(content: Any) -> list[dict[str, Any]]:
    """pi text/image blocks as OpenAI content parts."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text":
                parts.append({"type": "text", "text": str(block.get("text", ""))})
            elif block.get("type") == "image":
                url = f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _simplify(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _text_only(content: Any) -> str:
    return "\n".join(p["text"] for p in _parts(content) if p["type"] == "text")


def to_openai(messages: Sequence[Mapping[str, Any]], diagnostics: list[str] | None = None) -> list[dict[str, Any]]:
    """Convert pi AgentMessages (context order) to chat-completions messages."""
    out: list[dict[str, Any]] = []
    open_calls: dict[str, int] = {}  # tool call id -> index of its assistant message in out
    answered: set[str] = set()
    pending_images: list[dict[str, Any]] = []

    def close_open_calls() -> None:
        for call_id in list(open_calls):
            if call_id not in answered:
                out.append({"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT})
        open_calls.clear()
        if pending_images:
            out.append({"role": "user", "content": [*pending_images]})
            pending_images.clear()

    for m in messages:
        role = m.get("role")
        if role == "toolResult":
            call_id = str(m.get("toolCallId", ""))
            if call_id not in open_calls or call_id in answered:
                if diagnostics is not None:
                    diagnostics.append(f"tool result {call_id!r} has no preceding tool call; dropped")
                continue
            parts = _parts(m.get("content"))
            text = "\n".join(p["text"] for p in parts if p["type"] == "text") or "(empty result)"
            if m.get("isError"):
                text = f"[error] {text}"
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
            answered.add(call_id)
            pending_images.extend(p for p in parts if p["type"] == "image_url")
            continue
        close_open_calls()
        if role == "assistant":
            content = m.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
            texts = [str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"]
            calls = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "toolCall"]
            msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
            if calls:
                msg["tool_calls"] = [
                    {
                        "id": str(c.get("id", "")),
                        "type": "function",
                        "function": {
                            "name": str(c.get("name", "")),
                            "arguments": json.dumps(c.get("arguments", {}), ensure_ascii=False),
                        },
                    }
                    for c in calls
                ]
                for c in calls:
                    open_calls[str(c.get("id", ""))] = len(out)
                answered.difference_update(open_calls)
            if msg["content"] is None and not calls:
                continue  # an empty turn (thinking only, or aborted): nothing to send
            out.append(msg)
        elif role == "user" or role == "custom" or role == "hookMessage":
            out.append({"role": "user", "content": _simplify(_parts(m.get("content")))})
        elif role == "bashExecution":
            if m.get("excludeFromContext"):
                continue
            out.append({"role": "user", "content": bash_text(m)})
        elif role == "compactionSummary":
            out.append({"role": "user", "content": COMPACTION_PREFIX + str(m.get("summary", "")) + COMPACTION_SUFFIX})
        elif role == "branchSummary":
            out.append({"role": "user", "content": BRANCH_PREFIX + str(m.get("summary", "")) + BRANCH_SUFFIX})
        elif role == "system":
            text = _text_only(m.get("content"))
            sections = m.get("sections")
            if not text and isinstance(sections, Mapping):
                text = "\n\n".join(str(v) for v in sections.values() if isinstance(v, str))
            out.append({"role": "system", "content": text})
        elif diagnostics is not None:
            diagnostics.append(f"message role {role!r} is not sent to models; skipped")
    close_open_calls()
    return out
