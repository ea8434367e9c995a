"""The command line shows one-line errors, never tracebacks: every subcommand over a corpus of bad
files, run as real subprocesses; exit codes as documented (README, ``ctxd --help``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from helpers.factories import assistant, chain, user, write

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_BUG = 0, 1, 2, 70  # as README and `ctxd --help` document them

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/p"}
ENTRY = "aaaaaaaa"


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def message(entry_id: str, parent: str | None, body: object) -> dict[str, object]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2025-01-01T00:00:01.000Z"} | {
        "message": body
    }


def corpus(folder: Path) -> dict[str, Path]:
    """Bad session files, by what is wrong with them."""
    first = line(message(ENTRY, None, {"role": "user", "content": "hi", "timestamp": 1}))
    files: dict[str, bytes | None] = {
        "missing": None,
        "empty": b"",
        "bad-header": line({"type": "message", "id": "x"}),
        "not-json-header": b"\x00\x01 not json\n",
        "not-json-line": line(HEADER) + first + b"{not json\n",
        "non-utf8": line(HEADER)
        + first
        + line(message("bbbbbbbb", ENTRY, {"role": "user", "content": "é"})).replace("é".encode(), b"\xff\xfe"),
        "deep": line(HEADER)
        + first
        + b'{"type": "message", "id": "cccccccc", "parentId": "aaaaaaaa", "timestamp": "t", "message": '
        + b'{"role": "user", "content": '
        + b"[" * 5000
        + b"]" * 5000
        + b"}}\n",
        "bad-types": line(HEADER)
        + first
        + line(
            {
                "type": "compaction",
                "id": "dddddddd",
                "parentId": ENTRY,
                "timestamp": "t",
                "summary": 5,
                "firstKeptEntryId": ENTRY,
                "tokensBefore": "x",
            }
        )
        + line(message("eeeeeeee", "dddddddd", {"role": 5, "content": {"a": 1}}))
        + line({"type": "label", "id": "ffffffff", "parentId": "eeeeeeee", "targetId": 3, "label": ["x"]}),
        "torn-tail": line(HEADER) + first + b'{"type": "message", "id": "99999999", "par',
        "nothing-to-compact": line(HEADER) + first,
    }
    out: dict[str, Path] = {}
    for name, data in files.items():
        path = folder / f"{name}.jsonl"
        if data is not None:
            path.write_bytes(data)
        out[name] = path
    directory = folder / "directory.jsonl"
    directory.mkdir()
    out["directory"] = directory
    fifo = folder / "fifo.jsonl"
    os.mkfifo(fifo)
    out["fifo"] = fifo
    zero = folder / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    out["dev-zero"] = zero
    return out


COMMANDS: list[tuple[str, ...]] = [
    ("tree", "{f}"),
    ("tree", "{f}", "--json"),
    ("context", "{f}"),
    ("context", "{f}", "--json"),
    ("context", "{f}", "--format", "openai"),
    ("compact", "{f}", "--dry-run"),
    ("compact", "{f}", "--dry-run", "--json"),
    ("compact", "{f}"),
    ("compact", "{f}", "--json"),
    ("branch", "{f}", ENTRY),
    ("branch", "{f}", ENTRY, "--json"),
    ("branch", "{f}", "nosuchid", "--json"),
    ("fork", "{f}", ENTRY, "--json"),
    ("label", "{f}", ENTRY, "a label"),
    ("check", "{f}"),
    ("check", "{f}", "--json"),
    ("sessions", "--root", "{dir}"),
    ("sessions", "--root", "{dir}", "--json"),
]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PI_CODING_AGENT_DIR": "/nonexistent-ctxd-test", **env},
        timeout=30,  # a FIFO or /dev/zero read without bound would hang here
    )


def check_one_line_error(out: subprocess.CompletedProcess[str], args: tuple[str, ...]) -> None:
    assert "Traceback" not in out.stderr + out.stdout, (args, out.stderr)
    allowed = (EXIT_OK, EXIT_FINDINGS, EXIT_ERROR) if args[0] == "check" else (EXIT_OK, EXIT_ERROR)
    assert out.returncode in allowed, (args, out.returncode, out.stderr)
    if out.returncode == EXIT_ERROR:
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxd: "), (args, out.stderr)
        if "--json" in args:
            error = json.loads(out.stdout)["error"]
            assert {"code", "message", "path", "line"} <= set(error), (args, error)
            assert isinstance(error["code"], int) and error["message"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c).replace("{f}", "F"))
def test_every_subcommand_over_bad_files_gives_one_line_errors(tmp_path: Path, command: tuple[str, ...]) -> None:
    for name, path in corpus(tmp_path).items():
        args = tuple(a.format(f=path, dir=tmp_path) for a in command)
        out = run(*args)
        check_one_line_error(out, args)
        if name in ("missing", "directory", "fifo", "dev-zero", "empty", "bad-header") and command[0] != "sessions":
            assert out.returncode == EXIT_ERROR, (name, args, out.stdout)
            assert str(path) in out.stderr, (name, out.stderr)


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    files = corpus(tmp_path)
    out = run("tree", str(files["bad-header"]), "--json")
    error = json.loads(out.stdout)["error"]
    assert (error["path"], error["line"]) == (str(files["bad-header"]), 1)
    assert out.stderr.startswith(f"ctxd: {files['bad-header']}:1: ")
    out = run("context", str(files["directory"]), "--json")
    error = json.loads(out.stdout)["error"]
    assert error["path"] == str(files["directory"]) and "directory" in error["message"]
    out = run("compact", str(files["nothing-to-compact"]), "--dry-run", "--json")
    assert out.returncode == EXIT_ERROR and "nothing to compact" in json.loads(out.stdout)["error"]["message"]


def test_a_bug_is_one_line_asking_for_a_report_and_ctxd_debug_shows_the_traceback(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", chain(user, assistant))
    script = (
        "import sys, ctxd.cli.commands as c\n"
        "def boom(args): raise RuntimeError('something ctxd did not expect')\n"
        "c.cmd_tree = boom\n"
        "from ctxd.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    for json_flag in ((), ("--json",)):
        out = subprocess.run(
            [sys.executable, "-c", script, "tree", path, *json_flag], capture_output=True, text=True, cwd=REPO
        )
        assert out.returncode == EXIT_BUG
        assert "Traceback" not in out.stderr
        [only] = out.stderr.strip().splitlines()
        assert "something ctxd did not expect" in only and "please report" in only
        if json_flag:
            assert json.loads(out.stdout)["error"]["code"] == -32603
    out = subprocess.run(
        [sys.executable, "-c", script, "tree", path],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "CTXD_DEBUG": "1"},
    )
    assert out.returncode == EXIT_BUG and "Traceback" in out.stderr and "RuntimeError" in out.stderr


@pytest.mark.parametrize(
    "args",
    [(), ("tree",), ("bogus",), ("tree", "x", "--collapse", "-1"), ("compact", "x", "--keep-recent-tokens", "many")],
)
def test_usage_errors_are_one_line_too(args: tuple[str, ...]) -> None:
    for extra in ((), ("--json",)):
        out = run(*args, *extra)
        assert out.returncode == EXIT_ERROR
        [only] = out.stderr.strip().splitlines()
        assert only.startswith("ctxd: ") and "--help" in only
        if extra and args:
            assert json.loads(out.stdout)["error"]["code"] == -32602


def test_exit_codes_are_documented() -> None:
    readme = (REPO / "README.md").read_text()
    helped = run("--help").stdout
    for code in (EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_BUG):
        assert f"`{code}`" in readme and f"{code} " in helped
    assert '{"error": {"code", "message", "path", "line"' in readme


def test_sessions_skips_links_that_lead_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "--x--").mkdir(parents=True)
    write(root / "--x--" / "inside.jsonl", chain(user, assistant))
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside / "secret.jsonl", chain(user, assistant))
    (root / "--x--" / "link.jsonl").symlink_to(outside / "secret.jsonl")
    (root / "dir-link").symlink_to(outside, target_is_directory=True)
    out = run("sessions", "--root", str(root), "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)["sessions"]
    assert [Path(s["path"]).name for s in listed] == ["inside.jsonl"]
    assert str(outside) not in out.stdout
