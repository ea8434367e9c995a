"""The bench's own reading of shell commands: which ones are key, and what a summary must show to keep one.
Written apart from ctxd (nothing here imports it); used by ``bench/fidelity_truth.py``.

A command line is split into simple commands at ``&&``, ``||``, ``;``, ``|``, ``&`` and newlines outside
quotes and ``$(...)`` (heredoc bodies dropped; a commit message given as ``"$(cat <<'EOF' ...)"`` becomes its
first line; ``bash -c SCRIPT`` is read as SCRIPT). Each is tokenized with :mod:`shlex` (split at whitespace when
its quotes do not close) and stripped of what does not say what it runs: environment assignments, wrappers
(``sudo``, ``time``, ``timeout N``, ``env``, ``nohup``, ``if``/``then``/``do``, ...), redirections with their
targets. A command after a pipe is a filter of the one before, not a command of its own.

A simple command is **key** when it builds, tests, runs or installs something, or is a git command that changes
something: a program of :data:`KEY_PROGRAMS` (not a read-only subcommand of it, such as ``npm ls`` or ``pip
show``, nor ``--version``/``--help``), a program run by its path (``./run.sh``, ``bin/check``), ``git`` with a
subcommand that changes something (:data:`GIT_CHANGES`; ``branch``, ``tag`` and ``stash`` only when they create,
delete or apply). Read-only looks (:data:`LOOKS`: ``ls``, ``cat``, ``grep``, ``rg``, ``find``, ``sed`` without
``-i``, ``head``, ``git status``/``log``/``diff``/``show``, ...) are not key, nor are file chores (``mkdir``,
``cp``, ``mv``, ``rm``, ``chmod``, ``sed -i``, ``echo``, ``sleep``, ``curl``, ...), nor a tracker's writes
(``gh`` creating, closing, merging or commenting, :data:`GH_CHANGES`; ``bd`` create/update/close/...,
:data:`BD_CHANGES`): a summary tells what those did as its tasks' state (claimed, closed with a reason), and
they are counted apart (:data:`TRACKER`).

A key command is kept when its **probe** occurs in the summary (both normalised by ``fidelity_text.norm``): the
simple command's words (program, subcommand, arguments; no ``cd`` before it, no pipe, no redirection after
it) joined by spaces, cut at :data:`PROBE` characters. A commit with a message of :data:`MESSAGE` characters or
more (``git commit -m MSG``) is kept by its message's head instead: a summary may name a commit by its hash and
message. Distinct probes are distinct facts.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from fidelity_text import norm

PROBE = 40
MESSAGE = 12
"""A commit message at least this long is a commit's probe (see the module docstring)."""


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


KEY = "key"
LOOK = "look"
TRACKER = "tracker"
OTHER = "other"

