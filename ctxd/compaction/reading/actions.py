"""What a shell command did, read from its words and its output, as a person reads a terminal.

Owns the conventions of the tools agents drive: git (a commit and its hash, a push, a new branch, what was
staged), GitHub's ``gh`` (an issue viewed, developed, closed; a pull request made), task trackers such as
beads (``bd``: a task claimed, shown, closed with a reason, the ready list), and the outcome line of a check
(a test run's "31 tests, 0 failures", a linter's "found no issues", a build's error count). Everything here is
pure, bounded (long outputs are read from their head and tail) and conservative: what it does not recognise
yields nothing, never a guess.
"""

from __future__ import annotations

import re
from typing import Literal

import attrs

from ctxd.compaction.reading.mining import head
from ctxd.formats.injected import ANSI_RE
from ctxd.formats.lazy_re import lazy_compile

Kind = Literal[
    "commit", "push", "branch", "claim", "close", "show", "ready", "list", "create", "pr", "stage", "discard"
]

HEAD_CHARS = 6_000
TAIL_CHARS = 3_000
"""A long output is read from this many characters of its head and of its tail."""

_SEGMENT_RE = lazy_compile(r"\s*(?:&&|\|\||;|\n)\s*")
_COMMIT_OUT_RE = lazy_compile(r"^\[([^\]\s]+)(?: \(root-commit\))? ([0-9a-f]{4,40})\] (.+)$", re.M)
_PUSH_OUT_RE = lazy_compile(
    r"^\s*(?:\+\s*)?(?:([0-9a-f]{7,40})\.\.\.?([0-9a-f]{7,40})|\* \[new (?:branch|tag)\])\s+(\S+)\s+->\s+(\S+)", re.M
)
_HEREDOC_MSG_RE = lazy_compile(r"<<-?\s*['\"]?(\w+)['\"]?\s*\n(.*?)\n\s*\1\b", re.S)
_MSG_OPT_RE = lazy_compile(r"(?:^|\s)(?:-m|--message)(?:\s+|=)(\"(?:[^\"\\]|\\.)*\"|'[^']*'|\S+)")
_BRANCH_RE = lazy_compile(
    r"\bgit\s+(?:checkout\s+-[bB]|switch\s+-[cC]|branch)\s+([\w./@+-]+)|"
    r"\bgit\s+worktree\s+add\b.*?\s-[bB]\s+([\w./@+-]+)"
)
_TRACKER_ID = r"([A-Za-z][\w-]*-[0-9a-z]{2,}(?:\.\d+)*|#?\d+)"
_BD_RE = lazy_compile(r"^(?:\S*/)?(bd|beads)\s+(\w[\w-]*)\s*(.*)$", re.S)
_GH_RE = lazy_compile(r"^(?:\S*/)?gh\s+(issue|pr)\s+(\w+)\s*(.*)$", re.S)
_CLAIM_RE = lazy_compile(r"--status[=\s]+['\"]?(?:in[_-]progress|doing|started|active)\b|--claim\b")
_REASON_RE = lazy_compile(r"(?:--reason|-r|--comment|-c)(?:\s+|=)(\"(?:[^\"\\]|\\.)*\"|'[^']*'|\S+)")
_READY_LINE_RE = lazy_compile(r"^\s*\d+\.\s+(?:\[[^\]]*\]\s+)*" + _TRACKER_ID + r":\s+(.+?)\s*$", re.M)
_SHOW_TITLE_RE = lazy_compile(
    r"^\W{0,3}\s*" + _TRACKER_ID + r"(?:\s+\[[^\]]*\])?\s+[·:-]\s+(.+?)(?:\s{2,}\[.*)?$", re.M
)
_GH_TITLE_RE = lazy_compile(r"^title:\s+(.+)$", re.M)
_URL_RE = lazy_compile(r"https?://\S+/(?:pull|issues)/\d+")


