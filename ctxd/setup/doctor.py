"""``ctxd doctor``: every installed integration checked end to end, each problem with what to do about it.

For each record ``ctxd setup`` left: the ctxd it names runs and is this version; its daemon answers
``initialize`` and ``session/list``; and the integration's own checks (Claude Code: the plugin is installed and
enabled at this version, and its installed hook runs ctxd and answers; pi: the package is listed and its daemon
command is this ctxd; VS Code: the extension at this version and the server command; Neovim: the plugin folder
and the ctxd it names; Codex: ctxd's hooks in hooks.json, trusted in config.toml, the SessionStart hook runs, the
MCP server; opencode: the plugin listed and pointing at this ctxd, the MCP server).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from typing import Any

import attrs

from ctxd.setup import claude_code, codex, jsonfiles, neovim, opencode, pi, vscode
from ctxd.setup.base import Context, Record, SetupError, installed_names, load_record

TIMEOUT = 30.0


@attrs.define
class Check:
    integration: str
    check: str
    ok: bool
    detail: str = ""
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def run(ctx: Context) -> list[Check]:
    checks: list[Check] = []
    daemons: dict[str, Check] = {}
    for name in installed_names(ctx):
        try:
            record = load_record(ctx, name)
        except SetupError as exc:
            checks.append(Check(name, "record", False, str(exc), f"ctxd setup {name}"))
            continue
        if record is None:
            continue
        again = f"run `ctxd setup {name}` again"
        checks += _ctxd(name, record, ctx, again)
        if os.access(record.ctxd, os.X_OK):
            if record.ctxd not in daemons:
                daemons[record.ctxd] = _daemon(record.ctxd, ctx)
            checks.append(attrs.evolve(daemons[record.ctxd], integration=name))
        specific = {
            "claude-code": _claude_code,
            "pi": _pi,
            "vscode": _vscode,
            "neovim": _neovim,
            "codex": _codex,
            "opencode": _opencode,
        }.get(name)
        if specific is not None:
            try:
                checks += specific(ctx, record, again)
            except SetupError as exc:
                checks.append(Check(name, "integration", False, str(exc), again))
    return checks


def _ctxd(name: str, record: Record, ctx: Context, again: str) -> list[Check]:
    if not (os.path.isfile(record.ctxd) and os.access(record.ctxd, os.X_OK)):
        return [
            Check(name, "ctxd command", False, f"{record.ctxd or '(none)'} is gone", f"reinstall ctxd, then {again}")
        ]
    try:
        out = subprocess.run(
            [record.ctxd, "--version"], capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [
            Check(name, "ctxd command", False, f"{record.ctxd} does not run: {exc}", f"reinstall ctxd, then {again}")
        ]
    version = out.stdout.strip().removeprefix("ctxd ")
    if out.returncode != 0 or version != ctx.version:
        detail = f"{record.ctxd} is ctxd {version or '?'} (exit {out.returncode}); this is ctxd {ctx.version}"
        return [Check(name, "ctxd command", False, detail, again)]
    return [Check(name, "ctxd command", True, f"{record.ctxd} (ctxd {version})")]


def _daemon(ctxd: str, ctx: Context) -> Check:
    from ctxd.client import CtxdClient

    async def ask(root: str) -> tuple[dict[str, Any], Any]:
        options = {"roots": [root], "watch": False, "transcriptRoots": [], "archiveRoots": []}
        async with CtxdClient([ctxd, "serve"], initialization_options=options, stderr=subprocess.DEVNULL) as client:
            listed = await asyncio.wait_for(client.request("session/list", {}), TIMEOUT)
            return client.server_info, listed

    with tempfile.TemporaryDirectory(prefix="ctxd-doctor-") as root:
        try:
            info, listed = asyncio.run(asyncio.wait_for(ask(root), TIMEOUT * 2))
        except Exception as exc:
            return Check(
                "", "daemon", False, f"`{ctxd} serve` did not answer: {exc!r}", f"run `{ctxd} serve` to see why"
            )
    version = str(info.get("version", "?"))
    if version != ctx.version:
        return Check("", "daemon", False, f"the daemon is ctxd {version}; this is {ctx.version}", "ctxd setup again")
    return Check("", "daemon", True, f"initialize and session/list answered (ctxd {version}, {type(listed).__name__})")


def _claude_code(ctx: Context, record: Record, again: str) -> list[Check]:
    name = "claude-code"
    binary = ctx.which("claude") or str(record.extra.get("claude", ""))
    if not os.access(binary, os.X_OK):
        return [Check(name, "Claude Code", False, "no `claude` command found", "install Claude Code or put it on PATH")]
    _, plugins = claude_code.state(ctx, binary)
    ours = [p for p in plugins if p.get("id") == claude_code.PLUGIN_ID]
    if not ours:
        return [Check(name, "plugin", False, f"{claude_code.PLUGIN_ID} is not installed in Claude Code", again)]
    plugin = ours[0]
    checks = [
        Check(
            name,
            "plugin",
            bool(plugin.get("enabled")),
            f"{plugin['id']} {plugin.get('version')}, {'enabled' if plugin.get('enabled') else 'disabled'}",
            f"claude plugin enable {plugin['id']}",
        ),
        Check(
            name,
            "plugin version",
            plugin.get("version") == ctx.version,
            f"installed {plugin.get('version')}, ctxd {ctx.version}",
            again,
        ),
    ]
    checks += [
        Check(
            name,
            "other ctxd plugins",
            False,
            f"{p['id']} is installed too: every hook would run twice",
            f"claude plugin uninstall {p['id']}",
        )
        for p in plugins
        if str(p.get("id", "")).startswith("ctxd@") and p.get("id") != claude_code.PLUGIN_ID
    ]
    checks.append(_hook(ctx, str(plugin.get("installPath", "")), again))
    return checks


def _hook(ctx: Context, root: str, again: str) -> Check:
    """The installed hook, as Claude Code runs it (no CTXD_BIN, a bare PATH), answers a PostToolUse whose output
    is over the limit with the cut output."""
    hook = os.path.join(root, "bin", "ctxd-hook")
    if not os.access(hook, os.X_OK):
        return Check("claude-code", "hook", False, f"{hook} is missing", again)
    payload = {
        "session_id": "ctxd-doctor",
        "hook_event_name": "PostToolUse",
        "tool_name": "mcp__ctxd_doctor__echo",
        "tool_input": {},
        "tool_response": "ctxd doctor\n" * 6_000,
        "cwd": ctx.home,
        "transcript_path": "",
    }
    with tempfile.TemporaryDirectory(prefix="ctxd-doctor-") as state:
        env = {"HOME": ctx.home, "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": state, "CTXD_TOOL_OUTPUT_LIMIT": "2000"}
        try:
            done = subprocess.run(
                [hook, "PostToolUse"],
                input=json.dumps(payload),
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Check("claude-code", "hook", False, f"{hook} did not run: {exc}", again)
        log = os.path.join(state, "ctxd", "hooks.log")
        logged = jsonfiles.read_bytes(log) or b""
    try:
        answer = json.loads(done.stdout)["hookSpecificOutput"]["updatedToolOutput"]
        ok = isinstance(answer, str) and len(answer) < len(str(payload["tool_response"]))
    except (ValueError, KeyError, TypeError):
        ok = False
    if ok:
        return Check("claude-code", "hook", True, f"{hook} ran ctxd and answered")
    return Check(
        "claude-code",
        "hook",
        False,
        f"{hook} gave no answer (exit {done.returncode}); log: {logged[-500:].decode(errors='replace')}",
        again,
    )


def _pi(ctx: Context, record: Record, again: str) -> list[Check]:
    name = "pi"
    settings = jsonfiles.load(pi.settings_path(ctx))
    listed = [s for s, folder in pi.listed_sources(ctx, settings) if folder == os.path.realpath(record.copy)]
    checks = [
        Check(
            name,
            "package",
            bool(listed) and os.path.isdir(record.copy),
            f"{record.copy} {'listed in' if listed else 'missing from'} {pi.settings_path(ctx)}",
            again,
        )
    ]
    try:
        with open(os.path.join(record.copy, "package.json"), encoding="utf-8") as f:
            version = json.load(f).get("version")
    except (OSError, ValueError):
        version = None
    checks.append(
        Check(name, "package version", version == ctx.version, f"package {version}, ctxd {ctx.version}", again)
    )
    command = jsonfiles.get(settings, pi.COMMAND_KEY)
    checks.append(Check(name, "daemon command", command == [record.ctxd, "serve"], f"ctxd.command = {command}", again))
    return checks


def _vscode(ctx: Context, record: Record, again: str) -> list[Check]:
    name = "vscode"
    binary = ctx.which(*vscode.EDITORS) or str(record.extra.get("editor", ""))
    if not os.access(binary, os.X_OK):
        return [Check(name, "VS Code", False, "no `code` command found", "put VS Code's `code` on PATH")]
    found = vscode.installed_extensions(ctx, binary)
    want = f"{vscode.EXTENSION_ID}@{ctx.version}"
    checks = [Check(name, "extension", want in found, f"installed: {', '.join(found) or 'none'}", again)]
    settings = jsonfiles.load(vscode.settings_path(ctx, binary), comments=True)
    command = jsonfiles.get(settings, vscode.COMMAND_KEY)
    checks.append(
        Check(
            name,
            "server command",
            isinstance(command, str) and record.ctxd in command,
            f"ctxd.server.command = {command}",
            again,
        )
    )
    return checks


def _neovim(ctx: Context, record: Record, again: str) -> list[Check]:
    installed = os.path.join(record.copy, "lua", "ctxd", "installed.lua")
    text = (jsonfiles.read_bytes(installed) or b"").decode(errors="replace")
    if not text:
        return [Check("neovim", "plugin", False, f"{installed} is missing", again)]
    ok = os.path.isfile(os.path.join(record.copy, "plugin", "ctxd.lua")) and record.ctxd in text
    return [Check("neovim", "plugin", ok, f"{record.copy} (Neovim loads it; spec: {neovim.spec(record.copy)})", again)]


def _codex(ctx: Context, record: Record, again: str) -> list[Check]:
    import shlex
    import tomllib

    name = "codex"
    hooks = jsonfiles.load(codex.hooks_path(ctx)).get("hooks") or {}
    try:
        config = tomllib.loads((jsonfiles.read_bytes(codex.config_path(ctx)) or b"").decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return [Check(name, "config", False, f"{codex.config_path(ctx)} is not valid TOML: {exc}", "fix it by hand")]
    states = (config.get("hooks") or {}).get("state") or {}
    ours, untrusted = [], []
    for event, groups in hooks.items():
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            for h, handler in enumerate(group.get("hooks") or [] if isinstance(group, dict) else []):
                if codex.is_ours(handler) and event in codex.EVENT_LABELS:
                    ours.append((event, handler))
                    key = f"{codex.hooks_path(ctx)}:{codex.EVENT_LABELS[event]}:{g}:{h}"
                    if (states.get(key) or {}).get("trusted_hash") != codex.trusted_hash(event, handler):
                        untrusted.append(event)
    stale = [e for e, h in ours if shlex.split(h["command"])[0] != record.ctxd]
    checks = [
        Check(name, "hooks", bool(ours) and not stale, f"{len(ours)} ctxd hooks in {codex.hooks_path(ctx)}", again),
        Check(
            name,
            "hook trust",
            bool(ours) and not untrusted,
            f"untrusted: {', '.join(untrusted)}" if untrusted else "Codex trusts ctxd's hooks",
            f"{again}, or trust them in Codex's /hooks view",
        ),
    ]
    start = [h for e, h in ours if e == "SessionStart"]
    if start:
        payload = {"session_id": "ctxd-doctor", "hook_event_name": "SessionStart", "source": "startup", "cwd": ctx.home}
        with tempfile.TemporaryDirectory(prefix="ctxd-doctor-") as state:
            env = {"HOME": ctx.home, "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": state}
            try:
                done = subprocess.run(
                    ["/bin/sh", "-c", start[0]["command"]],
                    input=json.dumps(payload),
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=TIMEOUT,
                )
                detail = f"exit {done.returncode} {done.stderr.strip()[-300:]}".strip()
                ok = done.returncode == 0
            except (OSError, subprocess.TimeoutExpired) as exc:
                ok, detail = False, str(exc)
        checks.append(Check(name, "hook", ok, f"SessionStart hook ran with a bare PATH: {detail}", again))
    server = (config.get("mcp_servers") or {}).get("ctxd") or {}
    checks.append(
        Check(
            name,
            "mcp server",
            server.get("command") == record.ctxd and server.get("args") == ["mcp"],
            f"[mcp_servers.ctxd] command = {server.get('command')}, args = {server.get('args')}",
            again,
        )
    )
    return checks


def _opencode(ctx: Context, record: Record, again: str) -> list[Check]:
    name = "opencode"
    config = jsonfiles.load(opencode.config_path(ctx), comments=True)
    url = opencode.plugin_url(record.copy)
    index = (jsonfiles.read_bytes(os.path.join(record.copy, "src", "index.ts")) or b"").decode(errors="replace")
    listed = url in (config.get("plugin") or [])
    checks = [
        Check(name, "plugin", listed and bool(index), f"{url} {'listed' if listed else 'missing'}", again),
        Check(name, "daemon command", json.dumps(record.ctxd) in index, f"the plugin copy runs {record.ctxd}", again),
    ]
    mcp = jsonfiles.get(config, opencode.MCP_KEY) or {}
    ok = mcp.get("command") == [record.ctxd, "mcp"]
    checks.append(Check(name, "mcp server", ok, f"mcp.ctxd command = {mcp.get('command')}", again))
    return checks
