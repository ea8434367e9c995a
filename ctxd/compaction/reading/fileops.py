"""Which files and commands a conversation's tool calls touched.

Owns the tool-name knowledge shared by the compaction engine and the summarisers: pi's ``read``/``write``/
``edit`` plus the file and shell tools of other common agents (Claude Code, Codex, Cursor, Gemini CLI, the
Anthropic text editor tool, MCP filesystem servers). It also owns pi's file-list rule (modified = written,
edited, created or deleted; read = read and not modified; both sorted, merged with the previous compaction's
``details``) and the ``<read-files>``/``<modified-files>`` blocks appended to summaries.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from ctxd.context.rules import Call, message_calls

FileOp = Literal["read", "written", "edited", "created", "deleted"]


_NON_ALNUM = re.compile(r"[^a-z0-9]")


@functools.lru_cache(maxsize=1024)
def _norm(name: str) -> str:
    """``mcp__fs__Read_File`` -> ``readfile``: the last namespace segment, lower case, letters and digits."""
    for sep in ("__", ".", "/"):
        if sep in name:
            name = name.rsplit(sep, 1)[-1]
    return _NON_ALNUM.sub("", name.lower())


def tool_kind(name: str) -> str:
    """A tool's name as the tables below know it: the last namespace segment, lower case, letters and digits."""
    return _norm(name)


READ_TOOLS = frozenset({"read", "readfile", "view", "viewfile", "openfile", "notebookread", "readmanyfiles"})
WRITE_TOOLS = frozenset({"write", "writefile", "writetofile", "overwritefile"})
EDIT_TOOLS = frozenset(
    {"edit", "editfile", "multiedit", "notebookedit", "replace", "searchreplace", "strreplace", "replaceinfile"}
)
CREATE_TOOLS = frozenset({"createfile", "newfile"})
DELETE_TOOLS = frozenset({"deletefile", "removefile"})
PATCH_TOOLS = frozenset({"applypatch", "patch"})
EDITOR_TOOLS = frozenset({"strreplacebasededittool", "strreplaceeditor", "texteditor"})
SHELL_TOOLS = frozenset(
    {"bash", "shell", "execcommand", "runterminalcmd", "runshellcommand", "executecommand", "localshell", "exec"}
)

PATH_KEYS = ("path", "file_path", "filePath", "notebook_path", "target_file", "absolute_path", "filename")
PATH_LIST_KEYS = ("paths", "file_paths", "filePaths")
_EDITOR_COMMANDS: dict[str, FileOp] = {
    "view": "read",
    "create": "created",
    "str_replace": "edited",
    "insert": "edited",
    "undo_edit": "edited",
}
_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash", "powershell"})


@attrs.define
class FileOps:
    """Sets of paths per kind of operation."""

    read: set[str] = attrs.field(factory=set)
    written: set[str] = attrs.field(factory=set)
    edited: set[str] = attrs.field(factory=set)
    created: set[str] = attrs.field(factory=set)
    deleted: set[str] = attrs.field(factory=set)

    def add(self, op: FileOp, path: str) -> None:
        getattr(self, op).add(path)

    def update(self, other: FileOps) -> None:
        for name in ("read", "written", "edited", "created", "deleted"):
            getattr(self, name).update(getattr(other, name))

    @property
    def modified(self) -> set[str]:
        return self.written | self.edited | self.created | self.deleted


def _paths(args: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            out.append(value.strip())
            break
    for key in PATH_LIST_KEYS:
        value = args.get(key)
        if isinstance(value, list):
            out.extend(v.strip() for v in value if isinstance(v, str) and v.strip())
    return out


_PATCH_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)
_DIFF_HEADER = re.compile(r"^--- (.+?)\s*\n\+\+\+ (.+?)\s*$", re.M)


def _diff_path(raw: str) -> str | None:
    raw = raw.split("\t", 1)[0].strip()
    if raw == "/dev/null":
        return None
    return raw[2:] if raw.startswith(("a/", "b/")) else raw


def patch_file_ops(patch: str) -> list[tuple[FileOp, str]]:
    """Operations in a Codex-style patch (``*** Update File: p``) or a unified diff (``--- a/p`` / ``+++ b/p``)."""
    ops: list[tuple[FileOp, str]] = []
    if "*** " in patch:
        kinds: dict[str, FileOp] = {"Add": "created", "Update": "edited", "Delete": "deleted"}
        for m in _PATCH_HEADER.finditer(patch):
            if m.group(1):
                ops.append((kinds[m.group(1)], m.group(2)))
            else:
                ops.append(("created", m.group(3)))
        if ops:
            return ops
    for m in _DIFF_HEADER.finditer(patch):
        old, new = _diff_path(m.group(1)), _diff_path(m.group(2))
        if old is None and new is not None:
            ops.append(("created", new))
        elif new is None and old is not None:
            ops.append(("deleted", old))
        elif new is not None:
            ops.append(("edited", new))
    return ops


def _patch_text(arguments: Any) -> str | None:
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, Mapping):
        for key in ("input", "patch", "diff", "content"):
            value = arguments.get(key)
            if isinstance(value, str):
                return value
    return None


def _command_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return None


_SIMPLE_OPS: dict[str, FileOp] = {
    **dict.fromkeys(READ_TOOLS, "read"),
    **dict.fromkeys(WRITE_TOOLS, "written"),
    **dict.fromkeys(EDIT_TOOLS, "edited"),
    **dict.fromkeys(CREATE_TOOLS, "created"),
    **dict.fromkeys(DELETE_TOOLS, "deleted"),
}