@attrs.frozen
class Action:
    """One thing a command did that a summary tells: ``kind`` and its particulars."""

    kind: Kind
    ref: str = ""
    """The commit's hash, the branch, the tracker item's id, the pull request's URL."""
    text: str = ""
    """The commit's subject, the item's title, the close reason, the push's target."""
    items: tuple[tuple[str, str], ...] = ()
    """For ``ready``: the tracker's ready items, ``(id, title)``, in its order."""
    branch: str = ""
    """For ``commit``: the branch it went to."""
    about: str = ""
    """For ``show``: the item's description as the tracker printed it (see :func:`brief`)."""
    children: tuple[tuple[str, str, str], ...] = ()
    """For ``list``: the items listed; for ``show``: the item's sub-items (an epic's children), ``(id, state,
    title)``; ``state`` is the tracker's mark read as ``"closed"``, ``"in progress"``, ``"open"``, or ``""``
    when it has none."""


def _clip(output: str) -> str:
    text = output if len(output) <= HEAD_CHARS + TAIL_CHARS else output[:HEAD_CHARS] + "\n" + output[-TAIL_CHARS:]
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return value.replace('\\"', '"')


def segments(command: str) -> list[str]:
    """The simple commands of ``command`` (split at ``&&``, ``||``, ``;`` and newlines outside a heredoc's
    body; quotes are not parsed, so a separator inside quotes splits too: callers read each part's head)."""
    first, sep, body = command.partition("<<")
    if not sep:
        return [s for s in _SEGMENT_RE.split(command) if s]
    parts = [s for s in _SEGMENT_RE.split(first) if s]
    rest = ""
    delimiter = re.match(r"-?\s*['\"]?(\w+)['\"]?", body)
    if delimiter is not None:
        end = re.search(r"^\s*" + re.escape(delimiter.group(1)) + r"\s*$", body, re.M)
        if end is not None:  # what follows the heredoc's last line: `)" && git push`
            rest, body = body[end.end() :], body[: end.end()]
    if parts:
        parts[-1] = parts[-1] + "<<" + body  # the heredoc belongs to the command that opened it
    after = [s for s in _SEGMENT_RE.split(rest) if s and s.strip(" )\"'")]
    return parts + after


def commit_message(command: str) -> str | None:
    """The subject of the commit ``command`` asks for: its ``-m`` text or its heredoc's first line."""
    heredoc = _HEREDOC_MSG_RE.search(command)
    if heredoc is not None:
        lines = [line.strip() for line in heredoc.group(2).splitlines() if line.strip()]
        return head(lines[0], 160) if lines else None
    found = _MSG_OPT_RE.search(command)
    if found is None:
        return None
    text = _unquote(found.group(1))
    if text.startswith("$("):
        return None
    return head(text.splitlines()[0], 160) if text.strip() else None


def _bd(sub: str, rest: str, output: str, ok: bool) -> list[Action]:
    operands = re.split(r"(?:^|\s)-", rest, maxsplit=1)[0]  # the ids come before the options
    ids = [w for w in operands.split() if re.fullmatch(_TRACKER_ID, w)]
    if sub in ("update", "start") and (sub == "start" or _CLAIM_RE.search(rest)) and ids:
        return [Action("claim", ids[0])]
    if sub in ("close", "done") and ids:
        reason = _REASON_RE.search(rest)
        text = _unquote(reason.group(1)) if reason else ""
        if not text and ok:  # "✓ Closed ID: reason" when the reason was given another way
            said = re.search(r"Closed\s+\S+?:\s+(.+)", output[:2000])
            text = said.group(1).strip() if said else ""
            text = "" if text.lower() in ("closed", "done") else text  # the tracker's word, not a reason
        return [Action("close", i, head(text, 400)) for i in ids]
    if sub == "show" and ids and ok:
        text = _clip(output)
        shown: list[Action] = []
        for ref in ids:
            block = _show_block(text, ref, len(ids) == 1)
            title = _SHOW_TITLE_RE.search(block, 0, 600)
            shown.append(
                Action(
                    "show",
                    ref,
                    head(title.group(2), 200) if title else "",
                    about=_description(block),
                    children=_children(block),
                )
            )
        return shown
    if sub == "ready" and ok:
        items = tuple((m.group(1), head(m.group(2), 200)) for m in _READY_LINE_RE.finditer(_clip(output)))
        return [Action("ready", items=items)] if items else []
    if sub == "list" and ok:
        lines = _LIST_LINE_RE.finditer(_clip(output))
        listed = tuple((m.group(2), _MARKS.get(m.group(1), ""), head(m.group(3), 160)) for m in lines)
        return [Action("list", children=listed)] if listed else []
    if sub == "create" and ok:
        created = re.search(r"(?:Created issue|created)[:\s]+" + _TRACKER_ID, output[:2000])
        return [Action("create", created.group(1) if created else "", head(rest, 200))]
    return []


