"""History answers as plain text, for a person (``ctxd search``) or a model (``ctxd mcp``'s tools).

Rendered from the same JSON results ``history/search`` and ``history/expand`` answer with."""

from __future__ import annotations

from typing import Any


def _hit_head(hit: dict[str, Any]) -> str:
    session = hit["session"]
    role = hit["role"] + (f" ({hit['toolName']})" if hit.get("toolName") else "")
    away = "  [summarised away]" if hit.get("summarized") else ""
    when = f"  {hit['timestamp']}" if hit.get("timestamp") else ""
    who = f"  {hit['user']}@{hit['machine']}  project {hit['project']}" if hit.get("project") else ""
    anchor = hit.get("anchor") or hit["entryId"] or f"L{hit['line']}"
    return f"{session['path']}:{hit['line']}  {role}  entry {anchor}  session {session['id']}{when}{who}{away}"


def search_text(result: dict[str, Any]) -> str:
    """Ranked hits, best first: where (file:line, session, entry), who, and the matching snippet."""
    lines = []
    for n, hit in enumerate(result["hits"], 1):
        lines.append(f"{n}. {_hit_head(hit)}")
        lines.append("   " + " ".join(str(hit["snippet"]).split()))
    if not result["hits"]:
        lines.append(f"no matches for {result['query']!r}")
    if result.get("queued"):
        lines.append(f"({result['queued']} entries of this machine are still waiting to be published)")
    if result.get("indexing"):
        lines.append("(indexing is still in progress: sessions written since the last pass may be missing)")
    return "\n".join(lines)


def expand_text(result: dict[str, Any]) -> str:
    """The original messages, each under a line naming its entry, role and time."""
    session = result["session"]
    count = len(result["messages"])
    lines = [f"{result['kind']} in {session['path']} (session {session['id']}): {count} of {result['totalMessages']}"]
    for m in result["messages"]:
        tool = f" ({m['toolName']})" if m.get("toolName") else ""
        when = f" {m['timestamp']}" if m.get("timestamp") else ""
        start = f" from char {m['fromChar']}" if m.get("fromChar") else ""
        lines.append(f"--- {m['role']}{tool} entry {m['entryId']} line {m['line']}{when}{start}")
        lines.append(m["text"] + (" [cut: more with the cursor]" if m.get("truncated") else ""))
    if result.get("truncated"):
        lines.append(f"(more: expand again with cursor {result['nextCursor']!r})")
    if result.get("previousCompactionId"):
        lines.append(f"(earlier history: expand the previous compaction {result['previousCompactionId']})")
    facts = result.get("facts")
    if isinstance(facts, dict) and facts.get("text"):
        lines.append("--- the session's must-keep facts, as published")
        lines.append(str(facts["text"]))
    return "\n".join(lines)
