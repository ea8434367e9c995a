"""``ctxd hook EVENT``: one Claude Code hook, reading the hook's JSON on stdin (see :mod:`ctxd.service.claude_hooks`).

A hook must never break Claude Code: whatever goes wrong (bad input, a missing transcript, a bug), the command
prints nothing, exits 0 and writes the error to ctxd's log, ``<state>/hooks.log`` (0600; ``<state>`` is
``$XDG_STATE_HOME/ctxd`` or ``~/.local/state/ctxd``), which also gets one line per handled event. Output is
written once, at the end, so a failure never leaves half a JSON object on stdout.

Start-up matters (PostToolUse runs after every tool call): this module imports only the standard library and
ctxd's store; each event imports what it needs, and nothing here loads litellm, pygls or the daemon.

Settings: ``claudeCode`` in ctxd's config file (``$CTXD_CONFIG`` or ``~/.config/ctxd/config.json``):
``toolOutputLimit`` (characters), ``contextWindow`` (tokens), ``factsChars``, ``archive`` (true); and the
daemon's ``toolOutputShare`` (0.3; ``CTXD_TOOL_OUTPUT_SHARE``). The tool-output limit: ``CTXD_TOOL_OUTPUT_LIMIT``,
else ``toolOutputLimit``, else the share of the model's window (:func:`ctxd.context.cut_rules.window_limit`, at
most 30,000 characters). The window: ``contextWindow``, else the one Claude Code works within when it is told one
(``CLAUDE_CODE_AUTO_COMPACT_WINDOW``, which Claude Code passes to its hooks), else unknown: Claude's models have
windows of 200,000 tokens or more (a hook's payload names no model), for which the share is above 30,000, so
30,000 it is. Each run also writes the settings the shell wrapper needs to ``<state>/hooks.env``
(:mod:`ctxd.service.claude_state`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from ctxd.store.dirs import archive_root, makedirs_private, state_dir

PRIVATE_MODE = 0o600

MAX_INPUT = 64 << 20
"""Bytes read from stdin at most (a tool's output can be large; anything beyond is not a hook payload)."""
LOG_MAX = 1 << 20
"""The log is rotated to ``hooks.log.1`` beyond this size."""
CLAUDE_WINDOW = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
"""The window (tokens) Claude Code works within when it is told one; its hooks inherit the variable."""


def log_path(environ: Mapping[str, str] | None = None) -> str:
    return os.path.join(state_dir(environ), "hooks.log")


def config_path(environ: Mapping[str, str] | None = None) -> str:
    """ctxd's config file: ``$CTXD_CONFIG`` or ``~/.config/ctxd/config.json``."""
    env = os.environ if environ is None else environ
    return env.get("CTXD_CONFIG") or os.path.join(os.path.expanduser("~"), ".config", "ctxd", "config.json")


def load_settings(environ: Mapping[str, str] | None = None, *, write_shell: bool = False) -> Any:
    """The hooks' settings from ctxd's config file and the environment (invalid values fall back to defaults).

    With ``write_shell``, also the wrapper's copy of them (:mod:`ctxd.service.claude_state`)."""
    from ctxd.context.cut_rules import CLAUDE_PREVIEWED, DEFAULT_SHARE, NEVER, WHOLE_PROMPT, window_limit
    from ctxd.service.claude_hooks import HookSettings

    env = os.environ if environ is None else environ
    section: dict[str, Any] = {}
    loaded: Any = None
    path = config_path(env)
    try:
        with open(path, encoding="utf-8") as f:
            loaded = json.load(f)
        if isinstance(loaded, dict) and isinstance(loaded.get("claudeCode"), dict):
            section = loaded["claudeCode"]
    except (OSError, ValueError):
        pass

    def positive(value: Any) -> int | None:
        try:
            number = int(value)
        except (TypeError, ValueError):
            return None
        return number if number > 0 else None

    def share_of(value: Any) -> float | None:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return number if 0 < number <= 1 else None

    top = loaded.get("toolOutputShare") if isinstance(loaded, dict) else None
    share = share_of(env.get("CTXD_TOOL_OUTPUT_SHARE")) or share_of(top) or DEFAULT_SHARE
    explicit, window = positive(section.get("toolOutputLimit")), positive(section.get("contextWindow"))
    configured = explicit or window_limit(window, share)
    fixed = explicit is not None or window is not None
    limit = configured if fixed else window_limit(positive(env.get(CLAUDE_WINDOW)), share)
    settings = HookSettings(
        state_dir=state_dir(env),
        archive_root=archive_root(env),
        tool_output_limit=positive(env.get("CTXD_TOOL_OUTPUT_LIMIT")) or limit,
        facts_chars=positive(section.get("factsChars")) or 9_000,
        archive=section.get("archive") is not False,
    )
    if write_shell:
        from ctxd.service.claude_state import write_shell_settings

        (preview,) = set(CLAUDE_PREVIEWED.values())  # the wrapper knows one size
        shell = {
            "config": path,
            "limit": str(configured),
            "window_fixed": "1" if fixed else "0",
            "share_permille": str(round(share * 1000)),
            "never": "|" + "|".join(sorted(NEVER)) + "|",
            "previewed": "|" + "|".join(sorted(CLAUDE_PREVIEWED)) + "|",
            "preview_chars": str(preview),
            "whole": WHOLE_PROMPT,
        }
        try:
            write_shell_settings(settings.state_dir, shell)
        except OSError as exc:  # the wrapper then starts ctxd for every event: slower, never wrong
            log(f"could not write {settings.state_dir}/hooks.env: {exc}", env)
    return settings


def log(line: str, environ: Mapping[str, str] | None = None) -> None:
    """Append a line to ctxd's hook log (created 0600); never raises."""
    try:
        path = log_path(environ)
        makedirs_private(os.path.dirname(path))
        try:
            if os.stat(path).st_size > LOG_MAX:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_MODE)
        try:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
            os.write(fd, f"{stamp} {line.rstrip()}\n".encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:
        pass


def run(event: str, stdin: IO[bytes] | None = None, stdout: IO[str] | None = None, agent: str = "claude") -> int:
    """Handle one hook event of ``agent`` (claude or codex); always returns 0."""
    started = time.perf_counter()
    session = "?"
    try:
        raw = (stdin or sys.stdin.buffer).read(MAX_INPUT)
        payload = json.loads(raw)
        if not isinstance(payload, dict):
            raise ValueError(f"the hook input is a JSON {type(payload).__name__}, not an object")
        session = str(payload.get("session_id") or "?")[:64]
        if agent == "codex":
            from ctxd.service.codex_hooks import handle
        else:
            from ctxd.service.claude_hooks import handle

        result = handle(event, payload, load_settings(write_shell=True))
    except BaseException as exc:  # even SystemExit/KeyboardInterrupt: Claude Code must go on
        import traceback

        detail = "".join(traceback.format_exception(exc)).rstrip().replace("\n", "\n    ")
        log(f"{event} session={session} error ({(time.perf_counter() - started) * 1000:.0f} ms): {detail}")
        return 0
    try:
        if result.stdout:
            out = stdout or sys.stdout
            out.write(result.stdout if result.stdout.endswith("\n") else result.stdout + "\n")
            out.flush()
    except Exception as exc:
        log(f"{event} session={session} could not write the output: {exc!r}")
        return 0
    if result.note:
        log(f"{event} session={session} {result.note} ({(time.perf_counter() - started) * 1000:.0f} ms)")
    return 0