_SECTION_RE = lazy_compile(r"^[A-Z][A-Z /&-]{2,40}$", re.M)
ABOUT_CHARS = 900


def _show_block(text: str, ref: str, only: bool) -> str:
    """The part of a ``show`` output about ``ref`` (one command may show several items, one after another): from
    its title line to the next item's; the whole output when it shows only ``ref``."""
    start = re.search(r"^\W{0,3}\s*" + re.escape(ref) + r"\b(?!\.)", text, re.M)
    if start is None:
        return text if only else ""
    rest = text[start.end() :]
    following = re.search(r"^\W{0,3}\s*[A-Za-z][\w-]*-[0-9a-z]{2,}(?:\.\d+)*\s+(?:\[[^\]]*\]\s+)?[·:]", rest, re.M)
    return text[start.start() : start.end() + (following.start() if following else len(rest))]


_CHILD_RE = lazy_compile(r"^\s*↳\s*(?:(\S)\s+)?" + _TRACKER_ID + r":\s+(.+?)(?:\s+●\s+P\d)?\s*$", re.M)
_MARKS = {"✓": "closed", "◐": "in progress", "○": "open"}
_LIST_LINE_RE = lazy_compile(
    r"^\s*(\S)\s+" + _TRACKER_ID + r"\s+(?:\[[^\]]*\]\s+)*-\s+(.+?)(?:\s+\((?:blocked by|blocks):[^)]*\))?\s*$", re.M
)
MAX_CHILDREN = 30


def _children(block: str) -> tuple[tuple[str, str, str], ...]:
    """The sub-items a ``show`` lists in its CHILDREN section (``↳ ○ id: title ● P1``)."""
    start = block.find("\nCHILDREN\n")
    if start < 0:
        return ()
    body = block[start + len("\nCHILDREN\n") :]
    end = _SECTION_RE.search(body)
    body = body[: end.start()] if end is not None else body
    found = [(m.group(2), _MARKS.get(m.group(1) or "", ""), head(m.group(3), 160)) for m in _CHILD_RE.finditer(body)]
    return tuple(found[:MAX_CHILDREN])


_KEY_PART_RE = lazy_compile(
    r"accept|success|criteria|no-?gos?|constraint|definition of done|requirement|must|rabbit|scope|out of scope",
    re.I,
)
"""Headings of a description's parts that bind the work (kept whole when the rest is cut)."""
ABOUT_CHARS = 8_000
"""Of a description, at most this much is kept (readers take a :func:`brief` of it)."""


def _description(text: str) -> str:
    """The DESCRIPTION section of a tracker's ``show`` output (up to its next all-caps section): one line per
    part (the text before its first markdown heading, then ``Heading: text`` for each), for :func:`brief`."""
    start = text.find("\nDESCRIPTION\n")
    if start < 0:
        return ""
    body = text[start + len("\nDESCRIPTION\n") :]
    end = _SECTION_RE.search(body)
    if end is not None:
        body = body[: end.start()]
    parts: list[list[str]] = [[]]
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line == "---":
            continue
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            parts.append([heading.group(1).rstrip(":") + ":"])
        else:
            parts[-1].append(line)
    return "\n".join(" ".join(lines) for lines in parts if lines)[:ABOUT_CHARS]


def brief(about: str, limit: int) -> str:
    """A description (see :func:`_description`) in one line of at most ``limit`` characters: whole when it
    fits; else the parts that bind the work (acceptance and success criteria, constraints, no-gos, definition
    of done) kept whole up to two thirds of ``limit``, after the head of the rest."""
    parts = [part for part in about.split("\n") if part.strip()]
    whole = " ".join(parts)
    if len(whole) <= limit:
        return whole
    key = [n for n, part in enumerate(parts) if n and _KEY_PART_RE.search(part.split(":", 1)[0])]
    kept: list[str] = []
    room = limit * 2 // 3
    for n in key:
        text = head(parts[n], room)
        if len(text) < min(60, len(parts[n])):
            break  # no room left for a useful part of it
        kept.append(text)
        room -= len(text) + 1
    used = sum(len(text) + 1 for text in kept)
    rest = head(" ".join(p for n, p in enumerate(parts) if n not in key), limit - used)
    return " ".join([rest, *kept])