KEY_PROGRAMS = _names(
    """make cmake ninja meson bazel just task cargo rustc rustup go gcc g++ clang clang++ cc javac java mvn gradle
    gradlew dotnet swift swiftc xcodebuild npm npx pnpm pnpx yarn bun bunx deno node tsx ts-node tsc tsgo vite
    vitest jest mocha playwright eslint prettier biome python python3 pip pip3 pipx uv uvx poetry pdm hatch tox
    nox pytest ruff mypy pyright black isort flake8 pylint mix elixir elixirc iex erl rebar3 gleam ruby bundle
    rake rails rspec gem php composer phpunit perl lua luarocks nvim docker docker-compose podman kubectl helm
    terraform ansible-playbook brew apt apt-get dnf yum apk pacman bash sh zsh julia Rscript zig dune opam ghc
    cabal stack sbt scala kotlinc flutter dart pre-commit"""
)
"""Programs that build, test, run or install something."""
READ_ONLY = {
    "npm": {"ls", "list", "view", "info", "show", "outdated", "root", "bin", "why", "search", "help", "config"},
    "pnpm": {"ls", "list", "view", "info", "outdated", "root", "bin", "why", "help"},
    "yarn": {"list", "info", "why", "bin", "help"},
    "pip": {"list", "show", "freeze", "search", "help", "index"},
    "pip3": {"list", "show", "freeze", "search", "help", "index"},
    "cargo": {"tree", "metadata", "search", "help", "locate-project"},
    "go": {"env", "list", "version", "doc", "help"},
    "mix": {"help", "deps.tree", "hex.info"},
    "docker": {"ps", "images", "logs", "inspect", "version", "info"},
    "kubectl": {"get", "describe", "logs", "version", "explain"},
    "brew": {"list", "info", "search", "config", "doctor"},
    "uv": {"tree", "version", "help"},
    "poetry": {"show", "version", "help"},
}
"""Subcommands of key programs that only look."""
LOOKS = _names(
    """ls ll la cat less more head tail wc grep egrep fgrep rg ag ack find fd tree file stat du df pwd which
    whereis type echo printf date env printenv id whoami uname hostname nl sort uniq cut tr awk sed jq yq diff
    cmp comm xxd od hexdump strings basename dirname realpath readlink test [ [[ true false ps top lsof sleep
    column bat"""
)
"""Programs that only look (``sed -i`` and ``find -exec``/``-delete`` excepted: they change files)."""
GIT_CHANGES = _names(
    """add commit push pull merge rebase reset revert cherry-pick checkout switch restore rm mv tag stash branch
    worktree clone init apply am clean submodule"""
)
_GIT_LISTING = {
    "branch": {"-a", "-r", "-l", "--list", "-v", "-vv", "--show-current", "--contains", "--merged", "--no-merged"},
    "tag": {"-l", "--list", "-n", "--contains"},
    "stash": {"list", "show"},
    "worktree": {"list"},
    "submodule": {"status", "summary"},
}
_GIT_OPTIONS_WITH_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace"}
GH_CHANGES = {
    "pr": {"create", "merge", "close", "edit", "comment", "review", "checkout", "ready", "reopen"},
    "issue": {"create", "close", "edit", "comment", "reopen", "delete"},
    "release": {"create", "delete", "upload", "edit"},
    "repo": {"create", "fork", "clone", "delete"},
    "workflow": {"run", "enable", "disable"},
    "run": {"rerun", "cancel"},
}
BD_CHANGES = _names("create new update close reopen delete dep sync import init comment comments label edit")
"""The ``bd`` (beads) tracker's subcommands that write."""
_WRAPPERS = _names("sudo time nohup command exec nice if then else elif do while until ! { ( xargs")
_SKIP_SEGMENT = _names("for case select function done fi esac } ) ;;")
_REDIRECT = re.compile(r"^(\d*)(>>?|<<-?|<<<|&>>?|>&|<&|<)(.*)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_COMMIT_HEREDOC = re.compile(r"\$\(\s*cat\s*<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(?P<body>.*?)\n[ \t]*\2[ \t]*\n?\s*\)", re.S)
_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*(['\"]?)(\w+)\1")


@dataclass(frozen=True)
class Simple:
    """One simple command: its words (see the module docstring) and whether it reads a pipe."""

    words: tuple[str, ...]
    piped: bool = False
    writes: tuple[str, ...] = ()
    """Files its redirections write (``> f``, ``>> f``)."""

    @property
    def program(self) -> str:
        return os.path.basename(self.words[0]) if self.words else ""


def _heredocs(script: str) -> str:
    """``script`` without heredoc bodies; a ``$(cat <<EOF ...)`` argument becomes its body's first line."""

    def first_line(match: re.Match[str]) -> str:
        lines = [ln.strip() for ln in match.group("body").splitlines() if ln.strip()]
        return re.sub(r"[\"'`$\\]", "", lines[0]) if lines else ""

    script = _COMMIT_HEREDOC.sub(first_line, script)
    out: list[str] = []
    ending: str | None = None
    for line in script.split("\n"):
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        out.append(line)
        found = _HEREDOC.search(line)
        if found:
            ending = found.group(2)
    return "\n".join(out)


def _segments(script: str) -> list[tuple[str, bool]]:
    """The simple commands' texts of ``script``, each with whether it reads a pipe (see the module docstring)."""
    script = _heredocs(script).replace("\\\n", " ")
    out: list[tuple[str, bool]] = []
    buf: list[str] = []
    quote: str | None = None
    depth = 0
    piped = False
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if quote is not None:
            buf.append(c)
            if c == "\\" and quote == '"' and i + 1 < n:
                buf.append(script[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            buf.append(c)
        elif c == "\\" and i + 1 < n:
            buf.append(script[i : i + 2])
            i += 1
        elif c == "$" and script[i + 1 : i + 2] == "(":
            depth += 1
            buf.append("$(")
            i += 1
        elif depth and c in "()":
            depth += 1 if c == "(" else -1
            buf.append(c)
        elif c == "#" and not depth and (not buf or buf[-1].isspace()):
            while i < n and script[i] != "\n":
                i += 1
            continue
        elif not depth and (c in ";|\n" or (c == "&" and script[i - 1 : i] != ">" and script[i + 1 : i + 2] != ">")):
            sep = script[i : i + 2] if script[i : i + 2] in ("&&", "||", "|&", ";;") else c
            text = "".join(buf).strip()
            if text:
                out.append((text, piped))
            buf = []
            piped = sep in ("|", "|&")
            i += len(sep)
            continue
        else:
            buf.append(c)
        i += 1
    text = "".join(buf).strip()
    if text:
        out.append((text, piped))
    return out


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def _simple(words: list[str], piped: bool) -> Simple | None:
    words = [w for w in words if w]
    while words:
        first = words[0].lstrip("({")
        env = first == "env" and len(words) > 1 and (words[1].startswith("-") or _ASSIGNMENT.match(words[1]))
        if not first or first in _WRAPPERS or _ASSIGNMENT.match(first) or env:
            words = words[1:]
        elif first == "timeout":
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[2:] if words[0] in ("-s", "-k", "--signal", "--kill-after") else words[1:]
            words = words[1:]  # the duration
        else:
            words = [first, *words[1:]]
            break
    if not words or words[0] in _SKIP_SEGMENT:
        return None
    kept: list[str] = []
    writes: list[str] = []
    target_of: str | None = None
    """The redirection whose target is the next word."""
    for word in words:
        if target_of is not None:
            if ">" in target_of:
                writes.append(word)
            target_of = None
            continue
        match = _REDIRECT.match(word)
        if match is None:
            kept.append(word)
        elif not match.group(3):
            target_of = match.group(2)
        elif ">" in match.group(2) and not match.group(3).startswith(("&", "=")):
            writes.append(match.group(3))
    kept = [w for w in (w.rstrip(")}") if w.count(")") > w.count("(") else w for w in kept) if w]
    targets = tuple(w for w in writes if w not in ("/dev/null", "/dev/stderr", "/dev/stdout"))
    return Simple(tuple(kept), piped, targets) if kept else None


def simple_commands(script: str) -> list[Simple]:
    """The simple commands of a command line (``bash -c SCRIPT`` read as SCRIPT)."""
    out: list[Simple] = []
    for text, piped in _segments(script):
        simple = _simple(_words(text), piped)
        if simple is None:
            continue
        args = simple.words[1:]
        if simple.program in ("bash", "sh", "zsh") and "-c" in args and args.index("-c") + 1 < len(args):
            inner = simple_commands(args[args.index("-c") + 1])
            out.extend(Simple(s.words, s.piped or piped, s.writes) for s in inner)
            continue
        out.append(simple)
    return out


def _first_arg(args: tuple[str, ...]) -> str:
    return next((a for a in args if not a.startswith("-")), "")


def _git(args: tuple[str, ...]) -> str:
    rest = list(args)
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in _GIT_OPTIONS_WITH_VALUE else rest[1:]
    if not rest or rest[0] not in GIT_CHANGES:
        return LOOK
    sub, more = rest[0], rest[1:]
    if not more:
        return KEY if sub in ("stash", "commit", "pull", "push", "clean") else LOOK
    return LOOK if more[0] in _GIT_LISTING.get(sub, set()) else KEY


def kind(simple: Simple) -> str:
    """:data:`KEY`, :data:`LOOK`, :data:`TRACKER` or :data:`OTHER` (see the module docstring)."""
    program, args = simple.program, simple.words[1:]
    if program == "git":
        return _git(args)
    if program == "gh":
        group, action = [*(a for a in args if not a.startswith("-")), "", ""][:2]
        return TRACKER if action in GH_CHANGES.get(group, set()) else LOOK
    if program == "bd":
        return TRACKER if _first_arg(args) in BD_CHANGES else LOOK
    if program in LOOKS:
        if program == "sed" and any(a.startswith("-i") or a == "--in-place" for a in args):
            return OTHER
        if program == "find" and any(a in ("-exec", "-execdir", "-delete", "-ok") for a in args):
            return OTHER
        return LOOK
    if program in KEY_PROGRAMS:
        if not args or args[0] in ("--version", "-v", "-V", "--help", "-h", "version", "help"):
            return LOOK if args else (KEY if program not in ("bash", "sh", "zsh") else OTHER)
        if _first_arg(args) in READ_ONLY.get(program, set()):
            return LOOK
        return KEY
    if "/" in simple.words[0]:
        return KEY  # a script or binary run by its path
    return OTHER


def commit_message(simple: Simple) -> str | None:
    """The message of a ``git commit -m MSG`` (``-am``, ``--message=``), if it has one."""
    if simple.program != "git" or "commit" not in simple.words:
        return None
    words = simple.words[simple.words.index("commit") + 1 :]
    for i, word in enumerate(words):
        if word.startswith("--message="):
            return word.split("=", 1)[1]
        if (word in ("-m", "--message") or re.fullmatch(r"-[a-z]*m", word)) and i + 1 < len(words):
            return words[i + 1]
    return None


def probe(simple: Simple, root: str | None = None) -> str:
    """What a summary must contain to keep the key command ``simple`` (see the module docstring)."""
    message = norm(commit_message(simple) or "", root)
    if len(message) >= MESSAGE:
        return message[:PROBE].rstrip()
    return norm(" ".join(simple.words), root)[:PROBE].rstrip()


def key_commands(script: str, root: str | None = None) -> dict[str, str]:
    """probe -> the simple command, for the key commands of a command line (filters after a pipe excepted)."""
    return {probe(s, root): " ".join(s.words) for s in simple_commands(script) if not s.piped and kind(s) == KEY}


def of_kind(script: str, wanted: str) -> list[str]:
    """The simple commands of a command line of kind ``wanted`` (filters after a pipe excepted)."""
    return [" ".join(s.words) for s in simple_commands(script) if not s.piped and kind(s) == wanted]


_GLOB = re.compile(r"[*?]|\[.*\]")
_READERS = _names("cat nl head tail less more bat")


def file_ops(script: str) -> tuple[list[str], list[str]]:
    """(files read, files written) by a command line: the file arguments of ``cat``/``nl``/``head``/``tail``/
    ``sed -n`` (read), the targets of ``sed -i``, ``tee`` and output redirections (written); a glob names no
    file."""
    read: list[str] = []
    written: list[str] = []
    for s in simple_commands(script):
        written.extend(s.writes)
        args = [a for a in s.words[1:] if not a.startswith("-")]
        if s.program in _READERS and not s.piped:
            read.extend(a for a in args if not re.fullmatch(r"\+?\d+", a))
        elif s.program == "sed" and len(args) >= 2:
            (written if any(a.startswith("-i") for a in s.words[1:]) else read).extend(args[1:])
        elif s.program == "tee":
            written.extend(args)
    return [p for p in read if not _GLOB.search(p)], [p for p in written if not _GLOB.search(p)]
