"""ctxd's JSON-RPC protocol: method names, typed params and results, notification payloads.

Every name here is a contract other tools read (docs/protocol.md documents each with an example).
Params are structured from plain dicts with :func:`structure_params`, which names the offending
field in its error; the server turns that into JSON-RPC -32602.
"""

from __future__ import annotations

import typing
from typing import Any, Literal, TypeVar

import attrs
import cattrs

from ctxd.context.view import TEXT_CAP, cap

# history/search and history/expand's params and results (defined apart: this module is near its size limit).
from ctxd.service.history_types import *  # noqa: F403

# The method and notification names (defined apart, importable without attrs or cattrs).
from ctxd.service.names import *  # noqa: F403


class InvalidParams(ValueError):
    """Params that do not fit a method: ``field`` names the culprit."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# --- limits -----------------------------------------------------------------------------------

# TEXT_CAP (from ctxd.context.view, 256): free text a payload carries (a session's name and title,
# a label, an error in a listing) is cut to that many characters, ending in "…"; the whole text
# stays available from ``session/entry``.
NAME_LIMIT = 4096
"""The longest name or label ``session/create``, ``session/label`` and ``session/append`` accept."""
ERROR_CAP = 2000
"""Error texts (answers, ``compaction/status``) are cut to this many characters."""


def capped(value: Any, limit: int = TEXT_CAP) -> Any:
    """``value`` cut to ``limit`` characters if it is a string, else as it is."""
    return cap(value, limit) if isinstance(value, str) else value


def capped_row(row: dict[str, Any]) -> dict[str, Any]:
    """A listing row with its free text cut to :data:`TEXT_CAP` (the cwd to :data:`NAME_LIMIT`)."""
    for key in ("name", "title", "error"):
        row[key] = capped(row.get(key))
    row["cwd"] = capped(row.get("cwd"), NAME_LIMIT)
    return row


def error_text(text: str | None) -> str | None:
    """An error text as a payload carries it: cut to :data:`ERROR_CAP` characters."""
    return cap(text, ERROR_CAP)


# --- params -----------------------------------------------------------------------------------


@attrs.define
class SessionListParams:
    roots: list[str] | None = None
    cwd: str | None = None


@attrs.define
class CompactPromptParams:
    """``compact/prompt`` takes nothing."""


@attrs.define
class SessionParams:
    session: str
    """A session file path (absolute or relative to a root) or a session id."""


@attrs.define
class SessionCreateParams:
    cwd: str = attrs.field(metadata={"min_len": 1})
    root: str | None = None
    name: str | None = attrs.field(default=None, metadata={"max_len": NAME_LIMIT})


@attrs.define
class SessionAppendParams:
    session: str
    entries: list[dict[str, Any]] = attrs.field(factory=list)
    """Complete or partial entries; missing id, parentId and timestamp are filled in."""
    messages: list[dict[str, Any]] = attrs.field(factory=list)
    """Plain AgentMessages, wrapped as ``message`` entries after ``entries``."""
    parentId: str | None = None
    """Parent of the first entry (default: the leaf). Explicit null starts a new root."""
    durability: Literal["flush", "fsync", "fsync-batch"] | None = None


@attrs.define
class SessionTreeParams:
    session: str
    collapse: int = attrs.field(default=8, metadata={"min": 0})
    offset: int = attrs.field(default=0, metadata={"min": 0})
    limit: int | None = attrs.field(default=None, metadata={"min": 0})
    fromId: str | None = None
    """Only the linear run starting at this entry, uncollapsed (to expand a collapsed run)."""


@attrs.define
class SessionEntryParams:
    session: str
    entryId: str


@attrs.define
class SessionLabelParams:
    session: str
    entryId: str
    label: str | None = attrs.field(default=None, metadata={"max_len": NAME_LIMIT})


@attrs.define
class SessionPinParams:
    """``session/pin``: pin (``pinned`` true, the default) or unpin (false) a message entry."""

    session: str
    entryId: str
    pinned: bool = True


@attrs.define
class SessionCheckParams:
    session: str
    repair: bool = False
    """Also repair: append a leaf marker past a broken branch, write ``<file>.repaired.jsonl``."""


@attrs.define
class ContextBuildParams:
    session: str
    leafId: str | None = None
    format: Literal["pi", "openai"] = "pi"
    truncateToolResults: bool = False
    contextWindow: int | None = attrs.field(default=None, metadata={"min": 1})
    includeMessages: bool = True
    countModel: str | None = None
    """Also count tokens exactly with this model's tokenizer (litellm, offline)."""
    sinceLeafId: str | None = None
    """The leaf of a context the client holds (with ``sinceRevision``): only what follows it is sent."""
    sinceRevision: str | None = None


