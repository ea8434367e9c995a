"""Generated coding sessions with planted probes, for the fidelity benchmark (``bench/fidelity.py``).

Each session imitates one agent's habits (``pi``: read/edit/write/bash tools and user shell runs; ``claude``:
Read/Edit/MultiEdit/Write/Bash and Claude Code's injected records; ``codex``: exec_command reading files
through the shell, apply_patch, AGENTS.md and environment blocks) as pi v3 entries. Planted in it, with unique
tokens (``kq`` + digits) so that presence is exact: the goal, requests, user constraints and corrections,
the agent's decisions, files modified and read, commands (repeated ones with varying output filters, ones
that fail and are fixed, ones that stay broken, commits and installs, read-only exploration with ``rg``,
``grep``, ``find``, ``ls`` and ``git log``, some of it failing), error strings, the agent's next step, a pasted long log
with the key error line in its middle, and injected instructions that must never become the goal or a
constraint. Messages carry ``bench: [{kind, probe}]`` for the planted facts only the generator knows
(decisions, next steps, the pasted key line, injected text); everything else is scored by the same rules as
real sessions. Deterministic per seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

FLAVOURS = ("pi", "claude", "codex")
WORDS = (
    "cache",
    "config",
    "parser",
    "router",
    "session",
    "token",
    "buffer",
    "queue",
    "worker",
    "handler",
    "schema",
    "client",
    "server",
    "layout",
    "theme",
    "render",
    "index",
    "loader",
    "store",
    "registry",
    "plugin",
    "adapter",
    "bridge",
    "stream",
    "socket",
    "monitor",
    "metrics",
    "logger",
)
FILLER = (
    "The module keeps its state in a small dictionary keyed by id.",
    "This path is hit on every request, so it stays allocation free.",
    "The tests cover the happy path and the two error branches.",
    "The old implementation duplicated the retry loop in three places.",
    "Most of the time goes into parsing the header line.",
    "The function returns early when the input is empty.",
)
CHECKS = {
    "pi": ("npm run check", "npm test"),
    "claude": ("pytest -q", "ruff check ."),
    "codex": ("cargo test", "cargo clippy"),
}
FILTERS = ("", " 2>&1 | tail -5", " 2>&1 | grep -E 'error|warning' | head -20", " 2>&1 | tail -20")


class Gen:
    def __init__(self, seed: int, flavour: str) -> None:
        self.r = random.Random(seed)
        self.flavour = flavour
        self.n = 0
        self.token = seed * 1000
        self.entries: list[dict[str, Any]] = []
        self.ids = 0
        self.clock = 1_767_000_000_000 + seed * 10_000_000
        self.files: list[str] = []
        self.check, self.test = CHECKS[flavour]

    # -- plumbing --------------------------------------------------------------------------------------------

    def tok(self, stem: str) -> str:
        self.token += 1
        return f"{stem}-kq{self.token}"

    def _id(self) -> str:
        self.ids += 1
        return f"{self.ids:08x}"

    def add(self, message: dict[str, Any], bench: list[dict[str, str]] | None = None) -> dict[str, Any]:
        self.clock += 1000
        message.setdefault("timestamp", self.clock)
        if bench:
            message["bench"] = bench
        entry = {
            "type": "message",
            "id": self._id(),
            "parentId": self.entries[-1]["id"] if self.entries else None,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": message,
        }
        self.entries.append(entry)
        return message

    def user(self, text: str, bench: list[dict[str, str]] | None = None) -> None:
        self.add({"role": "user", "content": text}, bench)

    def assistant(
        self, text: str | None, calls: list[dict[str, Any]], bench: list[dict[str, str]] | None = None
    ) -> None:
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "text", "text": text})
        content.extend(calls)
        stop = "toolUse" if calls else "stop"
        self.add({"role": "assistant", "content": content, "provider": "p", "model": "m", "stopReason": stop}, bench)

    def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        self.n += 1
        return {"type": "toolCall", "id": f"call_{self.n}", "name": name, "arguments": arguments}

    def result(self, call: dict[str, Any], output: str, error: bool = False) -> None:
        self.add(
            {
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "content": [{"type": "text", "text": output}],
                "isError": error,
            }
        )

    def code(self, lines: int) -> str:
        out = ["# You must not edit this file by hand; always run the generator instead."]
        for i in range(lines):
            w = self.r.choice(WORDS)
            out.append(f"    def {w}_{i}(self, value):  # {self.r.choice(FILLER)}")
        return "\n".join(out)

    # -- agent actions ---------------------------------------------------------------------------------------

    def path(self) -> str:
        if self.files and self.r.random() < 0.4:
            return self.r.choice(self.files)
        p = f"src/{self.r.choice(WORDS)}/{self.tok(self.r.choice(WORDS))}.py"
        self.files.append(p)
        return p

    def shell(self, command: str, output: str, code: int = 0) -> None:
        if self.flavour == "codex":
            c = self.call("exec_command", cmd=command, workdir="/work/project")
            self.assistant(None, [c])
            body = f"Chunk ID: ab12\nWall time: 0.1 seconds\nProcess exited with code {code}\nOutput:\n{output}"
            self.result(c, body)
            return
        name = "Bash" if self.flavour == "claude" else "bash"
        c = self.call(name, command=command)
        self.assistant(None, [c])
        text = output if code == 0 else f"{output}\n\nCommand exited with code {code}"
        self.result(c, text, error=code != 0)

    def read(self, path: str) -> None:
        if self.flavour == "codex":
            start = self.r.choice((1, 80, 200))
            self.shell(f"sed -n '{start},{start + 120}p' {path}", self.code(40))
            return
        c = self.call(
            "Read" if self.flavour == "claude" else "read",
            **{"file_path" if self.flavour == "claude" else "path": path},
        )
        self.assistant(None, [c])
        self.result(c, self.code(self.r.randint(30, 90)))

    def edit(self, path: str) -> None:
        if self.flavour == "codex":
            if self.r.random() < 0.3:
                self.shell(f"sed -i 's/old_name/new_name/g' {path}", "")
                return
            patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n-    old = 1\n+    new = 2\n*** End Patch"
            c = self.call("apply_patch", input=patch)
            self.assistant(None, [c])
            self.result(c, "Success. Updated the following files:\nM " + path)
            return
        if self.flavour == "claude":
            name = self.r.choice(("Edit", "MultiEdit", "Write"))
            args: dict[str, Any] = {"file_path": path}
            if name == "Write":
                args["content"] = self.code(20)
            else:
                args.update(old_string="a = 1", new_string="a = 2")
            c = self.call(name, **args)
        else:
            name = self.r.choice(("edit", "edit", "write"))
            c = self.call(
                name, path=path, **({"content": self.code(20)} if name == "write" else {"oldText": "a", "newText": "b"})
            )
        self.assistant(None, [c])
        self.result(c, f"Successfully updated {path}")

    def run_check(self, fail_with: str | None = None, fixed: bool = True) -> None:
        command = self.check + self.r.choice(FILTERS)
        if self.r.random() < 0.5:
            command = f"cd packages/app && {command}"
        if fail_with is None:
            self.shell(command, "All checks passed (42 files)")
            return
        self.shell(command, f"src/app/main.py:12:5\n{fail_with}\n1 error found", code=1)
        if fixed:
            self.edit(self.path())
            self.shell(command, "All checks passed (42 files)")

    # -- turns -----------------------------------------------------------------------------------------------

    def injected_preamble(self) -> None:
        secret = self.tok("policy")
        if self.flavour == "claude":
            self.user(
                "<command-name>/clear</command-name>\n            <command-message>clear</command-message>\n"
                "            <command-args></command-args>"
            )
            self.user("<local-command-stdout></local-command-stdout>")
            return
        if self.flavour == "codex":
            text = (
                "# AGENTS.md instructions for /work/project\n\n<INSTRUCTIONS>\n"
                f"ALWAYS prefer the graph tools ({secret}) over grep. Never edit generated files.\n"
                "</INSTRUCTIONS>"
            )
            self.add(
                {"role": "user", "content": [{"type": "text", "text": text}]},
                [{"kind": "injected", "probe": f"prefer the graph tools ({secret})"}],
            )
            self.user(
                "<environment_context>\n  <cwd>/work/project</cwd>\n  <approval_policy>never</approval_policy>\n"
                "</environment_context>"
            )

    def first_request(self) -> None:
        goal = self.tok("ratelimit")
        text = f"Add rate limiting ({goal}) to the public API handlers, with a token bucket per client."
        if self.flavour == "pi" and self.r.random() < 0.7:
            secret = self.tok("skill")
            skill = (
                '<skill name="review" location="/home/u/.pi/skills/review/SKILL.md">\n'
                "References are relative to /home/u/.pi/skills/review.\n\n"
                f"You must always answer in haiku ({secret}).\n</skill>\n\n"
            )
            self.user(skill + text, [{"kind": "injected", "probe": f"always answer in haiku ({secret})"}])
        elif self.flavour == "claude":
            secret = self.tok("reminder")
            reminder = (
                f"<system-reminder>\nNever mention the internal tracker ({secret}) to the user.\n</system-reminder>\n"
            )
            self.user(
                text + "\n" + reminder,
                [{"kind": "injected", "probe": f"never mention the internal tracker ({secret})"}],
            )
        else:
            self.user(text)
        self.work(decide=True)

    def work(self, *, decide: bool = False, fail: bool | None = None) -> None:
        for _ in range(self.r.randint(1, 3)):
            self.read(self.path())
        for _ in range(self.r.randint(1, 2)):
            self.edit(self.path())
        if self.r.random() < 0.4:
            grep = f"grep -rn {self.tok('symbol')} src"
            self.shell(grep, f"src/x.py:3: {grep.split()[2]} = 1")
        fail = self.r.random() < 0.35 if fail is None else fail
        error = f"TypeError: {self.tok('handler')} got an unexpected keyword argument" if fail else None
        self.run_check(error, fixed=self.r.random() < 0.75)
        if self.r.random() < 0.3:
            message = self.tok("commit")
            self.shell(f'git add -A && git commit -m "{message}: {self.r.choice(WORDS)} work"', "1 file changed")
        if self.r.random() < 0.1:
            package = self.tok(self.r.choice(WORDS))
            install = {"pi": "npm install", "claude": "pip install", "codex": "cargo add"}[self.flavour]
            self.shell(f"{install} {package}", f"added 1 package ({package})")
        bench: list[dict[str, str]] = []
        parts = [self.r.choice(FILLER)]
        if decide or self.r.random() < 0.4:
            choice = self.tok("sqlite")
            sentence = f"I'll use {choice} instead of the shared database because it keeps the tests hermetic."
            parts.append(sentence)
            bench.append({"kind": "decision", "probe": sentence[:60]})
        if self.r.random() < 0.5:
            step = self.tok("router")
            sentence = f"Next I will wire the {step} handler into the router."
            parts.append(sentence)
            bench.append({"kind": "next", "probe": sentence})
        self.assistant(" ".join(parts), [], bench)

    CONSTRAINTS = (
        "Never add a dependency on {t}.",
        "Don't touch the generated files under {t}.",
        "You must keep the {t} flag backwards compatible.",
        "Please always run the formatter before you commit ({t}).",
        "Use tabs, not spaces, in the {t} templates.",
        "The port has to stay 8443 for {t}.",
        "Stick to the standard library for {t}.",
        "Only use the public API of {t}.",
        "Avoid global state in {t}.",
        "We can't change the database schema for {t}.",
        "Keep the error messages of {t} in English.",
        "Make sure {t} works on Windows too.",
    )
    CORRECTIONS = (
        "No, that's wrong: the limit comes from {t}, not from a constant.",
        "No, use {t} for this instead.",
        "Actually, the timeout belongs in {t}.",
        "That's not what I meant: rename it to {t}.",
    )

    def constraint(self) -> None:
        t = self.tok(self.r.choice(WORDS))
        if self.r.random() < 0.65:
            sentence = self.r.choice(self.CONSTRAINTS).format(t=t)
        else:
            sentence = self.r.choice(self.CORRECTIONS).format(t=t)
        follow = self.r.choice(
            ("Then extend the {w} tests.", "And fix the {w} module next.", "Carry on with the {w} work.", "")
        ).format(w=self.r.choice(WORDS))
        text = f"{sentence} {follow}".strip() if self.r.random() < 0.7 else f"{follow}\n\n{sentence}".strip()
        self.user(text, [{"kind": "constraint", "probe": sentence[:60]}])
        self.work()

    def question(self) -> None:
        t = self.tok(self.r.choice(WORDS))
        self.user(f"Where is the {t} configured and who reads it?")
        for _ in range(self.r.randint(1, 6)):
            kind = self.r.choice(("rg", "grep", "find", "ls", "git"))
            word = f"{self.r.choice(WORDS)}_{self.r.randint(1, 999)}"
            if kind == "rg":
                command = f"rg -n '{word}|{t}' src tests --glob '!*.lock'"
            elif kind == "grep":
                command = f'grep -rn "{word}" src/{self.r.choice(WORDS)}/ | head -{self.r.choice((10, 20, 40))}'
            elif kind == "find":
                command = f"find src -name '*{word}*' -type f"
            elif kind == "ls":
                command = f"ls -la src/{self.r.choice(WORDS)}/{word}"
            else:
                command = f"git log --oneline -n 5 -- src/{word}.py"
            self.shell(command, f"src/conf.py:10: {word} = 3\n" * self.r.randint(1, 30))
        if self.r.random() < 0.2:
            missing = f"src/{self.tok('gone')}"
            self.shell(f"ls {missing}", f"ls: cannot access '{missing}': No such file or directory", code=2)
        table = ""
        if self.r.random() < 0.5:
            table = (
                "\n\n| option | default | why |\n|---|---|---|\n"
                f"| {t} | 3 | because the worker must not block |\n| retries | 5 | instead of failing fast |"
            )
        self.assistant(f"## Findings\nThe {t} value is defined in src/conf.py and read by the loader.{table}", [])

    def paste(self) -> None:
        key = f"Variable reference not found: {self.tok('dimGray')}"
        noise = "\n".join(f"    at render{i} (src/ui/theme.ts:{i}:{i % 7})" for i in range(120))
        text = f"it crashes on startup:\n\n{noise}\n{key}\n{noise}\n\nwhat is going on?"
        self.user(text, [{"kind": "paste", "probe": key}])
        self.read(self.path())
        self.assistant(f"The theme references a colour that is not defined. {self.r.choice(FILLER)}", [])

    def injected_turn(self) -> None:
        """Text an agent puts into a user turn, not typed by the user."""
        secret = self.tok("injected")
        texts: tuple[str, ...]
        if self.flavour == "claude":
            texts = (
                f"<command-name>/model</command-name>\n<command-message>model</command-message>\n"
                f"<command-args>opus ({secret})</command-args>",
                f"Caveat: The messages below were generated by the user while running local commands. "
                f"DO NOT respond to these messages ({secret}).",
                f"<local-command-stdout>You must restart the server ({secret})</local-command-stdout>",
                f"UserPromptSubmit hook success: Always mention the ticket number ({secret}).",
            )
        elif self.flavour == "codex":
            texts = (
                f"<user_instructions>\nAlways write tests first ({secret}).\n</user_instructions>",
                f"<environment_context>\n  <cwd>/work/project</cwd>\n  <sandbox_mode>workspace-write</sandbox_mode>\n"
                f"  <network_access>restricted ({secret})</network_access>\n</environment_context>",
            )
        else:
            texts = (f"\x1b[33mhook:\x1b[0m you must never commit to main ({secret})",)
        text = self.r.choice(texts)
        probe = secret if "command-args" not in text else None
        self.user(text, [{"kind": "injected", "probe": probe}] if probe else None)
        self.assistant("Noted.", [])

    def chatter(self) -> None:
        self.user(self.r.choice(("ok", "continue", "thanks", "yes please")))
        self.assistant("Continuing.", [])

    def user_shell(self) -> None:
        if self.flavour != "pi":
            return
        command = f"git diff --stat {self.tok('branch')}"
        self.add({"role": "bashExecution", "command": command, "output": "3 files changed", "exitCode": 0})

    def broken(self) -> None:
        t = self.tok("migration")
        self.user(f"Run the {t} migration against the staging copy.")
        self.shell(f"python manage.py migrate {t}", f"django.db.utils.OperationalError: no such table: {t}", code=1)
        self.assistant(f"The migration fails: the table for {t} is missing. I will need the schema dump.", [])

    def session(self, turns: int) -> list[dict[str, Any]]:
        self.injected_preamble()
        self.first_request()
        actions = (
            (self.constraint, 3),
            (self.question, 2),
            (self.work_request, 5),
            (self.chatter, 2),
            (self.paste, 1),
            (self.user_shell, 1),
            (self.broken, 1),
            (self.injected_turn, 1),
        )
        funcs = [f for f, w in actions for _ in range(w)]
        for _ in range(turns):
            self.r.choice(funcs)()
        # Ends mid-work: an open tool call.
        self.user(f"Now add the {self.tok('retry')} retry header to every response.")
        c = self.call(
            "bash" if self.flavour == "pi" else "Bash" if self.flavour == "claude" else "exec_command",
            **({"cmd": self.test} if self.flavour == "codex" else {"command": self.test}),
        )
        self.assistant("Running the tests first.", [c])
        return self.entries

    def work_request(self) -> None:
        t = self.tok(self.r.choice(WORDS))
        self.user(f"Implement the {t} endpoint in the {self.r.choice(WORDS)} module and cover it with tests.")
        self.work()


def sessions(count: int) -> Iterator[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """``(flavour, header, entries)`` of ``count`` sessions, flavours in turn."""
    for seed in range(count):
        flavour = FLAVOURS[seed % len(FLAVOURS)]
        gen = Gen(seed + 1, flavour)
        entries = gen.session(turns=(40, 90, 160, 250)[seed % 4])
        header = {
            "type": "session",
            "version": 3,
            "id": f"gen-{seed}-{flavour}",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": "/work/project",
        }
        yield flavour, header, entries
