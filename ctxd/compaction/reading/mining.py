"""Reading sentences and lines out of conversation text, for the offline summariser and the fact sheet.

Owns the patterns that say what a sentence is (a user's constraint, an agent's decision or plan, a claim
that something was fixed), which lines of a message are prose someone wrote (not code, tables, headings,
logs, terminal output), which line of a command's output names its error, and whether a user message asks
for something. All functions are pure and bounded: long messages are mined from their head and prose lines.
"""

from __future__ import annotations

import re

from ctxd.compaction.summary.serialize import middle_truncate
from ctxd.formats.injected import ANSI_RE
from ctxd.formats.lazy_re import lazy_compile

CONSTRAINT_RE = lazy_compile(
    r"\b(?:must(?:n't| not)?|should(?:n't| not)?|don'?t|do not|never|always|prefer(?:s|red|ably)?|"
    r"please use|avoid|make sure|ensure|required?|only use|use only|instead of|instead|rather than|no need to|"
    r"keep (?:it|the|them|this|that|all|every|using)|has to|have to|can'?t|cannot|not allowed|stick to|"
    r"(?:use|keep|leave) \S+(?: \S+)?,? not)\b",
    re.IGNORECASE,
)
CORRECTION_RE = lazy_compile(
    r"^\s*(?:no\b|nope\b|not\b|wrong\b|actually\b|that'?s (?:not|wrong)|that is (?:not|wrong)|i (?:said|meant)|"
    r"stop\b|revert\b|undo\b|don'?t\b)",
    re.IGNORECASE,
)
"""A user sentence that corrects the agent (a constraint too: it says what not to do)."""
DECISION_RE = lazy_compile(
    r"\b(?:(?:I'll|I will|I'm going to|we'll|let's) (?:use|go with|keep|switch|stick|avoid|replace|try|take)|"
    r"decided|decide to|decision|instead|because|chose|opted|going with|rather than|switch(?:ed|ing)? to|"
    r"root cause|trade-?off|the (?:fix|cause|problem|issue|approach) (?:is|was))\b",
    re.IGNORECASE,
)
NEXT_RE = lazy_compile(
    r"\b(?:next|then I|remaining|todo|to do|still need|needs? to|will need|follow[- ]up|after that|"
    r"I(?:'ll| will) (?:now |then |also )?(?:add|fix|update|run|wire|write|implement|check|move|create|remove|"
    r"change|test|look|start|continue|finish|refactor|port|rename|verify))\b",
    re.IGNORECASE,
)
NEXT_LABEL_RE = re.compile(
    r"^(?:next(?: steps?| up| tasks?)?|remaining(?: work| steps| tasks| items)?|still to do|left to do|"
    r"what'?s (?:left|next)|to ?do|open items|not (?:yet )?done)\s*(?::\s*(.*))?$",
    re.IGNORECASE,
)
"""A line that heads the agent's list of what comes next ("Remaining:", "**Next steps**", "TODO: ...")."""
REASON_RE = re.compile(
    r"\b(?:because|since|so that|so we|due to|to avoid|otherwise|which (?:means|is|includes|keeps|makes)|"
    r"given that|the reason|as (?:it|this|that|they) (?:is|are|has|have|would|will))\b",
    re.IGNORECASE,
)
"""A sentence that gives a reason (a decision's reason is kept with it)."""
AGREE_RE = re.compile(
    r"^\s*(?:you'?re (?:absolutely |totally |completely |quite )?right|good (?:catch|point|call)|fair point|"
    r"agreed\b|that'?s a (?:bug|mistake) in my)",
    re.IGNORECASE,
)
"""The agent agreeing with the user's correction: what it says next is a decision the user prompted."""
FIXED_RE = re.compile(
    r"\b(?:fixed|resolved|now (?:passes|pass|works|builds|compiles|succeeds)|(?:all )?(?:tests|checks) pass(?:es|ed)?"
    r"|works now|passing now|builds now|no (?:more )?errors)\b"
)
"""The agent saying it fixed something (matched in lower-cased text)."""
ERROR_LINE_RE = lazy_compile(
    r"error|exception|fatal|failed|failure|cannot|can't|not found|no such|denied|panic|traceback|invalid|"
    r"unexpected|undefined|refused|timed out|err!"
)
"""Words that say a line reports an error (matched in lower-cased text)."""
PASTED_ERROR_RE = lazy_compile(r"(?:Error|Exception)\b|ERR!|FATAL\b|panic:|not found:")
"""A line a user pasted that reports an error (stricter than :data:`ERROR_LINE_RE`: users write "error" in prose)."""
ERROR_WORD_RE = lazy_compile(
    r"\b(?:fail(?:s|ed|ing|ure)?|errors?|exceptions?|crash(?:es|ed)?|broken|panic(?:s|ked)?|segfaults?|"
    r"timed out|refused)\b",
    re.IGNORECASE,
)
"""A user sentence that says something went wrong (an error fact when it also names the error: :data:`TOKEN_RE`)."""
TOKEN_RE = lazy_compile(
    r"`[^`\n]{2,}`|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{1,6}-?\d{2,}\b|\b[A-Za-z]+\d{3,}\b|"
    r"(?<![\w/])~?\.{0,2}/[\w.@+-]+(?:/[\w.@+-]+)+|\b[\w.@+-]+(?:/[\w.@+-]+)+\.\w{1,8}\b"
)
"""A distinctive token: a `quoted` piece, an ERROR_CODE, an E0425-style code, a path with a folder."""
STATED_RE = lazy_compile(
    r"`[^`\n]{2,}`|(?<![\w/])~?\.{0,2}/[\w.@+-]+(?:/[\w.@+-]+)+|\b[\w.@+-]+(?:/[\w.@+-]+)+\.\w{1,8}\b|"
    r"\b(?:validate|verify|check|test|build|lint)\w* (?:it |this |that |everything )?(?:with|using|by running|via)\b",
    re.IGNORECASE,
)
"""A user sentence worth keeping on its own: it names a path, a `command`, or how to validate the work."""
WITHDRAW_RE = lazy_compile(
    r"\b(?:no longer|not any ?more|forget (?:about )?(?:the|my|what)|ignore (?:the|my) (?:earlier|previous|old)|"
    r"disregard|scratch that|you (?:may|can) (?:now )?(?:touch|modify|edit|change|use|push|delete)|"
    r"(?:it'?s|it is) (?:fine|ok(?:ay)?) (?:now )?to|feel free to|lift(?:ed)? the|"
    r"drop the (?:rule|constraint|requirement|restriction))\b",
    re.IGNORECASE,
)
"""A user sentence that takes back an earlier constraint."""
FIXED_ANY_RE = lazy_compile(FIXED_RE.pattern, re.IGNORECASE)
ACK_RE = lazy_compile(
    r"^\s*(?:ok(?:ay)?|k|yes|yep|yeah|ya|sure|thanks?(?: you)?|thx|ty|continue|go(?: on| ahead)?|proceed|"
    r"please(?: do)?|do it|sounds good|great|nice|cool|perfect|lgtm|wow|hi|hello|hey|good|alright|right|"
    r"yes please|ok continue|ok go|y|n|no)\b[\s,.!]*(?:please|then|thanks|thank you|go|continue)?[\s.!]*$",
    re.IGNORECASE,
)
_FENCE_RE = lazy_compile(r"```.*?(?:```|\Z)", re.S)
_NOT_LETTERS_RE = lazy_compile(r"[^A-Za-z\u00c0-\uffff]+")
_SPLIT_RE = lazy_compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(\[])|\n+")
_BULLET_RE = lazy_compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
_LOG_RE = lazy_compile(
    r"^\s*(?:at |\d{4}-\d\d-\d\d[T ]|\[\d|\d+\s*[│|]|[\w./-]+:\d+(?::\d+)?[:\s]|[$>] |npm (?:ERR|WARN)|"
    r"File \"|Traceback|\w+@[\w.-]+[:~])"
)
_EXIT_RE = lazy_compile(r"(?:exit(?:ed)?(?: with)? (?:code|status)|exit code)[:\s]+(-?\d+)", re.IGNORECASE)
_CODEX_HEADER_RE = lazy_compile(r"^(?:Chunk ID|Wall time|Process exited with code|Original token count)\b|^Output:$")