@attrs.define
class CompactParams:
    session: str
    instructions: str | None = None
    dryRun: bool = False
    leafId: str | None = None
    keepRecentTokens: int | None = attrs.field(default=None, metadata={"min": 0})
    workDoneToken: str | int | None = None


@attrs.define
class BranchParams:
    session: str
    entryId: str
    summarize: bool = False
    instructions: str | None = None


@attrs.define
class FileOpsParams:
    """An agent's file tracking (pi's ``FileOperations``, its sets as lists)."""

    read: list[str] = attrs.field(factory=list)
    written: list[str] = attrs.field(factory=list)
    edited: list[str] = attrs.field(factory=list)


@attrs.define
class CompactSummarizeParams:
    """An agent's own compaction to summarise (pi's ``session_before_compact`` preparation)."""

    messages: list[dict[str, Any]]
    """The messages the summary replaces (AgentMessages, oldest first)."""
    turnPrefix: list[dict[str, Any]] = attrs.field(factory=list)
    previousSummary: str | None = None
    previousDetails: dict[str, Any] | None = None
    fileOps: FileOpsParams | None = None
    instructions: str | None = None
    reason: Literal["manual", "threshold", "overflow"] = "manual"
    firstKeptEntryId: str = ""
    tokensBefore: int = 0
    settings: dict[str, Any] | None = None
    """Compaction settings over the daemon's (``model``, ``apiBase``, ``apiKey``, ``contextWindow``, ...)."""
    modelWindow: int | None = None
    """The summarising model's window, when the caller knows it."""
    workDoneToken: str | int | None = None
    entryIds: list[str] = attrs.field(factory=list)
    """The entry id of each of ``messages`` ("" where unknown): where the fact ledger's facts were seen."""
    turnPrefixEntryIds: list[str] = attrs.field(factory=list)
    previousLedger: dict[str, Any] | None = None
    """The newest fact ledger on the agent's branch (``details.ctxd.ledger`` of an earlier compaction), when the
    previous compaction has none (the agent compacted on its own meanwhile)."""


@attrs.define
class BranchSummarizeParams:
    """A branch an agent is leaving (pi's ``session_before_tree`` entries to summarise)."""

    entries: list[dict[str, Any]]
    instructions: str | None = None
    reserveTokens: int | None = None
    settings: dict[str, Any] | None = None
    modelWindow: int | None = None


@attrs.define
class ContextCompositionParams:
    session: str
    leafId: str | None = None
    """The context at this entry (default: the leaf); only the leaf's is followed by notifications."""
    top: int = attrs.field(default=10, metadata={"min": 0, "max": 100})
    """How many of the heaviest entries to list."""


@attrs.define
class ContextTruncateParams:
    messages: list[dict[str, Any]]
    contextWindow: int | None = None
    """The model's window (tokens); None: unknown (the fixed limit applies)."""
    limitChars: int | None = None
    """A limit the user set (characters), instead of the window's share."""


# --- notification payloads ---------------------------------------------------------------------


@attrs.define
class DidChange:
    session: str
    """The session file's path."""
    sessionId: str | None
    ids: list[str]
    """Entries added (empty for a session that is not open, or after a reload)."""
    leafId: str | None
    origin: Literal["ctxd", "external"]
    """ctxd wrote it, or another process did."""
    reloaded: bool = False
    """The file was truncated or replaced and read again."""


@attrs.define
class DidCreate:
    session: str
    sessionId: str | None = None


@attrs.define
class DidDelete:
    session: str


@attrs.define
class CompactionStatus:
    session: str
    state: Literal["running", "succeeded", "failed", "cancelled"]
    trigger: str
    tokensBefore: int | None = None
    tokensAfter: int | None = None
    error: str | None = attrs.field(default=None, converter=error_text)
    entryId: str | None = None
    retry: bool = False
    """After an overflow: the client should retry its request once."""
    path: str | None = None
    """How the summary was made (model, offline, fallback-…)."""


