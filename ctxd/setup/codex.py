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

config.toml is edited as text: ctxd's tables sit between marker comments (:data:`BEGIN` / :data:`END`), so the
user's text is never rewritten and ``--uninstall`` takes exactly those blocks out (the file comes back byte for
byte when nothing else changed). A key the user already set is left alone, and setup says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tomllib
from typing import Any

from ctxd.setup import bundle, jsonfiles
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


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def without_blocks(text: str) -> str:
    return _BLOCK.sub("", text)


def wanted_config(ctx: Context, text: str, trust: dict[str, str], prompt: str | None) -> tuple[str, list[str]]:
    """config.toml with ctxd's blocks as they should be now, and notes on what the user set already."""
    rest = without_blocks(text)
    try:
        user = tomllib.loads(rest)
    except tomllib.TOMLDecodeError as exc:
        raise SetupError(f"{config_path(ctx)} is not valid TOML ({exc}); ctxd setup leaves it alone") from None
    notes: list[str] = []
    tables: list[str] = []
    if "ctxd" in (user.get("mcp_servers") or {}):
        notes.append(f"note: {config_path(ctx)} already has [mcp_servers.ctxd]: left as it is")
    else:
        tables.append(f'[mcp_servers.ctxd]\ncommand = {_toml_str(ctx.ctxd)}\nargs = ["mcp"]\n')
    states = (user.get("hooks") or {}).get("state") or {}
    for key, value in trust.items():
        if key in states:
            if states[key].get("trusted_hash") != value:
                notes.append(f"note: {config_path(ctx)} already has trust for {key}: review ctxd's hooks in /hooks")
            continue
        tables.append(f"[hooks.state.{_toml_str(key)}]\ntrusted_hash = {_toml_str(value)}\n")
    head = ""
    if prompt is not None:
        if "experimental_compact_prompt_file" in user or "compact_prompt" in user:
            notes.append(f"note: {config_path(ctx)} already sets a compaction prompt: left as it is")
        else:
            head = f"{BEGIN}: compaction prompt\nexperimental_compact_prompt_file = {_toml_str(prompt)}\n{END}\n"
    body = ""
    if tables:
        sep = "" if not rest or rest.endswith("\n\n") else "\n" if rest.endswith("\n") else "\n\n"
        body = f"{sep}{BEGIN} (`ctxd setup codex --uninstall` removes it)\n" + "\n".join(tables) + f"{END}\n"
    return head + rest + body, notes


def install(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    hooks_file, config_file = hooks_path(ctx), config_path(ctx)
    before_hooks = jsonfiles.load(hooks_file)
    settings, trust = wanted_hooks(ctx, before_hooks)
    want_prompt = ctx.compact_prompt or bool(record.extra.get("compactPrompt"))
    prompt = os.path.join(ctx.copy_dir(NAME), "compact-prompt.md") if want_prompt else None
    old_text = (jsonfiles.read_bytes(config_file) or b"").decode("utf-8")
    new_text, notes = wanted_config(ctx, old_text, trust, prompt)  # refuses a config.toml it cannot read
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
        for what, there in (
            ("[mcp_servers.ctxd] (ctxd mcp)", "[mcp_servers.ctxd]"),
            ("trust for ctxd's hooks ([hooks.state], as Codex's /hooks review records it)", "[hooks.state."),
            ("experimental_compact_prompt_file", "experimental_compact_prompt_file ="),
        ):
            ours_before, ours_now = _blocks(old_text), _blocks(new_text)
            if there in ours_now and (there not in ours_before or ours_before != ours_now):
                lines.append(f"{ctx.did('set', 'set')} {what} in {config_file}")
    record.copy = ctx.copy_dir(NAME) if prompt else ""
    record.extra = {"codexHome": codex_home(ctx), "compactPrompt": prompt is not None, "trust": sorted(trust)}
    return lines + notes


def _blocks(text: str) -> str:
    return "".join(m.group(0) for m in _BLOCK.finditer(text))


def _mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return 0o600


def uninstall(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    hooks_file, config_file = hooks_path(ctx), config_path(ctx)
    restored = jsonfiles.restore(record, hooks_file, dry_run=ctx.dry_run, strip=strip_ours)
    if restored:
        lines.append(restored)
    text = (jsonfiles.read_bytes(config_file) or b"").decode("utf-8")
    if BEGIN in text:
        kept = without_blocks(text)
        before = jsonfiles.bytes_before(record, config_file)
        if kept.strip() == "" and config_file in record.settings_before and before is None:
            if not ctx.dry_run:
                os.unlink(config_file)
            lines.append(f"{ctx.did('remove', 'removed')} {config_file} (it did not exist before setup)")
        else:
            same = before is not None and kept.rstrip("\n") == before.decode("utf-8").rstrip("\n")
            if not ctx.dry_run:
                atomic_write(config_file, before if same and before else kept.encode(), mode=_mode(config_file))
            done = "restored {} byte for byte as it was before setup" if same else "took ctxd's blocks out of {}"
            lines.append(("would " if ctx.dry_run else "") + done.format(config_file))
    copy = record.copy or ctx.copy_dir(NAME)
    if os.path.exists(copy):
        if not ctx.dry_run:
            remove_tree(copy)
        lines.append(f"{ctx.did('remove', 'removed')} {copy}")
    return lines
