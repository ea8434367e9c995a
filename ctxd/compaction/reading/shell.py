"""What a shell command does, as far as a summary cares: its core, the files it reads and writes.

Agents that work through a shell (Codex always, others often) read files with ``cat``/``sed -n``/``head``
and edit them with ``sed -i`` or redirections; the same build runs as ``cd pkg && npm run check 2>&1 | tail
-5`` one time and ``... | grep error`` the next. :func:`parse_shell` gives the command's *core* (without a
leading ``cd DIR &&``, output filters such as ``| head -20`` and stream redirections such as ``2>&1``), the
directory it ran in, the file operations it performs, and whether it did nothing but read or write files
(then it is a file operation, not a command worth listing). Pure and conservative: a construct it does not
understand yields no file operation, never a wrong one. Heredoc bodies are not parsed (only the first line).

It also says which commands matter to a summary (:func:`command_matters`): everything but read-only
exploration (``ls``, ``grep``, ``rg``, ``find``, ``git log``, ...; :func:`looks_only`), unless its last run
failed. Builds, tests, runs, installs and git commands that change something always matter.
"""

from __future__ import annotations

import functools
import re

import attrs

from ctxd.compaction.reading.fileops import FileOp
from ctxd.formats.lazy_re import lazy_compile

READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "batcat", "view"})
"""Programs whose operands are files they only read (options aside)."""
FILTERS = frozenset(
    {"head", "tail", "grep", "egrep", "fgrep", "rg", "wc", "sort", "uniq", "less", "more", "cat", "cut", "tr", "column"}
    | {"sed", "awk", "nl", "jq"}
)
"""Programs that, after a pipe, only shape the output of the command before them."""
_OPTION_ARGS = {
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c"}),
    "sed": frozenset({"-e", "-f"}),
    "nl": frozenset({"-b", "-w", "-s", "-v", "-i"}),
}
"""Options that take a separate argument (so the argument is not a file)."""
_CONTROL = frozenset({"&&", "||", ";", "|", "&", ";;", "|&"})
_REDIRECT_OUT = frozenset({">", ">>", ">|", "&>", "&>>"})
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "-"})
_LEADING_CD = lazy_compile(r"^\s*cd\s+(\"[^\"]*\"|'[^']*'|[^\s;&|]+)\s*(?:&&|;)\s*")
_STREAM_REDIRECT = lazy_compile(r"\s+(?:[0-9]?>&[0-9]|[0-9]>\s*/dev/null|&>\s*/dev/null)(?=\s|$)")
_PIPE_TAIL = lazy_compile(r"\s*\|\s*([A-Za-z0-9_.-]+)(?:\s+(?:[^|\"']|\"[^\"]*\"|'[^']*')*)?\s*$")
_FILE_PROGRAMS_RE = lazy_compile(r">|\b(?:cat|head|tail|nl|less|more|bat|batcat|view|sed|touch|rm|unlink|cp|mv|tee)\b")
MAX_COMMAND_CHARS = 4000
"""Longer commands (pasted scripts) are judged from their head."""


@attrs.frozen
class ShellCommand:
    core: str
    """The command without a leading ``cd DIR &&``, trailing output filters and stream redirections; for a
    heredoc, its first line."""
    cwd: str | None
    """The directory of a leading ``cd``."""
    ops: tuple[tuple[FileOp, str], ...]
    """Files read, written (by redirection, ``tee``, ``sed -i``, ``cp``/``mv`` targets, ``touch``), deleted."""
    file_only: bool
    """Whether every part of the command only read or wrote files (``cat a``, ``sed -n 1,80p a``,
    ``cat > a <<EOF``): a file operation rather than a command."""


def _first_line(command: str) -> str:
    line, _, rest = command.partition("\n")
    if "<<" in line or not rest.strip():
        return line
    # A multi-line script: its lines are separate commands.
    return "; ".join(part.strip() for part in command.splitlines() if part.strip() and not part.strip().startswith("#"))


_HEREDOC_ARG_RE = lazy_compile(r"""(["']?)\$\(\s*cat\s+<<-?\s*['"]?(\w+)['"]?\s*$""")