@attrs.define
class ContextUsage:
    session: str
    tokens: int
    window: int
    percent: float
    threshold: int
    leafId: str | None = None


# --- structuring ----------------------------------------------------------------------------

P = TypeVar("P")
_converter = cattrs.Converter(forbid_extra_keys=False)


def _strict(kind: type, accept: tuple[type, ...], reject: tuple[type, ...] = ()) -> None:
    # cattrs would turn 5 into "5" and "3" into 3; a protocol should say the type is wrong instead.
    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, accept) or isinstance(value, reject):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    _converter.register_structure_hook(kind, hook)


_strict(str, (str,))
_strict(int, (int,), (bool,))
_strict(bool, (bool,))
_strict(float, (int, float), (bool,))


def _is_list(kind: Any) -> bool:
    return typing.get_origin(kind) is list


def _strict_list(kind: Any) -> Any:
    # cattrs would take any iterable: "abc" as ["a", "b", "c"], {"a": 1} as ["a"].
    (item,) = typing.get_args(kind) or (Any,)

    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, list):
            raise TypeError(f"expected list, got {type(value).__name__}")
        return [_converter.structure(v, item) for v in value]

    return hook


def _is_dict(kind: Any) -> bool:
    return typing.get_origin(kind) is dict


def _strict_dict(kind: Any) -> Any:
    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected dict, got {type(value).__name__}")
        return value  # JSON keys are strings; the values are kept as they came

    return hook


_converter.register_structure_hook_factory(_is_list, _strict_list)
_converter.register_structure_hook_factory(_is_dict, _strict_dict)


def _token(value: Any, _: Any) -> Any:
    # A progress token (LSP's ProgressToken): cattrs has no hook for a str | int union.
    if value is None or (isinstance(value, str | int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"expected a string or an integer, got {type(value).__name__}")


_converter.register_structure_hook(str | int | None, _token)


def structure_params(params: Any, cls: type[P]) -> P:
    """``params`` (a dict) as ``cls``, or InvalidParams naming the field that does not fit."""
    if params is None or params == []:
        params = {}  # some clients (Lua's empty table) send [] for "no params"
    if not isinstance(params, dict):
        raise InvalidParams(f"params must be an object, not {type(params).__name__}")
    fields = {f.name: f for f in attrs.fields(cls)}  # type: ignore[arg-type]
    for name, field in fields.items():
        if field.default is attrs.NOTHING and name not in params:
            raise InvalidParams(f"missing required field {name!r}", name)
    try:
        typed = _converter.structure(params, cls)
    except cattrs.ClassValidationError as exc:
        field = _culprit(exc)
        raise InvalidParams(f"invalid value for field {field!r}: {_reason(exc)}", field) from None
    except (TypeError, ValueError) as exc:
        raise InvalidParams(f"invalid params: {exc}") from None
    for name, field in fields.items():
        _check_limits(name, field.metadata, getattr(typed, name))
    return typed


def _check_limits(name: str, limits: Any, value: Any) -> None:
    """The bounds a field declares in its metadata (``min``, ``min_len``, ``max_len``)."""
    if value is None or not limits:
        return
    if "min" in limits and value < limits["min"]:
        raise InvalidParams(f"invalid value for field {name!r}: must be at least {limits['min']}, got {value}", name)
    if "max" in limits and value > limits["max"]:
        raise InvalidParams(f"invalid value for field {name!r}: must be at most {limits['max']}, got {value}", name)
    if "min_len" in limits and len(value) < limits["min_len"]:
        raise InvalidParams(f"invalid value for field {name!r}: must not be empty", name)
    if "max_len" in limits and len(value) > limits["max_len"]:
        raise InvalidParams(
            f"invalid value for field {name!r}: longer than {limits['max_len']} characters ({len(value)})", name
        )


def _culprit(exc: cattrs.ClassValidationError) -> str | None:
    for sub in exc.exceptions:
        note = getattr(sub, "__notes__", None) or []
        for n in note:
            if "attribute" in str(n):
                return str(n).split("attribute", 1)[1].split()[0].strip("'`\"")
    return None


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    if inner:
        return _reason(inner[0])
    return str(exc) or type(exc).__name__


def to_json(obj: Any) -> Any:
    return _converter.unstructure(obj)