def _gh(noun: str, verb: str, rest: str, output: str, ok: bool) -> list[Action]:
    number = re.match(r"\s*#?(\d+)\b", rest)
    ref = f"#{number.group(1)}" if number else ""
    if noun == "issue" and verb in ("view", "develop") and ref and ok:
        title = _GH_TITLE_RE.search(output[:4000])
        body = output.split("\n--\n", 1)[1] if "\n--\n" in output[:4000] else ""
        about = " ".join(body[:ABOUT_CHARS].split())
        kind: Kind = "claim" if verb == "develop" else "show"
        return [Action(kind, ref, head(title.group(1), 200) if title else "", about=about)]
    if noun == "issue" and verb == "close" and ref:
        reason = _REASON_RE.search(rest)
        return [Action("close", ref, head(_unquote(reason.group(1)), 300) if reason else "")]
    if noun == "pr" and verb == "create" and ok:
        url = _URL_RE.search(output)
        return [Action("pr", url.group(0) if url else "")]
    return []


def _discarded(sub: str, part: str) -> str | None:
    """The paths a git command threw the uncommitted changes of away ("" for every path), or None when it keeps
    them: ``checkout -- PATHS`` or ``checkout .``, ``restore PATHS`` (not ``--staged`` alone), ``reset --hard``,
    ``stash`` (its push, not its other verbs)."""
    args = part.split()[2:]
    if sub == "checkout":
        if "--" in args:
            paths = args[args.index("--") + 1 :]
        elif args and all(a in (".", ":/") for a in args):
            paths = args
        else:
            return None
    elif sub == "restore":
        if "--staged" in args and "--worktree" not in args and "-W" not in args:
            return None
        paths = [a for a in args if not a.startswith("-")]
    elif sub == "reset":
        return "" if "--hard" in args else None
    elif sub == "stash":
        return "" if not args or args[0] in ("push", "save", "-u", "--include-untracked", "-k") else None
    else:
        return None
    return "" if not paths or any(p in (".", ":/", "*") for p in paths) else " ".join(paths)


def actions_of(command: str, output: str, ok: bool) -> list[Action]:
    """What ``command`` did (its output read for the result), in order; [] when nothing a summary tells."""
    found: list[Action] = []
    text = _clip(output) if output else ""
    parts = segments(command[:8_000])
    for n, part in enumerate(parts):
        words = part.strip().split(None, 2)
        if not words:
            continue
        part = part.strip()
        program = words[0].rsplit("/", 1)[-1]
        if program == "git" and len(words) > 1:
            sub = words[1]
            if sub == "commit":
                commit = _COMMIT_OUT_RE.search(text) if ok else None
                if commit is not None:
                    found.append(Action("commit", commit.group(2), head(commit.group(3), 200), branch=commit.group(1)))
                elif not ok:
                    found.append(Action("commit", "", commit_message(part) or ""))
            elif sub == "push" and ok:
                pushed = _PUSH_OUT_RE.search(text)
                if pushed is not None:
                    found.append(Action("push", pushed.group(2) or "", pushed.group(4)))
                elif "Everything up-to-date" in text:
                    found.append(Action("push", "", "up to date"))
            elif (discarded := _discarded(sub, part)) is not None and ok:
                # Changes thrown away: what is not committed is no longer changed (the paths, or "" for all).
                found.append(Action("discard", text=discarded))
            elif sub in ("checkout", "switch", "branch", "worktree") and ok:
                branch = _BRANCH_RE.search(part)
                if branch is not None:
                    found.append(Action("branch", branch.group(1) or branch.group(2) or ""))
            elif sub == "add" and (ok or n < len(parts) - 1):
                # A failed command staged what its earlier parts added (the part that failed ran last).
                found.append(Action("stage", text=part.split(None, 2)[2] if len(words) > 2 else ""))
            continue
        bd = _BD_RE.match(part)
        if bd is not None:
            found.extend(_bd(bd.group(2), bd.group(3), text, ok))
            continue
        gh = _GH_RE.match(part)
        if gh is not None:
            found.extend(_gh(gh.group(1), gh.group(2), gh.group(3), text, ok))
    return found