def _heredoc_argument(command: str, line: str) -> str:
    """A first line passing a heredoc as an argument (``git commit -m "$(cat <<'EOF'``) with the heredoc's first
    line in its place (``git commit -m "feat: ..."``): what the command says, not how it was quoted."""
    found = _HEREDOC_ARG_RE.search(line)
    if found is None:
        return line
    body = command.split("\n", 1)[1] if "\n" in command else ""
    first = next((b.strip() for b in body.splitlines() if b.strip() and b.strip() != found.group(2)), "")
    quote = found.group(1) or '"'
    return line[: found.start()] + (f"{quote}{first}{quote}" if first else "")


def command_core(command: str) -> tuple[str, str | None]:
    """``(core, cwd)`` of ``command`` (see :class:`ShellCommand`)."""
    stripped = command.strip()[:MAX_COMMAND_CHARS]
    text = _heredoc_argument(stripped, _first_line(stripped).strip())
    cwd: str | None = None
    while True:
        match = _LEADING_CD.match(text)
        if match is None or match.end() >= len(text):
            break
        cwd = match.group(1).strip("\"'")
        text = text[match.end() :]
    text = _STREAM_REDIRECT.sub("", text)
    while True:
        match = _PIPE_TAIL.search(text)
        if match is None or match.group(1) not in FILTERS or match.start() == 0:
            break
        text = text[: match.start()].rstrip()
    return " ".join(text.split()), cwd


_TOKEN_RE = lazy_compile(
    r"""(?P<op>&&|\|\||;;|\|&|[|;&]|&>>?|[0-9]*>>|[0-9]*>&[0-9-]*|[0-9]*>\||[0-9]*>|<<<|<<-?|<&|<)"""
    r"""|(?P<word>(?:[^\s|;&<>"'\\]|\\.|"(?:\\.|[^"\\])*"|'[^']*')+)"""
    r"""|(?P<space>\s+)|(?P<bad>.)""",
    re.S,
)
_UNQUOTE_RE = lazy_compile(r"""\\(.)|"((?:\\.|[^"\\])*)"|'([^']*)'""", re.S)


def _unquote(word: str) -> str:
    if not any(c in word for c in "\"'\\"):
        return word
    return _UNQUOTE_RE.sub(
        lambda m: m.group(1) or (re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3) or ""),
        word,
    )


def _tokens(text: str) -> list[str] | None:
    """Shell words and operators (quotes removed), or None for text that does not tokenise (an unclosed quote)."""
    out: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        kind = match.lastgroup
        if kind == "word":
            out.append(_unquote(match.group()))
        elif kind == "op":
            op = match.group()
            digits = len(op) - len(op.lstrip("0123456789"))
            if digits and op[digits:]:
                out.append(op[:digits])  # "2>" -> "2", ">"
                op = op[digits:]
            if op.startswith(">&") and len(op) > 2:
                out.extend((">&", op[2:]))
            else:
                out.append(op)
        elif kind == "bad":
            return None
    return out


def _operands(program: str, args: list[str]) -> list[str]:
    takes = _OPTION_ARGS.get(program, frozenset())
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("-") and arg != "-":
            skip = arg in takes
            continue
        out.append(arg)
    return out


def _is_path(arg: str) -> bool:
    return bool(arg) and arg not in _NOT_FILES and not arg.startswith(("$", "`")) and "*" not in arg and "\n" not in arg


def _simple(words: list[str], ops: list[tuple[FileOp, str]]) -> bool:
    """Record the file operations of one simple command (redirections already removed); whether it only
    touched files."""
    if not words:
        return True
    program = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if program in READERS:
        files = [a for a in _operands(program, args) if _is_path(a)]
        ops.extend(("read", f) for f in files)
        return bool(files)
    if program == "sed":
        in_place = False
        script_given = False
        rest: list[str] = []
        skip = False
        for n, arg in enumerate(args):
            if skip:
                skip = False
                continue
            if arg == "-i" or arg.startswith("--in-place"):
                in_place = True
                # BSD sed takes a backup suffix after -i ('' in "sed -i '' s/a/b/ f").
                skip = n + 1 < len(args) and args[n + 1] == ""
            elif arg.startswith("-i"):
                in_place = True
            elif arg in ("-e", "-f", "--expression", "--file"):
                script_given = True
                skip = True
            elif arg.startswith("-") and arg != "-":
                continue
            else:
                rest.append(arg)
        files = [a for a in (rest if script_given else rest[1:]) if _is_path(a)]
        ops.extend(("edited" if in_place else "read", f) for f in files)
        return bool(files) and (in_place or "-n" in args)
    if program in ("touch",):
        files = [a for a in _operands(program, args) if _is_path(a)]
        ops.extend(("written", f) for f in files)
        return bool(files)
    if program in ("rm", "unlink"):
        files = [a for a in _operands(program, args) if _is_path(a)]
        ops.extend(("deleted", f) for f in files)
        return False  # deleting is worth listing as a command too
    if program in ("cp", "mv"):
        operands = [a for a in _operands(program, args) if _is_path(a)]
        if len(operands) >= 2:
            if program == "mv":
                ops.extend(("deleted", f) for f in operands[:-1])
            ops.append(("written", operands[-1]))
        return False
    if program == "tee":
        ops.extend(("written", f) for f in _operands(program, args) if _is_path(f))
        return False
    return False


