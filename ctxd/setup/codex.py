"""``ctxd setup codex``: ctxd's hooks in ``$CODEX_HOME/hooks.json``, trusted, and its MCP server in config.toml.

- ``hooks.json`` (``$CODEX_HOME``, default ``~/.codex``): one group per event from integrations/codex/hooks.json,
  each running this ctxd by its absolute path (``/abs/ctxd hook --agent codex EVENT``), appended after the user's
  own groups, which stay as they are.
- Trust: Codex runs a hook of the user's hooks.json only when config.toml holds
  ``[hooks.state."<hooks.json>:<event>:<group>:<handler>"] trusted_hash = "sha256:..."`` equal to the hash of
  the hook as it is now (what its ``/hooks`` review writes). Setup records that trust for ctxd's own hooks only,
  with the hash Codex computes (:func:`trusted_hash`): sha256 of the compact, key-sorted JSON of
  ``{event_name, matcher?, hooks: [{type, command, timeout, async}]}``.
- ``[mcp_servers.ctxd]`` with ``command`` = this ctxd and ``args = ["mcp"]``.
- With ``--compact-prompt``: ``ctxd codex-prompt`` written to ``$XDG_DATA_HOME/ctxd/integrations/codex/
  compact-prompt.md`` and ``experimental_compact_prompt_file`` naming it (a top-level key, so its block goes
  first in config.toml).

config.toml is changed in place with tomlkit (:mod:`ctxd.setup.tomlfiles`): the user's comments, layout, inline
tables and dotted keys stay as they are, and ctxd's keys go where TOML allows them (into ``mcp_servers = {...}``
when the user wrote it inline). The keys ctxd added are recorded, and ``--uninstall`` takes exactly those out
(the file comes back byte for byte when nothing else changed). A key the user already set is left alone, and
setup says so. Setups before this one wrote their tables between marker comments (:data:`BEGIN` / :data:`END`):
those blocks are taken out first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Sequence
from typing import Any

from ctxd.setup import bundle, jsonfiles, tomlfiles
from ctxd.setup.base import Context, Record, SetupError, remove_tree, write_text
from ctxd.store.files import atomic_write

NAME = "codex"
BEGIN = "# >>> ctxd setup codex"
END = "# <<< ctxd setup codex"
_BLOCK = re.compile(rf"^{re.escape(BEGIN)}[^\n]*\n.*?^{re.escape(END)}[^\n]*\n?", re.S | re.M)
EVENT_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
}


def codex_home(ctx: Context) -> str:
    value = ctx.environ.get("CODEX_HOME", "")
    # Codex canonicalises an explicit CODEX_HOME, and its trust keys name the hooks file under that path.
    return os.path.realpath(value) if os.path.isabs(value) else os.path.join(ctx.home, ".codex")


def hooks_path(ctx: Context) -> str:
    return os.path.join(codex_home(ctx), "hooks.json")


def config_path(ctx: Context) -> str:
    return os.path.join(codex_home(ctx), "config.toml")


def detect(ctx: Context) -> str | None:
    return ctx.which("codex") or (codex_home(ctx) if os.path.isdir(codex_home(ctx)) else None)


def trusted_hash(event: str, handler: dict[str, Any], matcher: str | None = None) -> str:
    """The hash Codex records when the user trusts ``handler`` (a hooks.json command handler) for ``event``."""
    normalized = {
        "type": "command",
        "command": handler["command"],
        "timeout": max(1, int(handler.get("timeout", 600))),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def is_ours(handler: Any) -> bool:
    """Whether a hooks.json handler is one ctxd setup wrote (``<path>/ctxd hook --agent codex EVENT``)."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    return len(words) >= 4 and os.path.basename(words[0]) == "ctxd" and words[1:4] == ["hook", "--agent", "codex"]


def _template() -> dict[str, Any]:
    path = bundle.files(NAME).get("hooks.json")
    if path is None:
        raise SetupError("this ctxd has no Codex hooks file (ctxd/bundled/codex/hooks.json): reinstall ctxd")
    with open(path, encoding="utf-8") as f:
        hooks: dict[str, Any] = json.load(f)["hooks"]
    return hooks


def strip_ours(settings: dict[str, Any]) -> None:
    """Take ctxd's groups out of a hooks.json object (and events left empty by that)."""
    events = settings.get("hooks")
    if not isinstance(events, dict):
        return
    for event, groups in list(events.items()):
        if not isinstance(groups, list):
            continue
        kept = [g for g in groups if not (isinstance(g, dict) and any(is_ours(h) for h in g.get("hooks") or []))]
        if len(kept) != len(groups):
            events[event] = kept


