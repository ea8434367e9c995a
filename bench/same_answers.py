"""Are ctxd's answers byte-identical in two checkouts? (issue 23: "answers are byte-identical before and after")

    python bench/same_answers.py OTHER_CHECKOUT [--files DIR ...]

e.g. ``git archive main | tar -x -C /tmp/main && python bench/same_answers.py /tmp/main``. For every session
file under tests/data (and the opencode database's sessions), runs ``ctxd context FILE --json`` and
``ctxd context FILE --format openai --json`` with this checkout's ctxd and with the other one's, and ``ctxd hook
PreCompact`` then ``ctxd hook SessionStart`` (source ``compact``) on every Claude Code transcript (each run with
its own fresh state folder), and compares stdout and the exit code byte for byte. Both checkouts run with this
interpreter; the venv's editable install is bypassed so each imports its own ``ctxd``. Exit 0 when all agree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import checkout

REPO = Path(__file__).resolve().parents[1]
LAUNCH = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()];"
    "sys.path.insert(0, sys.argv.pop(1)); from ctxd.cli import main; raise SystemExit(main(sys.argv[1:]))"
)


def run(tree: Path, args: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> tuple[int, bytes]:
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(tree), *args], input=stdin, capture_output=True, env=env, timeout=600
    )
    return done.returncode, done.stdout


def notes(state: Path) -> bytes:
    """The session's notes the hooks left, without the times they ran at."""
    path = state / "ctxd" / "claude" / "same.json"
    if not path.exists():
        return b"(none)"
    data = json.loads(path.read_text())
    for value in data.values():
        if isinstance(value, dict):
            value.pop("at", None)
    return json.dumps(data, sort_keys=True).encode()


def cases(folders: list[Path]) -> list[tuple[str, list[str], bytes, str]]:
    """(name, argv, stdin, transcript or "") for every answer compared."""
    out: list[tuple[str, list[str], bytes, str]] = []
    for folder in folders:
        for path in sorted(folder.rglob("*.jsonl")):
            for extra in ([], ["--format", "openai"]):
                out.append(
                    (
                        f"context {path.relative_to(folder)} {' '.join(extra)}",
                        ["context", str(path), *extra, "--json"],
                        b"",
                        "",
                    )
                )
            if path.parent.name == "claude":
                payload = {"session_id": "same", "transcript_path": str(path), "cwd": "/tmp", "trigger": "manual"}
                data = json.dumps({"hook_event_name": "PreCompact", **payload}).encode()
                out.append((f"hook PreCompact {path.name}", ["hook", "PreCompact"], data, str(path)))
                start = json.dumps({**payload, "hook_event_name": "SessionStart", "source": "compact"}).encode()
                out.append((f"hook SessionStart {path.name}", ["hook", "SessionStart"], start, str(path)))
        for db in sorted(folder.rglob("*.db")):
            listed = subprocess.run(
                ["sqlite3", str(db), "select id from session"], capture_output=True, text=True, check=False
            ).stdout.split()
            for session in listed:
                ref = f"{db}#{session}"
                out.append((f"context {db.name}#{session}", ["context", ref, "--json"], b"", ""))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", type=Path, help="the other checkout (a folder holding ctxd/)")
    parser.add_argument("--files", type=Path, action="append", help="folders of session files (default tests/data)")
    args = parser.parse_args()
    other = Path(checkout(args.other))
    folders = args.files or [REPO / "tests" / "data"]
    differ = 0
    total = 0
    for name, argv, stdin, _ in cases(folders):
        answers = []
        for tree in (REPO, other):
            with tempfile.TemporaryDirectory(prefix="ctxd-same-") as tmp:
                env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state", "XDG_DATA_HOME": f"{tmp}/data"}
                env.update({"XDG_CACHE_HOME": f"{tmp}/cache", "CTXD_CONFIG": f"{tmp}/none.json"})
                if argv[0] == "hook" and argv[1] == "SessionStart":  # after this checkout's own PreCompact
                    pre = stdin.replace(b'"SessionStart"', b'"PreCompact"')
                    run(tree, ["hook", "PreCompact"], pre, env)
                code, out = run(tree, argv, stdin, env)
                if argv[0] == "hook":  # again, with the ledger the first run saved; and the notes it left
                    again = run(tree, argv, stdin, env)
                    out += b"\n--- again\n" + again[1] + b"\n--- notes\n" + notes(Path(tmp) / "state")
                answers.append((code, out))
        total += 1
        if answers[0] != answers[1]:
            differ += 1
            sizes = f"{len(answers[0][1]):,} vs {len(answers[1][1]):,} bytes"
            print(f"DIFFERENT  {name}: exit {answers[0][0]} vs {answers[1][0]}, {sizes}")
        else:
            print(f"same       {name} ({len(answers[0][1]):,} bytes, exit {answers[0][0]})")
    print(f"{total - differ} of {total} answers byte-identical with {args.other}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
