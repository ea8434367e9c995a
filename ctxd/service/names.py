"""The protocol's method and notification names: the contract other tools call (no imports, so
that the daemon can name its capabilities before anything heavy has loaded)."""

SESSION_LIST = "session/list"
SESSION_OPEN = "session/open"
SESSION_CREATE = "session/create"
SESSION_APPEND = "session/append"
SESSION_TREE = "session/tree"
SESSION_ENTRY = "session/entry"
SESSION_LABEL = "session/label"
SESSION_FORK = "session/fork"
SESSION_STATS = "session/stats"
SESSION_LEDGER = "session/ledger"
SESSION_CHECK = "session/check"
SESSION_PIN = "session/pin"
CONTEXT_BUILD = "context/build"
COMPACT = "compact"
BRANCH = "branch"
COMPACT_SUMMARIZE = "compact/summarize"
BRANCH_SUMMARIZE = "branch/summarize"
CONTEXT_TRUNCATE = "context/truncate"
CONTEXT_COMPOSITION = "context/composition"
HISTORY_SEARCH = "history/search"
HISTORY_EXPAND = "history/expand"
SESSION_FACTS = "session/facts"
SESSION_ARCHIVE = "session/archive"
COMPACT_PROMPT = "compact/prompt"
COMPACT_FACTS = "compact/facts"
METHODS = (
    SESSION_LIST,
    SESSION_OPEN,
    SESSION_CREATE,
    SESSION_APPEND,
    SESSION_TREE,
    SESSION_ENTRY,
    SESSION_LABEL,
    SESSION_FORK,
    SESSION_STATS,
    SESSION_LEDGER,
    SESSION_CHECK,
    SESSION_PIN,
    CONTEXT_BUILD,
    COMPACT,
    BRANCH,
    COMPACT_SUMMARIZE,
    BRANCH_SUMMARIZE,
    CONTEXT_TRUNCATE,
    CONTEXT_COMPOSITION,
    HISTORY_SEARCH,
    HISTORY_EXPAND,
    SESSION_FACTS,
    SESSION_ARCHIVE,
    COMPACT_PROMPT,
    COMPACT_FACTS,
)

DID_CHANGE = "session/didChange"
DID_CREATE = "session/didCreate"
DID_DELETE = "session/didDelete"
COMPACTION_STATUS = "compaction/status"
CONTEXT_USAGE = "context/usage"
COMPOSITION_CHANGED = "context/compositionChanged"
NOTIFICATIONS = (DID_CHANGE, DID_CREATE, DID_DELETE, COMPACTION_STATUS, CONTEXT_USAGE, COMPOSITION_CHANGED)

COMPACT_WILL_RUN = "compact/willRun"
"""Server -> client request before a compaction, when the client declared support."""

__all__ = [
    "BRANCH",
    "BRANCH_SUMMARIZE",
    "COMPACT",
    "COMPACTION_STATUS",
    "COMPACT_FACTS",
    "COMPACT_PROMPT",
    "COMPACT_SUMMARIZE",
    "COMPACT_WILL_RUN",
    "COMPOSITION_CHANGED",
    "CONTEXT_BUILD",
    "CONTEXT_COMPOSITION",
    "CONTEXT_TRUNCATE",
    "CONTEXT_USAGE",
    "DID_CHANGE",
    "DID_CREATE",
    "DID_DELETE",
    "HISTORY_EXPAND",
    "HISTORY_SEARCH",
    "METHODS",
    "NOTIFICATIONS",
    "SESSION_APPEND",
    "SESSION_ARCHIVE",
    "SESSION_CHECK",
    "SESSION_CREATE",
    "SESSION_ENTRY",
    "SESSION_FACTS",
    "SESSION_FORK",
    "SESSION_LABEL",
    "SESSION_LEDGER",
    "SESSION_LIST",
    "SESSION_OPEN",
    "SESSION_PIN",
    "SESSION_STATS",
    "SESSION_TREE",
]