def wanted_hooks(ctx: Context, current: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """hooks.json with ctxd's groups (after the user's) and ``{trust key: hash}`` for each of ctxd's handlers."""
    settings = json.loads(json.dumps(current))
    strip_ours(settings)
    events = settings.setdefault("hooks", {})
    if not isinstance(events, dict):
        raise SetupError(f"{hooks_path(ctx)}: `hooks` is not an object; ctxd setup leaves it alone")
    trust: dict[str, str] = {}
    for event, groups in _template().items():
        group = json.loads(json.dumps(groups[0]))
        for handler in group["hooks"]:
            handler["command"] = handler["command"].replace("ctxd ", shlex.quote(ctx.ctxd) + " ", 1)
        listed = events.setdefault(event, [])
        if not isinstance(listed, list):
            raise SetupError(f"{hooks_path(ctx)}: hooks.{event} is not a list; ctxd setup leaves it alone")
        for n, handler in enumerate(group["hooks"]):
            trust[f"{hooks_path(ctx)}:{EVENT_LABELS[event]}:{len(listed)}:{n}"] = trusted_hash(event, handler)
        listed.append(group)
    return settings, trust


def without_blocks(text: str) -> str:
    return _BLOCK.sub("", text)


MCP_PATH = ("mcp_servers", "ctxd")
PROMPT_PATH = ("experimental_compact_prompt_file",)
PROMPT_KEYS = ("experimental_compact_prompt_file", "compact_prompt")


def wanted_config(
    ctx: Context, text: str, trust: dict[str, str], prompt: str | None, ours: Sequence[Sequence[str]] = ()
) -> tuple[str, list[str], list[tuple[str, ...]], list[tuple[str, ...]]]:
    """config.toml with ctxd's keys as they should be now, notes on what the user set already, the keys that are
    ctxd's now and those of them this changes. ``ours``: the keys ctxd added before (changed or taken out as
    needed); any other key already there is the user's and left alone."""
    file = config_path(ctx)
    doc, user = tomlfiles.parse(file, without_blocks(text))
    mine = {tuple(p) for p in ours}
    wanted: list[tuple[tuple[str, ...], Any, str]] = [
        (MCP_PATH, {"command": ctx.ctxd, "args": ["mcp"]}, "already has [mcp_servers.ctxd]: left as it is")
    ]
    wanted += [(("hooks", "state", k), {"trusted_hash": v}, f"already has trust for {k}") for k, v in trust.items()]
    if prompt is not None:
        wanted.insert(0, (PROMPT_PATH, prompt, "already sets a compaction prompt: left as it is"))
    notes: list[str] = []
    changes: list[tuple[tuple[str, ...], Any]] = []
    now: list[tuple[str, ...]] = []
    for path, value, note in wanted:
        there = tomlfiles.get(user, path)
        user_set = there is not None and path not in mine
        if path == PROMPT_PATH and path not in mine and "compact_prompt" in user:
            user_set = True
        if user_set:
            if (
                path[:2] != ("hooks", "state")
                or not isinstance(there, dict)
                or there.get("trusted_hash") != value["trusted_hash"]
            ):
                review = ": review ctxd's hooks in /hooks" if path[0] == "hooks" else ""
                notes.append(f"note: {file} {note}{review}")
            continue
        now.append(path)
        if there != value:
            changes.append((path, value))
    gone = [p for p in mine if p not in now]
    for path in gone:
        tomlfiles.delete(file, doc, path, {})
    for path, value in changes:
        tomlfiles.put(file, doc, path, value)
    expected = tomlfiles.apply(tomlfiles.parse(file, doc.as_string())[1] if gone else user, changes)
    new_text = tomlfiles.dumps(file, doc, expected)
    changed = [path for path, _ in changes]
    return new_text if changes or gone or without_blocks(text) != text else text, notes, now, changed


def install(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    hooks_file, config_file = hooks_path(ctx), config_path(ctx)
    before_hooks = jsonfiles.load(hooks_file)
    settings, trust = wanted_hooks(ctx, before_hooks)
    want_prompt = ctx.compact_prompt or bool(record.extra.get("compactPrompt"))
    prompt = os.path.join(ctx.copy_dir(NAME), "compact-prompt.md") if want_prompt else None
    old_text = (jsonfiles.read_bytes(config_file) or b"").decode("utf-8")
    ours_before = [tuple(p) for p in record.extra.get("added") or []]
    new_text, notes, ours_now, changed = wanted_config(
        ctx, old_text, trust, prompt, ours_before
    )  # refuses what it cannot read
    if prompt is not None:
        from ctxd.service.codex_hooks import compact_prompt

        text = compact_prompt().rstrip("\n") + "\n"
        if jsonfiles.read_bytes(prompt) != text.encode():
            if not ctx.dry_run:
                write_text(prompt, text)
            lines.append(f"{ctx.did('write', 'wrote')} ctxd's compaction prompt to {prompt}")
    if settings != before_hooks:
        if not ctx.dry_run:
            jsonfiles.remember(record, hooks_file)
            jsonfiles.save(hooks_file, settings)
        verb = ctx.did("add", "added")
        lines.append(f"{verb} ctxd's hooks to {hooks_file} ({', '.join(_template())}), running {ctx.ctxd}")
    if new_text != old_text:
        if not ctx.dry_run:
            jsonfiles.remember(record, config_file)
            os.makedirs(codex_home(ctx), exist_ok=True)
            atomic_write(config_file, new_text.encode(), mode=_mode(config_file))
        for what, kind in (
            ("[mcp_servers.ctxd] (ctxd mcp)", MCP_PATH[0]),
            ("trust for ctxd's hooks ([hooks.state], as Codex's /hooks review records it)", "hooks"),
            ("experimental_compact_prompt_file", PROMPT_PATH[0]),
        ):
            if any(path[0] == kind for path in changed):
                lines.append(f"{ctx.did('set', 'set')} {what} in {config_file}")
    record.copy = ctx.copy_dir(NAME) if prompt else ""
    record.extra = {"codexHome": codex_home(ctx), "compactPrompt": prompt is not None, "trust": sorted(trust)}
    record.extra["added"] = [list(path) for path in ours_now]
    return lines + notes


def _mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return 0o600


def uninstall(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    hooks_file = hooks_path(ctx)
    restored = jsonfiles.restore(record, hooks_file, dry_run=ctx.dry_run, strip=strip_ours)
    if restored:
        lines.append(restored)
    line = _uninstall_config(ctx, record)
    if line:
        lines.append(line)
    copy = record.copy or ctx.copy_dir(NAME)
    if os.path.exists(copy):
        if not ctx.dry_run:
            remove_tree(copy)
        lines.append(f"{ctx.did('remove', 'removed')} {copy}")
    return lines


def _uninstall_config(ctx: Context, record: Record) -> str | None:
    """Take ctxd's keys (and an older setup's marked blocks) out of config.toml; what was done, in a line."""
    config_file = config_path(ctx)
    data = jsonfiles.read_bytes(config_file)
    ours = [tuple(p) for p in record.extra.get("added") or []]
    if data is None or (not ours and BEGIN.encode() not in data):
        return None
    verb = "would " if ctx.dry_run else ""
    text = data.decode("utf-8", errors="replace")
    before = jsonfiles.bytes_before(record, config_file)
    try:
        doc, _ = tomlfiles.parse(config_file, without_blocks(text))
        previous = tomlfiles.parse(config_file, before.decode("utf-8")) if before is not None else None
    except (SetupError, UnicodeDecodeError):
        return f"{verb}leave {config_file} alone: it is no longer valid TOML (ctxd's keys: {_dotted(ours)})"
    keep = previous[1] if previous is not None else {}
    if not any([tomlfiles.delete(config_file, doc, path, keep) for path in ours]) and BEGIN not in text:
        return None
    kept_text = doc.as_string()
    kept = tomlfiles.parse(config_file, kept_text)[1]
    if not kept and before is None and config_file in record.settings_before:
        if not ctx.dry_run:
            os.unlink(config_file)
        return f"{verb}remove {config_file} (it did not exist before setup)"
    same = before is not None and kept == keep
    if not ctx.dry_run:
        atomic_write(
            config_file, before if same and before is not None else kept_text.encode(), mode=_mode(config_file)
        )
    if same:
        return f"{verb}restore {config_file} byte for byte as it was before setup"
    return f"{verb}take ctxd's keys out of {config_file} ({_dotted(ours) or 'marked blocks'}); the rest stays"


def _dotted(paths: Sequence[Sequence[str]]) -> str:
    return ", ".join(".".join(p) for p in paths)