_HEREDOC_WORD_RE = lazy_compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_LEADING_SEPARATORS_RE = lazy_compile(r"^[\s)\"']*(?:&&|\|\||;)?\s*")


def _after_heredoc(command: str) -> str:
    """What follows the heredoc a command's first line opens (``cat > f <<'EOF' ... EOF`` then ``python3 f``),
    without the separator before it; "" when there is nothing."""
    line = command.partition("\n")[0]
    word = _HEREDOC_WORD_RE.search(line) if "<<" in line else None
    if word is None:
        return ""
    end = re.search(r"^\s*" + re.escape(word.group(1)) + r"\b.*$", command[len(line) :], re.M)
    if end is None:
        return ""
    rest = command[len(line) + end.end() :]
    return _LEADING_SEPARATORS_RE.sub("", rest, count=1).strip()


@functools.lru_cache(maxsize=4096)
def parse_shell(command: str) -> ShellCommand:
    """What ``command`` does (see :class:`ShellCommand`); never raises. A command after a heredoc's body is read
    too: a script written by a heredoc and then run is a run, not a file operation."""
    first = _parse_one(command)
    rest = _after_heredoc(command[:MAX_COMMAND_CHARS])
    if not rest:
        return first
    later = parse_shell(rest)
    ops = tuple(dict.fromkeys(first.ops + later.ops))
    if first.file_only and not later.file_only:
        return ShellCommand(later.core, later.cwd or first.cwd, ops, False)
    return ShellCommand(first.core, first.cwd, ops, first.file_only and later.file_only)


def _parse_one(command: str) -> ShellCommand:
    core, cwd = command_core(command)
    ops: list[tuple[FileOp, str]] = []
    if not _FILE_PROGRAMS_RE.search(command, 0, MAX_COMMAND_CHARS):
        return ShellCommand(core, cwd, (), False)  # nothing in it reads or writes a file
    tokens = _tokens(_first_line(command.strip()[:MAX_COMMAND_CHARS]))
    if tokens is None:
        return ShellCommand(core, cwd, (), False)
    file_only = True
    words: list[str] = []
    redirected = False
    after_pipe = False
    i = 0
    while i <= len(tokens):
        token = tokens[i] if i < len(tokens) else ";"
        if token in _CONTROL:
            if words:
                program = words[0].rsplit("/", 1)[-1]
                if after_pipe and program in FILTERS:
                    pass  # shaping the previous command's output
                elif program in ("cd", "true", ":") or (program in ("echo", "printf") and not redirected):
                    pass  # moving around or printing a note changes nothing
                else:
                    only = _simple(words, ops)
                    file_only = file_only and (only or (redirected and program in ("cat", "echo", "printf")))
            elif redirected:
                file_only = file_only and True
            after_pipe = token in ("|", "|&")
            words = []
            redirected = False
        elif token in _REDIRECT_OUT:
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if target and target not in _CONTROL and _is_path(target) and not target.startswith("&"):
                ops.append(("written", target))
                redirected = True
            i += 1
        elif token in ("<", "<<", "<<<", ">&", "<&"):
            i += 1  # the input file or heredoc word, or a descriptor
        elif token.isdigit() and i + 1 < len(tokens) and tokens[i + 1] in (">", ">>", ">&"):
            pass  # "2" of "2>file"
        else:
            words.append(token)
        i += 1
    file_only = file_only and bool(ops)
    return ShellCommand(core, cwd, tuple(dict.fromkeys(ops)), file_only)