MINE_CHARS = 4000
"""Only this many characters of prose per message are mined for sentences (long pastes are data)."""


def short(text: str, limit: int) -> str:
    """``text`` with whitespace collapsed, cut in the middle to ``limit``."""
    return middle_truncate(" ".join(text.split()), limit)


def head(text: str, limit: int) -> str:
    """``text`` with whitespace collapsed, cut at the end to ``limit`` (the head survives whole)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def prose(text: str, limit: int | None = None) -> str:
    """The lines of ``text`` a person wrote as prose: without code blocks, tables, headings, quotes, log and
    stack-trace lines, indented blocks and terminal output; only the first ``limit`` characters are read."""
    if limit is not None and len(text) > limit:
        text = text[:limit]
    if "```" in text:
        text = _FENCE_RE.sub("\n", text)
    ansi = "\x1b" in text
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "|#>{}[]<" or line.startswith(("    ", "\t")):
            continue
        if (ansi and ANSI_RE.search(line)) or _LOG_RE.match(line):
            continue
        if len(_NOT_LETTERS_RE.sub("", stripped)) < len(stripped) // 2:
            continue  # mostly symbols or digits: data, not a sentence
        lines.append(stripped)
    return "\n".join(lines)


def sentences(
    text: str, pattern: re.Pattern[str], limit: int, *, max_len: int = 300, also: re.Pattern[str] | None = None
) -> list[str]:
    """Up to ``limit`` prose sentences of ``text`` that match ``pattern`` (or ``also``, matched at the
    sentence's start) and are not questions."""
    out: list[str] = []
    for raw in _SPLIT_RE.split(prose(text, 2 * MINE_CHARS)[:MINE_CHARS]):
        sentence = _BULLET_RE.sub("", raw).strip()
        if len(sentence) < 12 or sentence.endswith(("?", ":")) or sentence.startswith("#"):
            continue
        if not pattern.search(sentence) and (also is None or not also.match(sentence)):
            continue
        out.append(middle_truncate(" ".join(sentence.split()), max_len))
        if len(out) >= limit:
            break
    return out


def _all_sentences(text: str) -> list[str]:
    """The prose sentences of ``text`` (at least 12 characters, not questions or headings), in order."""
    out: list[str] = []
    for raw in _SPLIT_RE.split(prose(text, 2 * MINE_CHARS)[:MINE_CHARS]):
        sentence = " ".join(_BULLET_RE.sub("", raw).split())
        if len(sentence) >= 12 and not sentence.endswith(("?", ":")) and not sentence.startswith("#"):
            out.append(sentence)
    return out


_ACTION_RE = re.compile(
    r"^(?:now |first,? |ok(?:ay)?,? )?(?:let me|let's (?:check|look|see|read)|i'll (?:check|look|read))\b", re.I
)
"""What the agent does next (reading, checking), not what it decided."""


def decision_sentences(text: str, pattern: re.Pattern[str], limit: int, *, max_len: int = 300) -> list[str]:
    """Up to ``limit`` decisions of the agent's ``text``: sentences matching ``pattern``, or what it says right
    after agreeing with a correction (:data:`AGREE_RE`); a decision without a reason takes the next sentence
    along when that one gives it (:data:`REASON_RE`)."""
    found = _all_sentences(text)
    agreed = bool(AGREE_RE.match(text))
    out: list[str] = []
    n = 0
    while n < len(found) and len(out) < limit:
        sentence = found[n]
        n += 1
        agreeing = AGREE_RE.match(sentence)
        if agreeing:  # "You're right." says nothing by itself: what follows it may
            sentence = sentence[agreeing.end() :].lstrip(" ,.!—-:;")
            if len(sentence) < 24:
                continue
        if not pattern.search(sentence) and not (agreed and n <= 3 and not _ACTION_RE.match(sentence)):
            continue
        if not REASON_RE.search(sentence) and n < len(found) and REASON_RE.search(found[n]):
            sentence = f"{sentence} {found[n]}"
            n += 1
        out.append(middle_truncate(sentence, max_len))
    return out


def stated_next(text: str, limit: int = 4) -> list[str]:
    """What the agent's ``text`` says comes next: the items of a list headed "Remaining:" / "Next steps" /
    "TODO:" (or that line's own text), else its sentences that speak of a next step (:data:`NEXT_RE`)."""
    lines = text[: 2 * MINE_CHARS].splitlines()
    for at, raw in enumerate(lines):
        label = raw.strip().lstrip("#").strip().strip("*_").strip()
        match = NEXT_LABEL_RE.match(label)
        if match is None or (match.group(1) is None and not raw.lstrip().startswith(("#", "*", "_"))):
            continue
        items = [head(match.group(1), 160)] if match.group(1) and len(match.group(1)) >= 8 else []
        for line in lines[at + 1 :]:
            if not line.strip():
                if items:
                    break
                continue
            if not _BULLET_RE.match(line):
                break
            item = " ".join(_BULLET_RE.sub("", line).split())
            if item:
                items.append(head(item, 160))
            if len(items) >= limit:
                break
        if items:
            return items
    return sentences(text, NEXT_RE, 3, max_len=240)


def first_line(text: str, limit: int) -> str:
    """The first line of ``text`` with words in it, preferring one that is not a heading; whitespace collapsed,
    cut to ``limit``."""
    heading = ""
    for raw in text.splitlines():
        line = raw.strip().lstrip("#>*- ").strip()
        if not any(c.isalnum() for c in line):
            continue
        if not raw.lstrip().startswith(("#", "|")):
            return middle_truncate(" ".join(line.split()), limit)
        heading = heading or line
    return middle_truncate(" ".join(heading.split()), limit)


_REFERENCE_RE = lazy_compile(r"^(?:<?https?://\S+>?|#\d+|[A-Z][A-Z0-9]+-\d+|[\w.-]+/[\w.-]+#\d+)$")
"""A message that is only a reference to work: a link (an issue's URL), ``#123``, ``ENG-42``, ``owner/repo#7``."""


def is_request(text: str) -> bool:
    """Whether a user's own words ask for something: not empty, not an acknowledgement or greeting ("ok",
    "continue", "yes please", "hi"), not a lone word or slash command, not a pasted log with no words of the
    user's around it; a lone link or issue reference is a request (to work on what it names)."""
    stripped = text.strip()
    if not stripped or ACK_RE.match(stripped):
        return False
    if _REFERENCE_RE.match(stripped):
        return True
    if len(stripped.split()) < 2:
        return False
    if len(stripped) > 300 and "\n" in stripped:
        words = prose(stripped, 4_000)
        if len(words) < 40 and len(words) * 10 < len(stripped[:4_000]):
            return False  # a paste: lines of output, no sentence of the user's
    return True


ERROR_SCAN_CHARS = 20_000
"""Only the head of a long output is searched for its error line."""


def error_line(output: str) -> str | None:
    """The line of a failed command's or tool's output that says what went wrong: the first line naming an
    error, else the first line; None for empty output. Codex's output header and exit-code lines are skipped."""
    text = output[:ERROR_SCAN_CHARS]
    if "\x1b" in text:
        text = ANSI_RE.sub("", text)
    low = text.lower()
    match = ERROR_LINE_RE.search(low)
    while match is not None:
        start = low.rfind("\n", 0, match.start()) + 1
        end = low.find("\n", match.end())
        end = len(low) if end < 0 else end
        line = text[start:end].strip()
        if not _CODEX_HEADER_RE.match(line) and not (_EXIT_RE.search(line) and len(line) < 60):
            return line
        match = ERROR_LINE_RE.search(low, end)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _CODEX_HEADER_RE.match(line) or line == "(no output)":
            continue
        if _EXIT_RE.search(line) and len(line) < 60:
            continue
        return line
    return None


def exit_codes(text: str) -> list[int]:
    """Exit codes a tool's output reports, at its head (Codex) or its tail (pi, Claude Code)."""
    if "xit" not in text:
        return []
    window = text if len(text) <= 800 else text[:400] + "\n" + text[-400:]
    return [int(m.group(1)) for m in _EXIT_RE.finditer(window)]


def key_lines(text: str, limit: int = 4) -> list[str]:
    """Lines of a long user message that report an error (a pasted log's payload), up to ``limit``."""
    out: list[str] = []
    for match in PASTED_ERROR_RE.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        line = text[start : len(text) if end < 0 else end].strip()
        if 12 <= len(line) <= 400 and line not in out:
            out.append(line)
            if len(out) >= limit:
                break
    return out


_WORD_RE = lazy_compile(r"[a-z][a-z0-9_-]{3,}")
_COMMON = frozenset(
    {
        "never",
        "always",
        "must",
        "should",
        "please",
        "with",
        "that",
        "this",
        "from",
        "into",
        "your",
        "have",
        "only",
        "make",
        "sure",
        "keep",
        "about",
        "before",
        "after",
        "when",
        "what",
        "which",
        "there",
        "their",
        "them",
        "then",
        "than",
        "also",
        "just",
        "again",
        "anymore",
        "longer",
        "more",
        "does",
        "done",
        "will",
        "would",
        "could",
        "okay",
        "fine",
        "now",
        "may",
        "can",
        "use",
        "using",
        "used",
        "touch",
        "modify",
        "edit",
        "change",
        "push",
        "delete",
        "run",
        "runs",
    }
)


def distinct_tokens(text: str) -> set[str]:
    """The distinctive tokens of ``text`` (see :data:`TOKEN_RE`), lower case, backticks dropped."""
    return {m.group(0).strip("`").strip().lower() for m in TOKEN_RE.finditer(text)}


def keywords(text: str) -> set[str]:
    """The words of ``text`` that say what it is about: 4+ letters, not a common or modal word."""
    return {w for w in _WORD_RE.findall(text.lower()) if w not in _COMMON}


def same_subject(earlier: str, later: str) -> bool:
    """Whether ``later`` speaks of what ``earlier`` says: a distinctive token in common, or (when ``earlier`` has
    none) two keywords in common."""
    tokens = distinct_tokens(earlier)
    if tokens:
        return bool(tokens & distinct_tokens(later)) or any(t in later.lower() for t in tokens)
    return len(keywords(earlier) & keywords(later)) >= 2


CHECK_RE = lazy_compile(
    r"(?:^|[\s/;&|(])(?:pytest|py\.test|tox|nox|unittest|jest|vitest|mocha|ava|karma|playwright|cypress|rspec|"
    r"minitest|phpunit|ctest|ruff|mypy|pyright|flake8|pylint|black|isort|eslint|tsc|prettier|biome|stylelint|"
    r"clippy|rustfmt|gofmt|golangci-lint|shellcheck|credo|dialyzer|hadolint|make|cmake|ninja|bazel|gradlew?|mvn|"
    r"sbt|dotnet|swift|xcodebuild|cargo (?:test|build|check|clippy|fmt|run|nextest)|go (?:test|build|vet|run)|"
    r"mix (?:test|compile|credo|format|dialyzer|run|deps\.get|"
    r"[a-z_]+\.(?:migrate|rollback|codegen|setup|reset|create|drop))|"
    r"(?:npm|pnpm|yarn|bun)(?: run)? (?:test|build|lint|check|typecheck|format|ci|e2e|dev|start)\b|"
    r"(?:npm|pnpm|yarn|bun) (?:install|i|ci)\b|pip install|uv (?:sync|run|pip)|poetry (?:install|run)|"
    r"python3? -m (?:pytest|unittest|mypy|build)|bundle exec|rake|deno (?:test|lint|check)|zig build)\b"
)
"""Commands that build, test, lint or run the project: their outcome is a check."""
CHECK_WORDS = (
    r"tests?|passed|passing|failed|failing|failures?|errors?|warnings?|issues?|problems?|examples?|specs?|"
    r"suggestions?|skipped|pending|assertions?|doctests?|properties|checks?"
)
_CHECK_LINE_RE = lazy_compile(
    rf"\b\d+\s+(?:[\w-]+\s+){{0,2}}(?:{CHECK_WORDS})\b|\bfound no (?:issues|problems|errors)\b|"
    r"\b(?:all )?(?:tests|checks) pass(?:ed)?\b|\bno (?:issues|errors|problems) found\b|"
    r"^(?:ok|PASS|FAIL)\b|\btest result: \w+\b|\bBuild (?:succeeded|failed|complete)",
    re.I | re.M,
)


_OUTCOME_WORDS_RE = lazy_compile(
    r"pass|PASS|FAIL|found no|no (?:issues|errors|problems)|[Bb]uild|test result|^ok", re.M
)
CHECK_TAIL_LINES = 40
"""A check's outcome line is looked for in this many of its output's last lines (where runners print it)."""


def check_line(output: str) -> str | None:
    """The line of a check's output that tells its outcome ("7 tests, 0 failures", "found no issues",
    "test result: ok. 12 passed"): the last such line among the output's last lines."""
    tail = output[-4_000:]
    if not any(c in tail for c in "0123456789") and not _OUTCOME_WORDS_RE.search(tail):
        return None  # no count and no outcome word: nothing to find
    if "\x1b" in tail:
        tail = ANSI_RE.sub("", tail)
    for raw in reversed(tail.splitlines()[-CHECK_TAIL_LINES:]):
        if raw and _CHECK_LINE_RE.search(raw):
            line = " ".join(raw.split()).strip("┃│|=-* ")
            if line.lower() in ("ok", "pass", "passed", "fail", "failed"):
                return None  # says no more than the run's outcome
            return head(line, 160) or None
    return None


_FINDING_RE = lazy_compile(
    r"^\s*[┃│|]?\s*\[[A-Z]\]\s+\S|^\S+\.\w{1,6}:\d+(?::\d+)?:?\s+\S|^\s*(?:warning|WARN)\b[:\s]", re.M
)
"""A line a linter or compiler reports one finding on."""


_NOT_THE_ERROR_RE = lazy_compile(
    r"^\s*(?:\d+\s*[│|]|[│|]?\s*[\^~]+\s*$|\d+\)\s)|(?i:^\s*(?:exit code|process exited with code|command exited with "
    r"code)\s*-?\d+\s*$)"
)
"""A line near an error that is not it: a code frame's line (``216 │ ...``), a caret under it, a test's numbered
heading (``1) test mount ...``), an exit code."""
_MARKED_ERROR_RE = lazy_compile(r"^\s*[×✗✘✖]\s*\S")
"""A line a tool marks as an error (biome, Deno, vitest: ``× expected a semicolon``)."""
LONG_LINE = 400
"""A line this long is data (minified code, a dump), not the line that says what went wrong."""


def failure_line(output: str) -> str:
    """The line of a failed call's output that says what went wrong: the first a tool marks as an error, else
    the first naming an error (not a code frame's line, a caret, a test's heading, an exit code or a line of
    data), else the check's outcome line ("found 1 software design suggestion"), else the first line."""
    text = output[:20_000]
    marked = next((line for line in text.splitlines() if _MARKED_ERROR_RE.match(line) and len(line) < LONG_LINE), None)
    if marked is not None:
        return head(marked.strip(), 240)
    low = text.lower()
    match = ERROR_LINE_RE.search(low)
    while match is not None:
        start = low.rfind("\n", 0, match.start()) + 1
        end = low.find("\n", match.end())
        raw = text[start : len(text) if end < 0 else end]
        line = raw.strip(" \t┃│|")
        if len(raw) < LONG_LINE and not _NOT_THE_ERROR_RE.match(raw):
            return head(line, 240)
        match = ERROR_LINE_RE.search(low, len(text) if end < 0 else end)
    finding = _FINDING_RE.search(text)
    if finding is not None:  # a linter's finding: "[D] Nested modules could be aliased ...", "a.py:3:1: E501 ..."
        start = text.rfind("\n", 0, finding.start()) + 1
        end = text.find("\n", finding.end())
        line = " ".join(text[start : len(text) if end < 0 else end].split()).strip(" ┃│|")
        if len(line) >= 12:
            return head(line, 240)
    outcome = check_line(output)
    if outcome:
        return outcome
    for raw in text.splitlines():
        line = raw.strip(" \t┃│|")
        if line and not re.match(r"(?i)exit code \d+$", line):
            return head(line, 240)
    return "(no output)"


DIAGNOSIS_RE = lazy_compile(
    r"\b(?:the (?:issue|problem|cause|error|failure|bug|fix) (?:is|was)|root cause|because|fails? because|"
    r"(?:is|are) (?:failing|broken) because|caused by|due to|means that|turns out|the reason|"
    r"(?:need|needs) to|should (?:be|use)|instead|wants? (?:the|an?)|expects?)\b",
    re.I,
)
"""A sentence of the agent's that says why something failed or what the fix is."""
CHOICE_RE = lazy_compile(
    r"\b(?:(?:I'll|I will|I'm going to|we'll|let's|I decided to) (?:use|go with|keep|switch|stick|avoid|replace|move|"
    r"make|put|drop|take)|instead|rather than|decided|decide to|decision|chose|choose|choosing|opted|opt for|"
    r"going with|go with|"
    r"switch(?:ed|ing)? to|prefer(?:red|able)?|better to|simpler to|safer to|(?:the )?(?:right|better|simplest|"
    r"cleanest|safest) (?:way|approach|option|fix|place)|won't|will not|don'?t need|no need|not needed|"
    r"keep(?:ing)? (?:it|them|this|the \w+) (?:as|in|at)|trade-?off|over (?:the|a|an) \w+ (?:approach|option))\b",
    re.I,
)
"""A sentence of the agent's that states a choice."""
WHY_RE = lazy_compile(
    r"\b(?:because|since|so that|so (?:it|we|the|that)|to (?:avoid|keep|satisfy|match|prevent|make|ensure|allow|"
    r"stay|fit|follow)|due to|otherwise|which (?:means|is|keeps|makes|avoids)|given that|the reason|as (?:it|this|"
    r"that|they) (?:is|are|was|has|would|will)|instead|rather than|than|that's what|this way)\b",
    re.I,
)
"""A reason or an alternative in the same sentence."""
_NARRATION_RE = lazy_compile(
    r"^(?:now |first,? |next,? |ok(?:ay)?,? |good[.,!]? |great[.,!]? |perfect[.,!]? )?(?:let me|let's|i'll (?:now )?"
    r"(?:check|look|read|see|verify|run|start|search|explore)|i need to (?:check|look|read|see|verify))\b",
    re.I,
)
_EMPHASIS_RE = lazy_compile(r"\*\*|__")


def plain_sentences(text: str) -> list[str]:
    """The prose sentences of ``text`` (emphasis and bullets dropped; at least 16 characters, not questions)."""
    out: list[str] = []
    for raw in _SPLIT_RE.split(prose(text, 2 * MINE_CHARS)[:MINE_CHARS]):
        sentence = " ".join(_EMPHASIS_RE.sub("", _BULLET_RE.sub("", raw)).split())
        if len(sentence) >= 16 and not sentence.endswith(("?", ":")):
            out.append(sentence)
    return out


BECAUSE_RE = lazy_compile(
    r"\b(?:because|since|so that|that's why|which means|otherwise|to avoid|instead of|rather than|the reason|"
    r"(?:is|are|was|it's|that's) (?:fine|safe|enough|needed|required|unused|redundant) (?:since|because|as)|"
    r"not (?:a|an|the) [\w-]+ but)\b|, not (?:a |an |the )?`?[\w.-]+`?(?: [\w-]+)?(?:[.,;]|$)",
    re.I,
)
"""A sentence that says why (stricter than :data:`WHY_RE`: it needs no choice word beside it)."""
ARTIFACT_RE = lazy_compile(
    r"`[^`\n]{2,}`|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b|\b[a-z_][a-z0-9_]*(?:\(\)|/\d)|"
    r"\b[\w-]+\.(?:py|ts|tsx|js|jsx|rs|go|rb|ex|exs|java|kt|swift|c|h|cpp|cs|php|md|json|toml|ya?ml|sh|css|html)\b"
)
"""A name from the code: a `quoted` piece, a CamelCase name, ``fn()``/``fn/2``, a file."""


REASON_WORDS = (
    "instead",
    "rather",
    "because",
    "since",
    "decid",
    "chose",
    "choos",
    "opt",
    "going with",
    "go with",
    "switch",
    "prefer",
    "better",
    "simpler",
    "safer",
    "won't",
    "will not",
    "need",
    "trade",
    "so that",
    "avoid",
    "otherwise",
    "that's why",
    "which means",
    " not ",
    "keep",
    "right way",
    "simplest",
    "cleanest",
)
"""Words one of which a sentence stating a decision or a reason holds."""


def may_give_reasons(text: str) -> bool:
    """A cheap test before :func:`choices`: whether ``text``'s head holds a word a decision or reason needs."""
    low = text[:MINE_CHARS].lower()
    return any(w in low for w in REASON_WORDS)


def choices(text: str, limit: int = 2) -> list[str]:
    """The agent's decisions in ``text``, with their reasons: sentences that state a choice and give its reason
    or the alternative, then sentences that say why something about the code is so (a reason and a name from
    the code in one sentence); not narration ("Let me check ..."), not questions."""
    head_text = text[:MINE_CHARS]
    chose = CHOICE_RE.search(head_text) is not None
    if not chose and BECAUSE_RE.search(head_text) is None and NOT_BUT_RE.search(head_text) is None:
        return []
    strong: list[str] = []
    reasoned: list[str] = []
    found = plain_sentences(text)
    for n, sentence in enumerate(found):
        if _NARRATION_RE.match(sentence) and re.search(r"\binstead\b|\brather than\b", sentence, re.I) is None:
            # "Let me check X - it needs to Y": what follows the dash may be the decision; the rest is narration.
            parts = re.split(r"\s[-—–]\s", sentence, maxsplit=1)
            if len(parts) < 2:
                continue
            sentence = parts[1][:1].upper() + parts[1][1:]
        if chose and CHOICE_RE.search(sentence) and (WHY_RE.search(sentence) or _reason_follows(found, n)):
            strong.append(short(_with_reason(sentence, found, n), 300))
        elif len(sentence) >= 30 and (
            NOT_BUT_RE.search(sentence) or (BECAUSE_RE.search(sentence) and ARTIFACT_RE.search(sentence))
        ):
            reasoned.append(short(_with_reason(sentence, found, n), 300))
        if len(strong) >= limit:
            break
    return (strong + reasoned)[:limit]


NOT_BUT_RE = lazy_compile(r"\b(?:needs? to|must|should) [^.]{3,80}, not (?:a |an |the )?\S+", re.I)
""""it needs to update the computer input, not a raw assign": a decision stated against its alternative."""


def _reason_follows(found: list[str], n: int) -> bool:
    """Whether the sentence after ``found[n]`` gives its reason ("The reason is ...", "That's fine since ...")."""
    return n + 1 < len(found) and BECAUSE_RE.search(found[n + 1]) is not None and not _NARRATION_RE.match(found[n + 1])


def _with_reason(sentence: str, found: list[str], n: int) -> str:
    """``sentence`` with the next one when that one gives the reason."""
    return f"{sentence} {found[n + 1]}" if _reason_follows(found, n) else sentence


FINDING_RE = lazy_compile(
    r"^(?:I see\b|Good[!.,]? (?:I (?:can )?see|so)\b|(?:It )?[Tt]urns out\b|Found\b|Looks like\b|It seems\b|"
    r"Apparently\b|Interesting\b|Aha\b|So the\b|The (?:issue|problem|cause|culprit|reason) (?:is|was)\b|"
    r"[\w.`]+ (?:doesn't|does not|isn't|is not|only) (?:exist|take|accept|support|return|work)s?\b|"
    r"[\w.`-]+ (?:reports|complains|flags|warns)\b)"
)
"""A sentence of the agent's that tells what it found out about the code (how the code or a tool really is)."""


def findings(text: str, limit: int = 2) -> list[str]:
    """The agent's findings in ``text``: sentences that say what it found out, naming something of the code."""
    out: list[str] = []
    said = plain_sentences(text[:MINE_CHARS])
    for n, sentence in enumerate(said):
        found = FINDING_RE.match(sentence)
        if found is not None and ARTIFACT_RE.search(sentence) and len(sentence) >= 30:
            then = said[n + 1] if n + 1 < len(said) else ""
            # What the agent does about it, when it says so next ("Let me extract the inner logic into a helper.")
            out.append(short(sentence, 260) + (f" -> {short(then, 160)}" if _ABOUT_IT_RE.match(then) else ""))
            if len(out) >= limit:
                break
    return out


_ABOUT_IT_RE = lazy_compile(r"(?:Let me|I'll|I will|So I(?:'ll| will)?|The fix is|Fix:|Instead,?) \w")


def diagnosis(text: str) -> str | None:
    """The agent's first sentence in ``text`` that says why something failed or what the fix is."""
    if not DIAGNOSIS_RE.search(text, 0, MINE_CHARS):
        return None
    for sentence in plain_sentences(text):
        if DIAGNOSIS_RE.search(sentence):
            return short(sentence, 240)
    return None
