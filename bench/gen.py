"""Generate realistic pi-format (v3) session files for benchmarks.

The output imitates a long pi coding-agent session: user prompts, tool loops (assistant with
thinking + text + toolCalls -> chained toolResults -> ... -> final assistant text), usage blocks
that grow with the context, settings changes, labels, custom entries, user-run bash, images,
branches (with branch summaries) and compactions (with structured summaries and file lists).

Everything is derived from ``random.Random(seed)`` (plus a seed-independent text corpus), so the
same seed always produces the same bytes.

Usage::

    python bench/gen.py OUT.jsonl --entries 100000 [--seed 0]
    python bench/gen.py OUT.jsonl --entries 200000 --context-messages 30000 --compact-at 900000 \
        --steps 20 --scale 0.1

or from Python::

    stats = generate("/tmp/s.jsonl", 10_000, seed=1)
    stats = generate("/tmp/big.jsonl", 200_000, seed=1, shape=Shape(compact_at=900_000, context_messages=3000))

The defaults imitate a 200k-token window that compacts often. ``Shape`` makes sessions whose active
context is large: a higher compaction threshold (a 1M-token window, or none at all), longer tool
loops, smaller outputs, and a stop once the context holds a given number of messages. With the
default shape the bytes are those of earlier versions for the same seed.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import random
import struct
import sys
import time
import uuid
import zlib
from collections.abc import Iterator
from functools import lru_cache
from itertools import islice
from typing import Any

import msgspec

__all__ = ["GenStats", "Shape", "generate", "main"]

# --------------------------------------------------------------------------------------------
# Tunables

COMPACT_THRESHOLD = 150_000  # estimated context tokens (chars / 4) that trigger a compaction
KEEP_RECENT_TOKENS = 20_000  # tokens kept after a compaction (pi's keepRecentTokens)
SYSTEM_PROMPT_TOKENS = 4_600  # system prompt + tool definitions, added to every request
USER_IMAGE_PROB = 0.04  # user prompts with a pasted screenshot
READ_IMAGE_PROB = 0.015  # reads of an image file (result carries the image)
IMAGE_TOKENS = 1_200
CACHE_TTL_MS = 5 * 60 * 1000

MODELS: tuple[tuple[str, str, str], ...] = (
    # (provider, modelId, api)
    ("anthropic", "claude-sonnet-4-5", "anthropic-messages"),
    ("anthropic", "claude-opus-4-5", "anthropic-messages"),
    ("openai", "gpt-5.1-codex", "openai-responses"),
    ("google", "gemini-2.5-pro", "google-generative-ai"),
)
MODEL_WEIGHTS = (0.55, 0.3, 0.1, 0.05)
# $ per million tokens: input, output, cacheRead, cacheWrite
PRICES: dict[str, tuple[float, float, float, float]] = {
    "claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75),
    "claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "gpt-5.1-codex": (1.25, 10.0, 0.125, 0.0),
    "gemini-2.5-pro": (1.25, 10.0, 0.31, 0.0),
}
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
THINKING_WEIGHTS = (0.06, 0.04, 0.1, 0.4, 0.35, 0.05)
THINKING_SCALE = {"off": 0.0, "minimal": 0.5, "low": 0.75, "medium": 1.0, "high": 1.2, "xhigh": 1.45}

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclasses.dataclass
class GenStats:
    entries: int
    bytes: int
    median_line_bytes: float
    mean_line_bytes: float
    branches: int
    compactions: int
    images: int
    context_messages: int = 0
    """Messages in the active context at the end (the generator's own count, pi's rules)."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """How the session grows (the defaults: a 200k-token window compacting at 150k)."""

    compact_at: int = COMPACT_THRESHOLD
    """Estimated context tokens that trigger a compaction; 0: never compact."""
    steps: float = 7.5
    """Mean tool-loop length of a turn (assistant/tool-result rounds)."""
    scale: float = 1.0
    """Multiplies the size of every text the session holds (code, prose, outputs, thinking)."""
    context_messages: int = 0
    """Stop once the active context holds this many messages (0: write every entry asked for)."""


# --------------------------------------------------------------------------------------------
# Seed-independent text corpus (built once per process)


def _split(words: str) -> tuple[str, ...]:
    return tuple(words.split())


_NOUNS = _split(
    "session entry leaf branch context message tool result summary compaction model provider "
    "token usage cache path file header parser writer index tree node event listener queue "
    "buffer stream request response config setting label cursor snapshot range chunk offset "
    "reader watcher handler server client transport schema codec record state store manager "
    "registry editor selector renderer prompt budget estimate window limit thread "
)
_VERBS = _split(
    "get set build load save parse render apply resolve find collect compute estimate append "
    "remove update create open close flush read write emit handle validate normalize merge split "
    "select walk migrate serialize restore track sync "
)
_ADJS = _split("empty stale missing pending partial nested cached dirty detached orphaned truncated large ")
_TYPES = (
    "string",
    "number",
    "boolean",
    "SessionEntry",
    "AgentMessage",
    "ToolCall",
    "Usage",
    "Model<Api>",
    "ContextWindow",
    "CompactionResult",
    "BranchSummary",
    "Record<string, unknown>",
    "readonly SessionEntry[]",
    "Map<string, SessionEntry>",
    "AbortSignal",
    "ThinkingLevel",
    "FileOperations",
    "string | undefined",
)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


class _Words:
    """Random identifiers and phrases, all drawn from one Random."""

    def __init__(self, r: random.Random) -> None:
        self.r = r

    def noun(self) -> str:
        return self.r.choice(_NOUNS)

    def fn(self) -> str:
        r = self.r
        tail = _cap(r.choice(_NOUNS)) if r.random() < 0.3 else ""
        return r.choice(_VERBS) + _cap(r.choice(_NOUNS)) + tail

    def typ(self) -> str:
        r = self.r
        return r.choice(_TYPES) if r.random() < 0.6 else _cap(r.choice(_NOUNS)) + _cap(r.choice(_NOUNS))

    def var(self) -> str:
        r = self.r
        return r.choice(_NOUNS) + (_cap(r.choice(_NOUNS)) if r.random() < 0.4 else "")

    def lit(self) -> str:
        r = self.r
        k = r.random()
        if k < 0.4:
            return str(r.randint(0, 4096))
        if k < 0.8:
            return f'"{r.choice(_NOUNS)}-{r.choice(_ADJS)}"'
        return r.choice(("true", "false", "undefined", "null", "[]", "{}"))


def _stmt(w: _Words) -> str:
    r = w.r
    k = r.randrange(9)
    if k == 0:
        return f"const {w.var()} = {w.fn()}({w.var()}, {w.lit()});"
    if k == 1:
        return f"if ({w.var()}.{w.noun()} === {w.lit()}) return {w.lit()};"
    if k == 2:
        return f"this.{w.var()}.set({w.var()}.id, {w.var()});"
    if k == 3:
        return f"{w.var()}.push({{ type: {w.lit()}, {w.noun()}: {w.var()}.{w.noun()} }});"
    if k == 4:
        return f"// {_cap(w.r.choice(_VERBS))} the {w.noun()} before the {w.noun()} is {w.r.choice(_ADJS)}."
    if k == 5:
        return f"let {w.var()} = await this.{w.fn()}({w.var()}.{w.noun()} ?? {w.lit()});"
    if k == 6:
        return f"{w.var()} += Math.ceil({w.var()}.length / 4);"
    if k == 7:
        return f'log.debug("{w.fn()}", {{ {w.noun()}: {w.var()}.length, {w.noun()}: {w.lit()} }});'
    return f"{w.var()}.{w.noun()} = {w.fn()}({w.var()});"


def _code_block(w: _Words) -> str:
    r = w.r
    k = r.randrange(8)
    t = "\t"
    if k == 0:
        return "\n".join(
            f'import {{ {w.fn()}, type {_cap(w.noun())}{_cap(w.noun())} }} from "./{w.noun()}-{w.noun()}.js";'
            for _ in range(r.randint(2, 8))
        )
    if k == 1:
        a, b, v = w.var(), w.var(), w.var()
        body = "\n".join(t + _stmt(w) for _ in range(r.randint(2, 9)))
        return (
            f"/**\n * {_cap(r.choice(_VERBS))}s the {w.noun()} for a {w.noun()}.\n */\n"
            f"export function {w.fn()}({a}: {w.typ()}, {b}: {w.typ()}): {w.typ()} {{\n"
            f"{t}const {v} = {a}.{w.fn()}({b});\n{t}if (!{v}) {{\n"
            f"{t}{t}throw new Error(`{_cap(w.noun())} not found: ${{{b}}}`);\n{t}}}\n"
            f"{body}\n{t}return {v};\n}}"
        )
    if k == 2:
        body = "\n".join(t + t + _stmt(w) for _ in range(r.randint(2, 10)))
        return (
            f"{t}/** {_cap(r.choice(_VERBS))} the {w.noun()} {w.noun()}. */\n"
            f"{t}async {w.fn()}({w.var()}: {w.typ()}): Promise<{w.typ()}> {{\n{body}\n{t}}}"
        )
    if k == 3:
        n = r.randint(3, 9)
        fields = "\n".join(f"{t}{w.var()}{'?' if r.random() < 0.3 else ''}: {w.typ()};" for _ in range(n))
        return f"export interface {_cap(w.noun())}{_cap(w.noun())} {{\n{fields}\n}}"
    if k == 4:
        v = w.var()
        return (
            f'{t}it("{r.choice(_VERBS)}s the {w.noun()} when the {w.noun()} is {r.choice(_ADJS)}", '
            f"async () => {{\n{t}{t}const {v} = await {w.fn()}({w.lit()});\n"
            + "".join(f"{t}{t}{_stmt(w)}\n" for _ in range(r.randint(0, 3)))
            + f"{t}{t}expect({v}.{w.noun()}).toBe({w.lit()});\n{t}}});"
        )
    if k == 5:
        v = w.var()
        n = r.randint(2, 6)
        cases = "".join(f'{t}{t}case "{w.noun()}":\n{t}{t}{t}return {w.fn()}({v});\n' for _ in range(n))
        return f"{t}switch ({v}.type) {{\n{cases}{t}{t}default:\n{t}{t}{t}return undefined;\n{t}}}"
    if k == 6:
        a, v = w.var(), w.var()
        inner = "\n".join(t * 3 + _stmt(w) for _ in range(r.randint(1, 4)))
        return (
            f"{t}for (let i = {a}.length - 1; i >= 0; i--) {{\n{t}{t}const {v} = {a}[i];\n"
            f'{t}{t}if ({v}.type === "{w.noun()}") {{\n{inner}\n{t}{t}}}\n{t}}}'
        )
    return "\n".join(t + _stmt(w) for _ in range(r.randint(3, 12)))


_SENTENCES = (
    "Let me look at how `{fn}` handles the {noun} case before touching {file}.",
    "The {noun} is built in `{fn}`, which walks the {noun2} list from the leaf back to the root.",
    "If I change the signature of `{fn}`, {n} call sites need updating, mostly in {file}.",
    "Actually, wait. The {noun} may be {adj} here when the {noun2} was never written, so I need a guard.",
    "The test failure says expected {n} but got {n2}; that looks like an off-by-one in the {noun} loop.",
    "I think the cleanest approach is to move the {noun} logic into a `{Type}` helper and keep `{fn}` thin.",
    "The {noun2} cache is keyed by {noun}, so invalidating it on every {noun3} change would be expensive.",
    "So the flow is: `{fn}` reads the {noun}, then `{fn2}` merges it with the {noun2} and emits an event.",
    "There is already a `{Type}` type that covers this, so I should reuse it instead of adding another one.",
    "The user wants the {noun} to survive a restart, which means it has to be persisted next to the {noun2}.",
    "Both `{fn}` and `{fn2}` duplicate the {noun} parsing; extracting it removes about {n} lines.",
    "I should run the tests after this edit, because {file} is imported by the {noun} module as well.",
    "Hmm, `{fn}` is async but the caller in {file} does not await it, which explains the {adj} {noun}.",
    "The {noun} estimate is chars / 4, so a {n}-character {noun2} costs roughly {n2} tokens.",
    "This is the same pattern as in {file}: collect, sort by timestamp, then keep the newest {noun2}.",
    "I need to keep the public API of `{fn}` unchanged, so the new parameter has to be optional.",
    "The error comes from the {noun} being {adj} after the {noun2} was reset; resetting both fixes it.",
    "Let me check whether anything else depends on the {noun} order before I change the sort.",
    "Good, the type check passes now, but there are still {n} lint warnings about unused imports.",
    "The simplest fix is to clamp the {noun} index to the {noun2} length instead of trusting the input.",
    "Edge case: an {adj} {noun} with no {noun2}. `{fn}` should return early there rather than throw.",
    "I will write the test first so the regression in `{fn}` is pinned down before refactoring.",
    "Looking at the diff, the {noun} change in {file} also touched formatting; I will keep that minimal.",
    "The {noun2} listener fires twice because `{fn}` subscribes again after every {noun}.",
    "That means the {noun} has to be computed lazily, the first time `{fn2}` asks for it.",
    "Now {file} compiles, and the remaining failure is in the {noun} snapshot test, which is expected.",
)
_BULLETS = (
    "Moved `{fn}` into {file} and re-exported it from the index.",
    "`{fn}` now takes a `{Type}` instead of positional arguments.",
    "Added tests for the {adj} {noun} case ({n} new assertions).",
    "Fixed the off-by-one in the {noun} loop of `{fn}`.",
    "Removed the duplicate {noun} parsing from `{fn2}`.",
    "The {noun2} cache is invalidated only when the {noun} changes.",
    "Renamed `{fn}` to `{fn2}`; all call sites updated.",
    "`npm run check` passes; {n} tests pass.",
)


def _fill(w: _Words, tmpl: str, files: list[str]) -> str:
    r = w.r
    return tmpl.format(
        fn=w.fn(),
        fn2=w.fn(),
        noun=w.noun(),
        noun2=w.noun(),
        noun3=w.noun(),
        adj=r.choice(_ADJS),
        Type=_cap(w.noun()) + _cap(w.noun()),
        n=r.randint(2, 40),
        n2=r.randint(2, 400),
        file=f"`{r.choice(files)}`",
    )


class _Corpus:
    def __init__(self) -> None:
        r = random.Random(0xC7D)
        w = _Words(r)
        files = [f"src/{w.noun()}/{w.noun()}-{w.noun()}.ts" for _ in range(60)]
        parts: list[str] = []
        size = 0
        while size < 1_500_000:
            b = _code_block(w)
            parts.append(b)
            size += len(b) + 2
        self.code = "\n\n".join(parts) + "\n"
        sents: list[str] = []
        size = 0
        while size < 500_000:
            para = " ".join(_fill(w, r.choice(_SENTENCES), files) for _ in range(r.randint(2, 6)))
            sents.append(para)
            size += len(para) + 2
        self.prose = "\n\n".join(sents) + "\n"
        self.bullets = [_fill(w, r.choice(_BULLETS), files) for _ in range(2000)]
        self.b64 = base64.b64encode(r.randbytes(400_000)).decode()
        self.pngs = [_png(r, s) for s in (8, 12, 16, 24, 32)]


@lru_cache(maxsize=1)
def _corpus() -> _Corpus:
    return _Corpus()


def _png(r: random.Random, size: int) -> str:
    """A valid small RGB PNG (gradient with some noise), base64-encoded."""
    rows = bytearray()
    for y in range(size):
        rows.append(0)
        for x in range(size):
            rows += bytes(((x * 255 // size) ^ r.randrange(32), (y * 255 // size), r.randrange(256)))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode()


# --------------------------------------------------------------------------------------------
# Helpers


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


_B62_TABLE = bytes(ord(_B62[i % 62]) for i in range(256))


def _b62(n: int, width: int) -> str:
    """``width`` base62 characters from the low bits of ``n`` (one byte per character)."""
    return (n & ((1 << (8 * width)) - 1)).to_bytes(width, "little").translate(_B62_TABLE).decode()


def _text_tokens(n_chars: int) -> int:
    return (n_chars + 3) // 4


# Path node: (id, kind, est_tokens, ctx_after, fileops, settings, extra)
_Node = tuple[str, str, int, int, tuple[tuple[str, str], ...], tuple[int, str], Any]


_MESSAGE_KINDS = frozenset({"user", "assistant", "toolResult", "bash", "custom_message", "branch_summary"})
"""Path node kinds that show one message in the context (a compaction shows its summary)."""


class _Gen:
    def __init__(self, seed: int, shape: Shape = Shape()) -> None:
        self.shape = shape
        self.msgs = 0  # messages in the active context
        self.path_msgs: list[int] = []  # self.msgs after each path node
        r = self.r = random.Random(seed)
        self.w = _Words(r)
        self.c = _corpus()
        self.ids: set[str] = set()
        self.count = 0
        self.leaf: str | None = None
        self.path: list[_Node] = []
        self.ctx = 0  # estimated context tokens on the current path (excluding the system prompt)
        self.cached = SYSTEM_PROMPT_TOKENS  # prompt prefix currently in the provider cache
        self.last_call_ms = 0
        self.clock = 1_767_600_000_000 + (seed % 997) * 86_400_000 + r.randrange(86_400_000)
        self.settings: tuple[int, str] = (0, "medium")
        self.branches = 0
        self.compactions = 0
        self.images = 0
        self.next_branch = r.randint(120, 400)
        self.next_model = r.randint(1500, 4000)
        self.next_thinking = r.randint(600, 2000)
        self.next_label = r.randint(150, 1200)
        self.next_custom = r.randint(200, 800)
        self.named = False
        self.task_turns = 0
        self.task_title = ""
        self.focus: list[str] = []
        self.max_steps = max(60, int(8 * shape.steps))
        self._project()

    # ---- project ------------------------------------------------------------------------------

    def _project(self) -> None:
        r, w = self.r, self.w
        name = r.choice(("tidewater", "lumen-cli", "orbit-api", "quarry", "fernhill", "pi-ext-todo"))
        self.cwd = f"/home/dev/work/{name}"
        files: list[str] = []
        for pkg in r.sample(("core", "cli", "tui", "server", "ai", "agent"), 3):
            dirs = [w.noun() for _ in range(r.randint(2, 3))]
            for _ in range(r.randint(8, 14)):
                base = f"{w.noun()}-{w.noun()}"
                files.append(f"packages/{pkg}/src/{r.choice(dirs)}/{base}.ts")
                if r.random() < 0.4:
                    files.append(f"packages/{pkg}/test/{base}.test.ts")
        files += ["README.md", "docs/architecture.md", "CHANGELOG.md", "package.json", "tsconfig.json"]
        self.files = sorted(set(files))
        # per file: how the agent spells it (absolute or relative) and its size in lines
        self.spell = {f: (f"{self.cwd}/{f}" if r.random() < 0.15 else f) for f in self.files}
        self.lines = {
            f: r.randint(450, 1300) if r.random() < 0.07 else max(8, int(r.lognormvariate(3.95, 0.25)))
            for f in self.files
        }
        self.tests = [f for f in self.files if f.endswith(".test.ts")] or self.files[:3]
        self.screenshots = [f"docs/screenshots/{w.noun()}-{i}.png" for i in range(1, 5)]

    # ---- low-level emission -------------------------------------------------------------------

    def _new_id(self) -> str:
        while True:
            i = f"{self.r.getrandbits(32):08x}"
            if i not in self.ids:
                self.ids.add(i)
                return i

    def _append(
        self,
        typ: str,
        fields: dict[str, Any],
        kind: str,
        est: int,
        fileops: tuple[tuple[str, str], ...] = (),
        extra: Any = None,
    ) -> dict[str, Any]:
        eid = self._new_id()
        entry = {"type": typ, "id": eid, "parentId": self.leaf, "timestamp": _iso(self.clock)}
        entry.update(fields)
        self.ctx += est
        if kind in _MESSAGE_KINDS:
            self.msgs += 1
        self.path.append((eid, kind, est, self.ctx, fileops, self.settings, extra))
        self.path_msgs.append(self.msgs)
        self.leaf = eid
        self.count += 1
        return entry

    def _tick(self, lo_ms: float, median_ms: float) -> int:
        self.clock += int(lo_ms + self.r.lognormvariate(0, 1.0) * median_ms)
        return self.clock

    # ---- text ---------------------------------------------------------------------------------

    def _code(self, n: int) -> str:
        code = self.c.code
        if self.shape.scale != 1.0:
            n = int(n * self.shape.scale)
        n = max(1, min(n, len(code) - 2))
        o = self.r.randrange(len(code) - n)
        s = code.rfind("\n", 0, o) + 1
        e = code.rfind("\n", s, s + n)
        return code[s : e if e > s else s + n]

    def _prose(self, n: int) -> str:
        prose = self.c.prose
        if self.shape.scale != 1.0:
            n = int(n * self.shape.scale)
        n = max(1, min(n, len(prose) - 2))
        o = self.r.randrange(len(prose) - n)
        s = prose.find(". ", o)
        s = o if s < 0 or s > o + 300 else s + 2
        e = max(prose.rfind(". ", s, s + n), prose.rfind(".\n", s, s + n))
        if e <= s:  # no sentence end inside: finish the current sentence
            e = prose.find(".", s + n)
        return prose[s : e + 1 if e > s else s + n].strip()

    def _b64(self, n: int) -> str:
        b = self.c.b64
        n = min(n, len(b) - 1)
        o = self.r.randrange(len(b) - n)
        return b[o : o + n]

    def _logn(self, median: float, sigma: float, lo: int, hi: int) -> int:
        return max(lo, min(hi, int(self.r.lognormvariate(0, sigma) * median)))

    def _image(self) -> dict[str, Any]:
        self.images += 1
        return {"type": "image", "data": self.r.choice(self.c.pngs), "mimeType": "image/png"}

    def _fill(self, tmpl: str) -> str:
        return _fill(self.w, tmpl, self.focus or self.files)

    # ---- model / usage ------------------------------------------------------------------------

    @property
    def model(self) -> tuple[str, str, str]:
        return MODELS[self.settings[0]]

    def _usage(self, out_tokens: int, start_ms: int) -> dict[str, Any]:
        r = self.r
        provider, model_id, _ = self.model
        prompt = SYSTEM_PROMPT_TOKENS + self.ctx
        if start_ms - self.last_call_ms > CACHE_TTL_MS:
            self.cached = 0
        self.last_call_ms = start_ms
        cached = min(self.cached, prompt - 1)
        if provider == "anthropic":
            inp = r.randint(1, 12)
            cache_read = cached
            cache_write = max(0, prompt - cache_read - inp)
        else:
            cache_read = cached // 128 * 128 if cached > 1024 else 0
            cache_write = 0
            inp = prompt - cache_read
        self.cached = prompt + out_tokens
        p_in, p_out, p_cr, p_cw = PRICES[model_id]
        cost = {
            "input": inp * p_in / 1e6,
            "output": out_tokens * p_out / 1e6,
            "cacheRead": cache_read * p_cr / 1e6,
            "cacheWrite": cache_write * p_cw / 1e6,
        }
        cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
        return {
            "input": inp,
            "output": out_tokens,
            "cacheRead": cache_read,
            "cacheWrite": cache_write,
            "totalTokens": inp + out_tokens + cache_read + cache_write,
            "cost": cost,
        }

    def _response_id(self) -> str:
        provider = self.model[0]
        bits = self.r.getrandbits(192)
        if provider == "anthropic":
            return "msg_01" + _b62(bits, 22)
        if provider == "openai":
            return f"resp_{bits:048x}"
        return _b62(bits, 24)

    def _tool_call_id(self) -> str:
        provider = self.model[0]
        bits = self.r.getrandbits(192)
        if provider == "anthropic":
            return "toolu_01" + _b62(bits, 22)
        if provider == "openai":
            return f"call_{_b62(bits, 24)}|fc_{bits >> 100:024x}"
        return f"call_{bits & 0xFFFFFFFFFFFF:012x}"

    def _thinking_block(self) -> tuple[dict[str, Any], int]:
        n = self._logn(480 * THINKING_SCALE[self.settings[1]], 0.4, 40, 9000)
        text = self._prose(n)
        provider = self.model[0]
        if provider == "anthropic":
            sig = self._b64(int(len(text) * 1.75) + 220)
        elif provider == "openai":
            sig = json.dumps(
                {
                    "type": "reasoning",
                    "id": f"rs_{self.r.getrandbits(160):040x}",
                    "encrypted_content": self._b64(int(len(text) * 1.4) + 400),
                    "summary": [],
                },
                separators=(",", ":"),
            )
        else:
            sig = self._b64(int(len(text) * 1.3) + 200)
        return {"type": "thinking", "thinking": text, "thinkingSignature": sig}, len(text)

    def _assistant(
        self, content: list[dict[str, Any]], out_chars: int, stop: str, start_ms: int, **extra: Any
    ) -> dict[str, Any]:
        provider, model_id, api = self.model
        out_tokens = _text_tokens(out_chars) + self.r.randint(5, 60)
        if stop in ("error", "aborted"):
            out_tokens = 0
        usage = (
            self._usage(out_tokens, start_ms)
            if stop != "error"
            else {
                "input": 0,
                "output": 0,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 0,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            }
        )
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": content,
            "api": api,
            "provider": provider,
            "model": model_id,
        }
        if stop != "error":
            msg["responseId"] = self._response_id()
        msg["usage"] = usage
        msg["stopReason"] = stop
        msg.update(extra)
        msg["timestamp"] = start_ms
        msg["durationMs"] = self.clock - start_ms
        return msg

    # ---- tools --------------------------------------------------------------------------------

    def _pick_tool(self) -> str:
        x = self.r.random()
        return "read" if x < 0.34 else "bash" if x < 0.68 else "edit" if x < 0.92 else "write"

    def _tool_call(self, tool: str) -> tuple[dict[str, Any], Any]:
        """Returns (toolCall block, plan for the result)."""
        r = self.r
        f = r.choice(self.focus) if self.focus and r.random() < 0.8 else r.choice(self.files)
        p = self.spell[f]
        args: dict[str, Any]
        if tool == "read":
            if r.random() < READ_IMAGE_PROB:
                f = r.choice(self.screenshots)
                args = {"path": f}
                plan: Any = ("image", f)
            else:
                args = {"path": p}
                total = self.lines[f]
                if total > 300 and r.random() < 0.95:
                    off = r.randint(1, total - 150)
                    lim = r.choice((30, 40, 50, 50, 60, 60, 80))
                    args["offset"] = off
                    args["limit"] = lim
                    plan = ("read", f, off, min(lim, total - off + 1), total)
                else:
                    plan = ("read", f, 1, total, total)
        elif tool == "bash":
            cmd, plan = self._bash_command(f)
            args = {"command": cmd}
            if r.random() < 0.15:
                args["timeout"] = r.choice((60, 120, 300))
        elif tool == "edit":
            old = self._code(self._logn(230, 0.5, 30, 4000))
            lines = old.split("\n")
            k = r.randrange(len(lines))
            new_lines = [*lines[:k], self._code(self._logn(90, 0.5, 10, 1500)), *lines[k + 1 :]]
            new = "\n".join(new_lines)
            args = {"path": p, "oldText": old, "newText": new}
            plan = ("edit", f, lines, new_lines)
        else:
            big = r.random() < 0.02
            size = self._logn(20_000, 0.3, 9000, 40_000) if big else self._logn(1500, 0.4, 200, 9000)
            content = self._code(size)
            args = {"path": p, "content": content}
            plan = ("write", f, len(content.encode()))
        block = {"type": "toolCall", "id": self._tool_call_id(), "name": tool, "arguments": args}
        return block, plan

    def _bash_command(self, f: str) -> tuple[str, Any]:
        r, w = self.r, self.w
        x = r.random()
        if x < 0.25:
            t = r.choice(self.tests)
            cmd = r.choice((f"npx vitest run {t}", "npm test", f"npx vitest run {t} -t {w.noun()}"))
            return cmd, ("test",)
        if x < 0.4:
            cmd = r.choice(("npm run check", "npx tsc --noEmit", "npm run check 2>&1 | head -80"))
            return cmd, ("check", "tsc" in cmd)
        if x < 0.52:
            return r.choice(("git diff", f"git diff {f}", "git diff --stat")), ("diff",)
        if x < 0.7:
            ident = w.fn()
            return f"rg -n '{ident}' {r.choice(('packages', 'src', f.rsplit('/', 1)[0]))}", ("rg",)
        if x < 0.85:
            return r.choice(("git status", "git log --oneline -n 20", "ls -la", f"wc -l {f}")), ("small",)
        if x < 0.86:
            return r.choice(("npm run build 2>&1", "cat logs/server.log", "npx vitest run 2>&1")), ("big",)
        return f"sed -n '{r.randint(1, 400)},+{r.randint(20, 120)}p' {f}", ("code",)

    def _bash_output(self, plan: Any) -> tuple[str, int, dict[str, Any] | None]:
        """Returns (output, exitCode, truncation details or None)."""
        r = self.r
        kind = plan[0]
        if kind == "test":
            lines = []
            n = r.randint(8, 45)
            for _ in range(n):
                t = r.choice(self.tests)
                lines.append(f" ✓ {t} ({r.randint(1, 60)} tests) {r.randint(2, 900)}ms")
            code = 0
            if r.random() < 0.35:
                code = 1
                t = r.choice(self.tests)
                lines.append(f" ❯ {t} ({r.randint(3, 40)} tests | 1 failed) {r.randint(5, 900)}ms")
                lines.append(f"   × {self._fill('{fn} handles the {adj} {noun}')} {r.randint(1, 90)}ms")
                lines.append("\n⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯\n")
                lines.append(f" FAIL  {t} > {self.w.noun()} > {self._fill('{fn} keeps the {noun}')}")
                lines.append(f"AssertionError: expected {r.randint(0, 50)} to be {r.randint(0, 50)}")
                lines.append("\n- Expected\n+ Received\n")
                lines.append(f" ❯ {t}:{r.randint(10, 400)}:{r.randint(3, 40)}")
                lines.extend(f"    {i}| {ln}" for i, ln in enumerate(self._code(600).split("\n"), 40))
            ok = r.randint(20, 400)
            lines.append(f"\n Test Files  {'1 failed | ' if code else ''}{n} passed ({n + code})")
            lines.append(f"      Tests  {'1 failed | ' if code else ''}{ok} passed ({ok + code})")
            lines.append(f"   Duration  {r.uniform(0.4, 30):.2f}s")
            return "\n".join(lines) + "\n", code, None
        if kind == "check":
            out = ""  # tsc prints nothing on success
            if not plan[1]:
                pkg = self.cwd.rsplit("/", 1)[-1]
                out = f"\n> {pkg}@0.1.0 check\n> biome check --write . && tsc --noEmit\n\n"
                out += f"Checked {r.randint(40, 300)} files in {r.randint(20, 200)}ms. No fixes applied.\n"
            if r.random() < 0.4:
                errs = []
                for _ in range(r.randint(1, 12)):
                    f = r.choice(self.files)
                    errs.append(
                        f"{f}({r.randint(1, 900)},{r.randint(1, 40)}): error TS2345: Argument of type "
                        f"'{self.w.typ()}' is not assignable to parameter of type '{self.w.typ()}'."
                    )
                return out + "\n".join(errs) + "\n", 2, None
            return out, 0, None
        if kind == "diff":
            parts = []
            for f in r.sample(self.files, r.choice((1, 1, 1, 2, 2, 3))):
                body = self._code(self._logn(700, 0.5, 100, 8000)).split("\n")
                hunk = [(" " if r.random() < 0.7 else r.choice("+-")) + ln for ln in body]
                n = r.randint(1, 800)
                parts.append(
                    f"diff --git a/{f} b/{f}\nindex {r.getrandbits(28):07x}..{r.getrandbits(28):07x} 100644\n"
                    f"--- a/{f}\n+++ b/{f}\n@@ -{n},{len(body)} +{n},{len(body) + 2} @@\n" + "\n".join(hunk)
                )
            return "\n".join(parts) + "\n", 0, None
        if kind == "rg":
            lines = [
                f"{r.choice(self.files)}:{r.randint(1, 900)}:{ln.strip()}"
                for ln in self._code(self._logn(1000, 0.5, 80, 9000)).split("\n")
                if ln.strip()
            ]
            return "\n".join(lines) + "\n", 0 if lines else 1, None
        if kind == "small":
            lines = [f" M {f}" for f in r.sample(self.files, r.randint(1, 8))]
            lines += [f"?? {f}" for f in r.sample(self.files, r.randint(0, 3))]
            return "On branch main\nChanges not staged for commit:\n" + "\n".join(lines) + "\n", 0, None
        if kind == "code":
            return self._code(self._logn(1800, 0.4, 200, 12_000)) + "\n", 0, None
        # big output, tail-truncated like pi's bash tool (2000 lines / 50 KB)
        total_lines = r.randint(2500, 9000)
        out = self._code(self._logn(22_000, 0.4, 15_000, 51_000))
        n_out = out.count("\n") + 1
        trunc = {
            "truncated": True,
            "truncatedBy": "bytes",
            "totalLines": total_lines,
            "totalBytes": total_lines * 38,
            "outputLines": n_out,
            "outputBytes": len(out.encode()),
            "lastLinePartial": False,
            "firstLineExceedsLimit": False,
            "maxLines": 2000,
            "maxBytes": 51200,
        }
        path = f"/tmp/pi-bash-{r.getrandbits(48):012x}.log"
        out += (
            f"\n\n[Showing lines {total_lines - n_out + 1}-{total_lines} of {total_lines} "
            f"(50.0KB limit). Full output: {path}]"
        )
        return out, r.choice((0, 0, 1)), {"truncation": trunc, "fullOutputPath": path}

    def _tool_result(self, call: dict[str, Any], plan: Any) -> tuple[dict[str, Any], int]:
        r = self.r
        name = call["name"]
        is_error = False
        details: dict[str, Any] | None = None
        content: list[dict[str, Any]]
        est = 0
        kind = plan[0]
        if kind == "image":
            content = [{"type": "text", "text": "Read image file [image/png]"}, self._image()]
            est = IMAGE_TOKENS
        elif kind == "read":
            _, f, off, n, total = plan
            text = self._prose(n * 60) if f.endswith(".md") else self._code(min(n * 36, 51200))
            if len(text) >= 51_000 or off + n - 1 < total:
                shown = text.count("\n") + 1
                end = off + shown - 1
                if len(text) >= 51_000:
                    details = {
                        "truncation": {
                            "truncated": True,
                            "truncatedBy": "bytes",
                            "totalLines": total,
                            "totalBytes": total * 36,
                            "outputLines": shown,
                            "outputBytes": len(text),
                            "lastLinePartial": False,
                            "firstLineExceedsLimit": False,
                            "maxLines": 2000,
                            "maxBytes": 51200,
                        }
                    }
                    text += f"\n\n[Showing lines {off}-{end} of {total} (50.0KB limit). "
                    text += f"Use offset={end + 1} to continue]"
                elif end < total:
                    text += f"\n\n[{total - end} more lines in file. Use offset={end + 1} to continue]"
            content = [{"type": "text", "text": text}]
        elif kind == "edit":
            _, f, old_lines, new_lines = plan
            if r.random() < 0.06:
                is_error = True
                text = (
                    f"Could not find the exact text in {call['arguments']['path']}. The old text must match "
                    "exactly including all whitespace and newlines."
                )
            else:
                text = f"Successfully replaced text in {call['arguments']['path']}."
                first = r.randint(1, max(1, self.lines[f] - len(old_lines)))
                width = len(str(first + len(new_lines) + 4))
                ctx_before = self._code(120).split("\n")[-3:]
                diff = ["     ..."]
                diff += [f" {first - len(ctx_before) + i:>{width}} {ln}" for i, ln in enumerate(ctx_before)]
                diff += [f"-{first + i:>{width}} {ln}" for i, ln in enumerate(old_lines)]
                diff += [f"+{first + i:>{width}} {ln}" for i, ln in enumerate(new_lines)]
                after = first + len(new_lines)
                ctx_after = self._code(160).split("\n")[:4]
                diff += [f" {after + i:>{width}} {ln}" for i, ln in enumerate(ctx_after)]
                diff.append("     ...")
                details = {"diff": "\n".join(diff), "firstChangedLine": first}
            content = [{"type": "text", "text": text}]
        elif kind == "write":
            text = f"Successfully wrote {plan[2]} bytes to {call['arguments']['path']}"
            content = [{"type": "text", "text": text}]
        else:  # bash
            text, code, details = self._bash_output(plan)
            if code != 0:
                is_error = True
                text = text + f"\n\nCommand exited with code {code}"
            elif not text.strip():
                text = "(no output)"
            content = [{"type": "text", "text": text}]
        if kind != "image":
            est = _text_tokens(len(content[0]["text"]))
        msg: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call["id"],
            "toolName": name,
            "content": content,
        }
        if details is not None:
            msg["details"] = details
        msg["isError"] = is_error
        msg["timestamp"] = self.clock
        return msg, est

    # ---- session structure --------------------------------------------------------------------

    def entries(self) -> Iterator[dict[str, Any]]:
        r = self.r
        self.settings = (r.choices(range(len(MODELS)), MODEL_WEIGHTS)[0], r.choice(("medium", "high")))
        provider, model_id, _ = self.model
        yield self._append("model_change", {"provider": provider, "modelId": model_id}, "setting", 0)
        self._tick(1, 1)
        yield self._append("thinking_level_change", {"thinkingLevel": self.settings[1]}, "setting", 0)
        while True:
            yield from self._between_turns()
            yield from self._turn()

    def _between_turns(self) -> Iterator[dict[str, Any]]:
        r = self.r
        if self.shape.compact_at and self.ctx > self.shape.compact_at:
            yield from self._compact()
        if self.count >= self.next_branch:
            yield from self._branch()
        if self.count >= self.next_model:
            self.next_model = self.count + r.randint(1500, 4000)
            self._tick(500, 3000)
            idx = r.choices(range(len(MODELS)), MODEL_WEIGHTS)[0]
            if idx != self.settings[0]:
                self.settings = (idx, self.settings[1])
                self.cached = 0
                provider, model_id, _ = self.model
                yield self._append("model_change", {"provider": provider, "modelId": model_id}, "setting", 0)
        if self.count >= self.next_thinking:
            self._tick(300, 1000)
            level = r.choices(THINKING_LEVELS, THINKING_WEIGHTS)[0]
            # low-effort periods are short: users switch back quickly
            short = level in ("off", "minimal")
            self.next_thinking = self.count + (r.randint(60, 300) if short else r.randint(600, 2000))
            if level != self.settings[1]:
                self.settings = (self.settings[0], level)
                yield self._append("thinking_level_change", {"thinkingLevel": level}, "setting", 0)
        if self.count >= self.next_label:
            self.next_label = self.count + r.randint(400, 2500)
            cands = [n[0] for n in self.path[-200:] if n[1] in ("user", "assistant")]
            if cands:
                target = r.choice(cands)
                self._tick(1000, 4000)
                label = r.choice(("checkpoint", "before-refactor", "good-state", "wip", "tests-green", "bug"))
                lab = {"targetId": target, "label": f"{label}-{r.randint(1, 99)}"}
                yield self._append("label", lab, "x", 0)
                if r.random() < 0.2:
                    self._tick(1000, 20_000)
                    yield self._append("label", {"targetId": target}, "x", 0)
        if self.count >= self.next_custom:
            self.next_custom = self.count + r.randint(200, 800)
            self._tick(50, 500)
            if r.random() < 0.7:
                text = self._fill("Reminder: {n} TODOs remain open; next: make `{fn}` handle the {noun}.")
                est = _text_tokens(len(text))
                fields = {
                    "customType": r.choice(("todo-reminder", "lint-report", "git-status")),
                    "content": text if r.random() < 0.6 else [{"type": "text", "text": text}],
                    "display": r.random() < 0.8,
                    "details": {"open": r.randint(0, 12)},
                }
                yield self._append("custom_message", fields, "custom_message", est)
            else:
                todos = [self._fill("{fn}") for _ in range(r.randint(0, 6))]
                data = {"enabled": r.random() < 0.5, "todos": todos}
                yield self._append(
                    "custom", {"customType": r.choice(("plan-mode", "todo-state")), "data": data}, "x", 0
                )
        if r.random() < 0.025:
            yield self._bash_execution()

    def _bash_execution(self) -> dict[str, Any]:
        r = self.r
        self._tick(3000, 20_000)
        cmd, plan = self._bash_command(r.choice(self.files))
        out, code, details = self._bash_output(plan)
        self._tick(100, 3000)
        msg: dict[str, Any] = {
            "role": "bashExecution",
            "command": cmd,
            "output": out,
            "exitCode": code,
            "cancelled": False,
            "truncated": details is not None,
        }
        if details is not None:
            msg["fullOutputPath"] = details["fullOutputPath"]
        exclude = r.random() < 0.2
        if exclude:
            msg["excludeFromContext"] = True
        msg["timestamp"] = self.clock
        est = 0 if exclude else _text_tokens(len(cmd) + len(out))
        return self._append("message", {"message": msg}, "bash", est)

    def _new_task(self) -> None:
        r = self.r
        self.task_turns = r.randint(3, 14)
        self.focus = r.sample(self.files, min(len(self.files), r.randint(2, 7)))
        self.task_title = self._fill(
            r.choice(
                (
                    "Fix the {adj} {noun} in {fn}",
                    "Refactor {fn} to take a {Type}",
                    "Add tests for the {noun} {noun2}",
                    "Speed up {fn} on large {noun}s",
                    "Make the {noun} survive restarts",
                )
            )
        )

    def _user_text(self) -> str:
        r = self.r
        f = self.spell[r.choice(self.focus)]
        x = r.random()
        if x < 0.25:
            head = self._fill(
                r.choice(
                    (
                        "{Type} is broken again, can you look at `{fn}`? ",
                        "ok, now make `{fn}` handle the {adj} {noun} case. ",
                        "add a test for `{fn}` and run it. ",
                        "rename `{fn}` to `{fn2}` everywhere. ",
                        "the tests fail with this: ",
                    )
                )
            )
            return head + f"@{f}\n\n```\n" + self._code(self._logn(900, 0.7, 100, 12_000)) + "\n```"
        if x < 0.6:
            return self._fill(
                r.choice(
                    (
                        "read @" + f + " and {fn}. keep the public API of `{fn2}` unchanged.",
                        "ok, run the tests and fix whatever is failing",
                        "explain how the {noun} {noun2} works, then fix the {adj} {noun3} bug",
                        "continue",
                        "looks good. commit it and move on to the {noun} part",
                        "no, that's wrong: the {noun} must stay {adj}. revert that and try again",
                    )
                )
            )
        return self._prose(self._logn(350, 0.9, 30, 5000))

    def _turn(self) -> Iterator[dict[str, Any]]:
        r = self.r
        if self.task_turns <= 0:
            self._new_task()
        self.task_turns -= 1
        self._tick(4000, 60_000 if r.random() < 0.97 else 3_000_000)
        text = self._user_text()
        est = _text_tokens(len(text))
        content: str | list[dict[str, Any]]
        if r.random() < USER_IMAGE_PROB:
            content = [{"type": "text", "text": text}, self._image()]
            est += IMAGE_TOKENS
        else:
            content = [{"type": "text", "text": text}] if r.random() < 0.8 else text
        msg = {"role": "user", "content": content, "timestamp": self.clock - r.randint(1, 12)}
        yield self._append("message", {"message": msg}, "user", est)

        steps = 0 if r.random() < 0.06 else min(self.max_steps, 1 + int(r.expovariate(1 / self.shape.steps)))
        thinking_on = self.settings[1] != "off"
        for _ in range(steps):
            start = self.clock + r.randint(5, 40)
            x = r.random()
            if x < 0.004:
                self._tick(500, 5000)
                err = r.choice(("529 overloaded_error: Overloaded", "terminated", "Connection error."))
                msg = self._assistant([], 0, "error", start, errorMessage=err)
                yield self._append("message", {"message": msg}, "assistant", 0)
                return
            blocks: list[dict[str, Any]] = []
            out = 0
            if thinking_on and r.random() < 0.7:
                b, n = self._thinking_block()
                blocks.append(b)
                out += n
            if x < 0.007:
                self._tick(1000, 4000)
                msg = self._assistant(blocks, out, "aborted", start, errorMessage="Request was aborted")
                yield self._append("message", {"message": msg}, "assistant", _text_tokens(out))
                return
            if r.random() < 0.45:
                t = self._prose(self._logn(160, 0.7, 20, 1500))
                blocks.append({"type": "text", "text": t})
                out += len(t)
            n_calls = 1 if r.random() < 0.85 else r.randint(2, 4)
            calls: list[tuple[dict[str, Any], Any]] = []
            tool = self._pick_tool()
            for i in range(n_calls):
                block, plan = self._tool_call(tool if i == 0 or tool == "read" else self._pick_tool())
                calls.append((block, plan))
                blocks.append(block)
                out += len(block["name"]) + len(json.dumps(block["arguments"]))
            self._tick(1500, 3000 + out)
            fileops = tuple((b["name"], b["arguments"]["path"]) for b, _ in calls if b["name"] in _FILE_TOOLS)
            msg = self._assistant(blocks, out, "toolUse", start)
            yield self._append("message", {"message": msg}, "assistant", _text_tokens(out), fileops)
            for block, plan in calls:
                if block["name"] == "bash":
                    self._tick(80, 2500)
                else:
                    self._tick(2, 30)
                res, est = self._tool_result(block, plan)
                yield self._append("message", {"message": res}, "toolResult", est)
            if self.shape.compact_at and self.ctx > self.shape.compact_at * 1.15:
                yield from self._compact()

        start = self.clock + r.randint(5, 40)
        blocks = []
        out = 0
        if thinking_on and r.random() < 0.6:
            b, n = self._thinking_block()
            blocks.append(b)
            out += n
        t = self._final_text()
        blocks.append({"type": "text", "text": t})
        out += len(t)
        self._tick(2000, 4000 + out * 2)
        msg = self._assistant(blocks, out, "stop", start)
        yield self._append("message", {"message": msg}, "assistant", _text_tokens(out))
        if not self.named:  # pi names the session after the first completed turn
            self.named = True
            self._tick(10, 200)
            yield self._append("session_info", {"name": self.task_title}, "x", 0)

    def _final_text(self) -> str:
        r = self.r
        parts = [self._prose(self._logn(300, 0.7, 30, 3000))]
        if r.random() < 0.55:
            parts.append("\n\n## Summary\n")
            parts.extend("\n- " + r.choice(self.c.bullets) for _ in range(r.randint(2, 8)))
        if r.random() < 0.25:
            parts.append("\n\n```typescript\n" + self._code(self._logn(500, 0.6, 80, 5000)) + "\n```")
        if r.random() < 0.4:
            parts.append("\n\n" + self._prose(self._logn(200, 0.7, 30, 1500)))
        return "".join(parts)

    # ---- compaction and branching -------------------------------------------------------------

    def _file_lists(
        self, nodes: list[_Node], prev: tuple[tuple[str, ...], tuple[str, ...]] | None
    ) -> tuple[list[str], list[str]]:
        read: dict[str, None] = dict.fromkeys(prev[0]) if prev else {}
        modified: dict[str, None] = dict.fromkeys(prev[1]) if prev else {}
        for node in nodes:
            for op, p in node[4]:
                if op == "read":
                    read[p] = None
                else:
                    modified[p] = None
        return sorted(p for p in read if p not in modified), sorted(modified)

    def _summary_md(self, goal: str, read: list[str], modified: list[str], budget: int) -> str:
        r = self.r
        b = self.c.bullets
        out = [f"## Goal\n{goal}. {self._prose(self._logn(220, 0.5, 60, 600))}\n"]
        out.append("\n## Constraints & Preferences\n")
        out.extend(f"- {self._fill(t)}\n" for t in r.sample(_CONSTRAINTS, r.randint(1, 4)))
        out.append("\n## Progress\n### Done\n")
        out.extend(f"- [x] {r.choice(b)}\n" for _ in range(r.randint(2, 7)))
        out.append("\n### In Progress\n")
        n = r.randint(1, 3)
        out.extend(f"- [ ] {self._fill('Make `{fn}` handle the {adj} {noun}')}\n" for _ in range(n))
        out.append("\n### Blocked\n" + ("- (none)\n" if r.random() < 0.7 else "- Flaky snapshot test\n"))
        out.append("\n## Key Decisions\n")
        out.extend(
            f"- **{self._fill('{Type}')}**: {self._prose(self._logn(120, 0.5, 30, 400))}\n"
            for _ in range(r.randint(2, 5))
        )
        out.append("\n## Next Steps\n")
        out.extend(f"{i}. {self._fill('Update `{fn}` in {file}')}\n" for i in range(1, r.randint(3, 6)))
        out.append("\n## Critical Context\n")
        used = sum(map(len, out)) + sum(len(x) + 1 for x in read) + sum(len(x) + 1 for x in modified)
        extra = max(1, (budget - used) // 160)
        out.extend(f"- {self._prose(self._logn(130, 0.5, 40, 400))}\n" for _ in range(min(extra, 14)))
        text = "".join(out)
        if read:
            text += "\n<read-files>\n" + "\n".join(read) + "\n</read-files>"
        if modified:
            text += "\n\n<modified-files>\n" + "\n".join(modified) + "\n</modified-files>"
        return text

    def _compact(self) -> Iterator[dict[str, Any]]:
        r = self.r
        path = self.path
        prev_idx = -1
        for i in range(len(path) - 1, -1, -1):
            if path[i][1] == "compaction":
                prev_idx = i
                break
        acc = 0
        i = len(path) - 1
        while i > prev_idx + 1 and acc < KEEP_RECENT_TOKENS:
            acc += path[i][2]
            i -= 1
        cut = i
        while cut < len(path) and path[cut][1] not in ("user", "assistant"):
            cut += 1
        if cut >= len(path) or cut <= prev_idx:
            return
        prev = path[prev_idx][6] if prev_idx >= 0 else None
        start = prev[0] if prev else 0
        read, modified = self._file_lists(path[start:cut], prev[1:] if prev else None)
        tokens_before = SYSTEM_PROMPT_TOKENS + self.ctx
        self._tick(15_000, 20_000)
        summary = self._summary_md(self.task_title, read, modified, self._logn(3000, 0.3, 1500, 5200))
        s_tok = _text_tokens(len(summary))
        kept = sum(n[2] for n in path[cut:])
        fields: dict[str, Any] = {
            "summary": summary,
            "firstKeptEntryId": path[cut][0],
            "tokensBefore": tokens_before,
            "details": {"readFiles": read, "modifiedFiles": modified},
        }
        if r.random() < 0.8:
            inp = tokens_before - kept
            p = PRICES[self.model[1]]
            fields["usage"] = {
                "input": inp,
                "output": s_tok,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": inp + s_tok,
                "cost": {
                    "input": inp * p[0] / 1e6,
                    "output": s_tok * p[1] / 1e6,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "total": (inp * p[0] + s_tok * p[1]) / 1e6,
                },
            }
        self.ctx = s_tok + kept
        self.msgs = 1 + sum(1 for n in path[cut:] if n[1] in _MESSAGE_KINDS)  # the summary, then the kept part
        self.cached = 0
        self.compactions += 1
        yield self._append("compaction", fields, "compaction", 0, extra=(cut, tuple(read), tuple(modified)))

    def _branch(self) -> Iterator[dict[str, Any]]:
        r = self.r
        n = len(self.path)
        lo = max(1, n - 50)
        for j in range(n - 1, lo - 1, -1):  # do not branch away from a fresh compaction
            if self.path[j][1] == "compaction":
                lo = j + 1
                break
        cands = [i for i in range(lo, n - 5) if self.path[i][1] == "user"]
        if not cands:
            self.next_branch = self.count + 20
            return
        self.next_branch = self.count + r.randint(120, 400)
        i = r.choice(cands)
        target = i - 1
        old_leaf = self.leaf
        abandoned = self.path[target + 1 :]
        del self.path[target + 1 :]
        del self.path_msgs[target + 1 :]
        self.msgs = self.path_msgs[target]
        node = self.path[target]
        self.leaf = node[0]
        self.ctx = node[3]
        self.settings = node[5]
        self.cached = SYSTEM_PROMPT_TOKENS + self.ctx
        self.branches += 1
        if r.random() < 0.6:
            self._tick(8000, 15_000)
            read, modified = self._file_lists(abandoned, None)
            body = self._summary_md(self.task_title, read, modified, self._logn(900, 0.4, 400, 2500))
            summary = (
                "The user explored a different conversation branch before returning here.\n"
                "Summary of that exploration:\n\n" + body
            )
            fields = {
                "fromId": old_leaf,
                "summary": summary,
                "details": {"readFiles": read, "modifiedFiles": modified},
            }
            yield self._append("branch_summary", fields, "branch_summary", _text_tokens(len(summary)))


_FILE_TOOLS = ("read", "write", "edit")
_CONSTRAINTS = (
    "Keep the public API of `{fn}` unchanged",
    "No new dependencies",
    "E2E tests only, no mocks of the {noun} layer",
    "Tabs for indentation, biome formatting",
    "Node 20 compatibility",
    "Do not touch {file} without asking",
)


# --------------------------------------------------------------------------------------------
# Public API


def generate(path: str | os.PathLike[str], entries: int, *, seed: int = 0, shape: Shape = Shape()) -> GenStats:
    """Write a pi v3 session file with a header and ``entries`` entry lines (fewer when
    ``shape.context_messages`` is reached first); return its stats."""
    if entries < 0:
        raise ValueError("entries must be >= 0")
    g = _Gen(seed, shape)
    stop = shape.context_messages
    enc = msgspec.json.Encoder()
    sizes: list[int] = []
    r = g.r
    ts = g.clock - 1000
    rand_a, rand_b = r.getrandbits(12), r.getrandbits(62)
    sid = uuid.UUID(int=(ts << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b)
    header = {"type": "session", "version": 3, "id": str(sid), "timestamp": _iso(ts), "cwd": g.cwd}
    total = 0
    with open(path, "wb", buffering=1 << 20) as f:
        line = enc.encode(header)
        f.write(line)
        f.write(b"\n")
        total += len(line) + 1
        for entry in islice(g.entries(), entries):
            line = enc.encode(entry)
            f.write(line)
            f.write(b"\n")
            sizes.append(len(line))
            if stop and g.msgs >= stop:
                break
    total += sum(sizes) + len(sizes)
    ss = sorted(sizes)
    n = len(ss)
    median = 0.0 if n == 0 else float(ss[n // 2]) if n % 2 else (ss[n // 2 - 1] + ss[n // 2]) / 2
    return GenStats(
        entries=n,
        bytes=total,
        median_line_bytes=median,
        mean_line_bytes=round(sum(ss) / n, 1) if n else 0.0,
        branches=g.branches,
        compactions=g.compactions,
        images=g.images,
        context_messages=g.msgs,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate a realistic pi v3 session file.")
    ap.add_argument("out", help="output .jsonl path")
    ap.add_argument("--entries", type=int, required=True, help="number of entry lines (after the header)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--compact-at", type=int, default=COMPACT_THRESHOLD, help="tokens that trigger a compaction; 0: never"
    )
    ap.add_argument("--steps", type=float, default=7.5, help="mean tool-loop length of a turn")
    ap.add_argument("--scale", type=float, default=1.0, help="size of every text, relative to the default")
    ap.add_argument("--context-messages", type=int, default=0, help="stop once the context holds this many messages")
    args = ap.parse_args(argv)
    if args.steps <= 0 or args.scale <= 0:
        ap.error("--steps and --scale must be positive")
    shape = Shape(args.compact_at, args.steps, args.scale, args.context_messages)
    t0 = time.perf_counter()
    stats = generate(args.out, args.entries, seed=args.seed, shape=shape)
    out = dataclasses.asdict(stats)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