LOOKING = frozenset(
    {"ls", "ll", "la", "tree", "exa", "eza", "find", "fd", "fdfind", "locate", "grep", "egrep", "fgrep", "rg"}
    | {"ag", "ack", "file", "stat", "du", "df", "pwd", "which", "whereis", "type", "realpath", "readlink"}
    | {"basename", "dirname", "date", "whoami", "id", "uname", "hostname", "env", "printenv", "ps", "diff"}
    | {"cmp", "md5sum", "sha1sum", "sha256sum", "shasum", "xxd", "hexdump", "od", "strings", "tokei", "cloc"}
    | {"test", "["}
    | READERS
    | FILTERS
)
"""Programs that only look at files, the system or their arguments (as long as no output goes to a file)."""
NEUTRAL = frozenset({"echo", "printf", "cd", "true", ":", "sleep"})
"""Programs that neither look nor change anything: beside a looking program they change nothing, but a command
of nothing else (``echo one``) was run for its own sake."""
GIT_LOOKING = frozenset(
    {"status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse", "describe"}
    | {"shortlog", "cat-file", "reflog", "whatchanged", "rev-list", "merge-base", "help", "--version"}
)
"""Git subcommands that change nothing (``branch``, ``stash``, ``tag``, ``remote`` and ``worktree`` only look
when they list)."""
_GIT_LISTING = {"branch": "-a -r -v -vv --list --all --show-current --contains --merged", "tag": "-l --list"}
_GIT_LISTS = {"stash": ("list", "show"), "remote": ("", "-v", "show", "get-url"), "worktree": ("list",)}


def _looks(words: list[str]) -> bool:
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # VAR=value before the program
    if not words:
        return True
    program = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if program == "git":
        rest: list[str] = []
        skip = False
        for arg in args:
            if skip:
                skip = False
            elif arg in ("-C", "-c", "--git-dir", "--work-tree"):
                skip = True  # a global option's argument
            elif not arg.startswith("-") or rest:
                rest.append(arg)
        sub, more = (rest[0], rest[1:]) if rest else ("", [])
        if sub in _GIT_LISTING:
            return all(a in _GIT_LISTING[sub].split() for a in more)
        if sub in _GIT_LISTS:
            return (more[:1] or [""])[0] in _GIT_LISTS[sub]
        return sub in GIT_LOOKING
    if program == "sed":
        return not any(a.startswith(("-i", "--in-place")) for a in args)
    if program == "find":
        return not any(a in ("-exec", "-execdir", "-delete", "-ok", "-okdir", "-fprint") for a in args)
    return program in LOOKING or program in NEUTRAL


def _neutral(words: list[str]) -> bool:
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]
    return not words or words[0].rsplit("/", 1)[-1] in NEUTRAL


@functools.lru_cache(maxsize=4096)
def looks_only(command: str) -> bool:
    """Whether ``command`` only looks around: every simple command in it runs a program of :data:`LOOKING`
    (``sed`` without ``-i``, ``find`` without ``-exec``/``-delete``, ``git`` with a subcommand of
    :data:`GIT_LOOKING`) or of :data:`NEUTRAL`, at least one of them looks, and no output is written to a
    file. Anything it cannot read (an unclosed quote, a heredoc) does more than look."""
    text = command.strip()[:MAX_COMMAND_CHARS]
    if not text or "<<" in text or "\n" in text.strip():
        return False
    tokens = _tokens(text)
    if tokens is None:
        return False
    words: list[str] = []
    looked = False
    i = 0
    while i <= len(tokens):
        token = tokens[i] if i < len(tokens) else ";"
        if token in _CONTROL:
            if words and not _looks(words):
                return False
            looked = looked or not _neutral(words)
            words = []
        elif token in _REDIRECT_OUT:
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if target not in _NOT_FILES and not target.startswith("&"):
                return False  # output written to a file
            i += 1
        elif token in ("<", "<<<", ">&", "<&"):
            i += 1
        elif not (token.isdigit() and i + 1 < len(tokens) and tokens[i + 1] in (">", ">>", ">&")):
            words.append(token)
        i += 1
    return looked


def command_matters(command: str, last_ok: bool | None) -> bool:
    """Whether a summary must name ``command``: its last run failed, or it does more than look around (see
    :func:`looks_only`)."""
    return last_ok is False or not looks_only(command)