def _shell_command(arguments: Mapping[str, Any]) -> str | None:
    value = arguments.get("command")
    if value is None:
        value = arguments.get("cmd")
    if isinstance(value, str):
        return value.strip() or None
    argv = _command_list(value)
    if argv is None:
        return None
    if len(argv) >= 3 and argv[0] in _SHELLS and argv[1] in ("-c", "-lc", "-ic", "-Command"):
        return " ".join(argv[2:]).strip() or None
    return shlex.join(argv)


def classify_call(name: str, arguments: Any) -> tuple[str | None, list[tuple[FileOp, str]]]:
    """``(shell command or None, file operations)`` of one tool call, judged from its name and arguments."""
    tool = _norm(name) if isinstance(name, str) else ""
    command = _shell_command(arguments) if tool in SHELL_TOOLS and isinstance(arguments, Mapping) else None
    return command, _file_ops(tool, arguments)


def _file_ops(tool: str, arguments: Any) -> list[tuple[FileOp, str]]:
    """The file operations of a call of the tool named ``tool`` (normalised: :func:`tool_kind`)."""
    op = _SIMPLE_OPS.get(tool)
    if op is not None:
        if type(arguments) is dict or isinstance(arguments, Mapping):
            return [(op, p) for p in _paths(arguments)]
        return []
    if tool in SHELL_TOOLS:
        if not isinstance(arguments, Mapping):
            return []
        argv = _command_list(arguments.get("command") or arguments.get("cmd"))
        if argv and len(argv) >= 2 and _norm(argv[0]) == "applypatch":
            return patch_file_ops(argv[1])
        return []
    if tool in PATCH_TOOLS:
        text = _patch_text(arguments)
        return patch_file_ops(text) if text else []
    if tool in EDITOR_TOOLS and isinstance(arguments, Mapping):
        command = arguments.get("command")
        editor_op = _EDITOR_COMMANDS.get(command) if isinstance(command, str) else None
        if editor_op is not None:
            return [(editor_op, p) for p in _paths(arguments)]
    return []


def call_file_ops(name: str, arguments: Any) -> list[tuple[FileOp, str]]:
    """The file operations one tool call performs."""
    return _file_ops(_norm(name) if isinstance(name, str) else "", arguments)


def call_command(name: str, arguments: Any) -> str | None:
    """The shell command a tool call runs, or None when it is not a shell tool."""
    return classify_call(name, arguments)[0]


def extract_file_ops(messages: Iterable[Mapping[str, Any]]) -> FileOps:
    """File operations of every tool call in ``messages`` (as pi does, whether or not the call succeeded),
    including the calls a tool result records it made (``ctxd.context.rules.message_calls``)."""
    ops = FileOps()
    for message in messages:
        add_calls(ops, message_calls(message))
    return ops


def add_calls(ops: FileOps, calls: Iterable[Call]) -> None:
    """Add the file operations of ``calls`` (name, arguments) to ``ops``."""
    for name, arguments in calls:
        for op, path in _file_ops(_norm(name), arguments):  # a call's name is a str (message_calls)
            getattr(ops, op).add(path)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def file_lists(ops: FileOps, previous: Mapping[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """``(read_files, modified_files)``, sorted, with a previous compaction's ``details`` folded in."""
    read = set(ops.read)
    modified = ops.modified
    if previous:
        read.update(_strings(previous.get("readFiles")))
        modified.update(_strings(previous.get("modifiedFiles")))
    # JavaScript's sort compares UTF-16 code units (a character outside the BMP sorts before U+E000).
    return sorted(read - modified, key=_utf16), sorted(modified, key=_utf16)


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def format_file_blocks(read_files: Iterable[str], modified_files: Iterable[str]) -> str:
    """``<read-files>``/``<modified-files>`` blocks to append to a summary; "" when both lists are empty."""
    blocks: list[str] = []
    read_list, modified_list = list(read_files), list(modified_files)
    if read_list:
        blocks.append("<read-files>\n" + "\n".join(read_list) + "\n</read-files>")
    if modified_list:
        blocks.append("<modified-files>\n" + "\n".join(modified_list) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(blocks) if blocks else ""


_FILE_BLOCK_RE = re.compile(r"\s*<(read-files|modified-files)>.*?</\1>", re.S)


def strip_file_blocks(summary: str) -> str:
    """``summary`` without ``<read-files>``/``<modified-files>`` blocks (the engine re-appends merged ones)."""
    if "-files>" not in summary:
        return summary
    return _FILE_BLOCK_RE.sub("", summary).rstrip()


def project_root(paths: Sequence[str], known: str | None = None) -> str | None:
    """The project's folder: ``known`` (an earlier summary's) when most absolute ``paths`` lie in it, else the
    deepest folder all paths of the largest group (by their first three folders) share, at least three deep."""
    absolute = [p for p in paths if p.startswith("/")]
    if known and absolute and sum(p.startswith(known + "/") for p in absolute) * 2 >= len(absolute):
        return known
    if len(absolute) < 2:
        return known
    groups: Counter[str] = Counter("/".join(p.split("/")[:4]) for p in absolute)
    top, count = groups.most_common(1)[0]
    if count < 2:
        return known
    members = [p.split("/")[:-1] for p in absolute if p.startswith(top + "/") or p == top]
    common = members[0]
    for parts in members[1:]:
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return "/".join(common) if len(common) >= 4 else known


def relative(path: str, root: str | None) -> str:
    if root and path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return path
