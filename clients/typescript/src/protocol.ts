/**
 * TypeScript mirrors of ctxd's JSON-RPC payloads (ctxd/service/protocol.py, ctxd/service/service.py,
 * ctxd/context/view.py, ctxd/compaction/external.py). Field names are the wire names. Nothing here
 * imports a host's API.
 */

// --- method and notification names ------------------------------------------------------------

export const Method = {
  sessionList: 'session/list',
  sessionOpen: 'session/open',
  sessionCreate: 'session/create',
  sessionAppend: 'session/append',
  sessionTree: 'session/tree',
  sessionEntry: 'session/entry',
  sessionLabel: 'session/label',
  sessionPin: 'session/pin',
  sessionFork: 'session/fork',
  sessionStats: 'session/stats',
  sessionLedger: 'session/ledger',
  contextBuild: 'context/build',
  compact: 'compact',
  branch: 'branch',
  compactSummarize: 'compact/summarize',
  branchSummarize: 'branch/summarize',
  contextTruncate: 'context/truncate',
  contextComposition: 'context/composition',
  historySearch: 'history/search',
  historyExpand: 'history/expand',
  sessionFacts: 'session/facts',
  sessionArchive: 'session/archive',
  compactPrompt: 'compact/prompt',
  compactFacts: 'compact/facts',
} as const;

export const Notification = {
  didChange: 'session/didChange',
  didCreate: 'session/didCreate',
  didDelete: 'session/didDelete',
  compactionStatus: 'compaction/status',
  contextUsage: 'context/usage',
  compositionChanged: 'context/compositionChanged',
} as const;

/** JSON-RPC error codes ctxd uses (docs/protocol.md, "Errors"). */
export const ErrorCode = {
  invalidParams: -32602,
  internal: -32603,
  refused: -31000,
  unknownSession: -31001,
  unknownEntry: -31002,
  invalidEntry: -31003,
  unusableSession: -31010,
  badHeader: -31011,
  unsupportedVersion: -31012,
  readOnlySession: -31013,
  compactionFailed: -31020,
  historyUnavailable: -31030,
  cancelled: -32800,
} as const;

export type ErrorKind = keyof typeof ErrorCode;

/** Codes of daemons before the move out of JSON-RPC's reserved range (-32000 + n). */
const LEGACY_CODES: Record<number, ErrorKind> = {
  [-32000]: 'refused',
  [-32001]: 'unknownSession',
  [-32002]: 'unknownEntry',
  [-32003]: 'invalidEntry',
  [-32010]: 'unusableSession',
  [-32011]: 'badHeader',
  [-32012]: 'unsupportedVersion',
  [-32013]: 'readOnlySession',
  [-32020]: 'compactionFailed',
};

/** What an error code means, for either numbering. */
export function errorKind(code: number | undefined): ErrorKind | undefined {
  if (code === undefined) {
    return undefined;
  }
  for (const [kind, value] of Object.entries(ErrorCode)) {
    if (value === code) {
      return kind as ErrorKind;
    }
  }
  return LEGACY_CODES[code];
}

// --- initialize -------------------------------------------------------------------------------

/** What the extension sends as initializationOptions (ctxd/service/config.py). */
export interface InitializationOptions {
  roots?: string[];
  /** Other agents' session folders (Claude Code, Codex), served read-only. */
  transcriptRoots?: string[];
  /** ctxd's archive of Claude Code transcripts (default: the daemon's, when it exists). */
  archiveRoots?: string[];
  watch?: boolean;
  autoCompact?: boolean;
  /** Let another process's turns trigger auto-compaction too (default false: the agent writing the file compacts it). */
  autoCompactExternal?: boolean;
  model?: string;
  apiBase?: string;
  compaction?: Record<string, unknown>;
  hooks?: { compactWillRun?: boolean };
  client?: { name: string; version: string };
  /** opencode's SQLite databases, read-only; a session in one is named `<database>#<session id>`. */
  opencodeDatabases?: string[];
  /** The share of the model's window one tool output may fill (context/truncate); default 0.3. */
  toolOutputShare?: number;
}

export interface CtxdCapabilities {
  version: string;
  methods: string[];
  notifications: string[];
  clientRequests: string[];
}

export interface InitializeResult {
  capabilities: { experimental?: { ctxd?: CtxdCapabilities } } & Record<string, unknown>;
  serverInfo?: { name: string; version?: string };
}

// --- sessions ---------------------------------------------------------------------------------

export interface SessionSummary {
  path: string;
  id: string;
  cwd: string;
  root: string;
  name: string | null;
  /** The first user message, flattened. */
  title: string;
  /** ISO timestamp from the header. */
  created: string;
  /** File modification time, seconds since the epoch. */
  modified: number;
  size: number;
  entries: number;
  parentSession?: string | null;
  error?: string | null;
  /** Whose session: "pi" (read-write), or "claude" / "codex" (read-only transcripts). */
  agent?: string;
  readOnly?: boolean;
  /** A copy in ctxd's archive of Claude Code transcripts; `archiveOf` is its live transcript (null once deleted). */
  archived?: boolean;
  archiveOf?: string | null;
  /** For a live transcript: its copies in ctxd's archive, the current one first. */
  archives?: string[];
}

// session/list, session/open, session/create, session/append, session/entry, session/label, session/pin
// (ctxd/service/protocol.py; tests/service/test_protocol_ts.py compares every params class field by field).

export interface SessionListParams {
  roots?: string[] | null;
  cwd?: string | null;
}

/** The params of the methods that take only a session (session/open, session/stats, session/ledger, ...). */
export interface SessionParams {
  /** A session file path (absolute or relative to a root) or a session id. */
  session: string;
}

export interface SessionCreateParams {
  cwd: string;
  root?: string | null;
  name?: string | null;
}

export interface SessionAppendParams {
  session: string;
  /** Complete or partial entries; missing id, parentId and timestamp are filled in. */
  entries?: Record<string, unknown>[];
  /** Plain AgentMessages, wrapped as `message` entries after `entries`. */
  messages?: Record<string, unknown>[];
  /** Parent of the first entry (default: the leaf). Explicit null starts a new root. */
  parentId?: string | null;
  durability?: 'flush' | 'fsync' | 'fsync-batch' | null;
}

export interface SessionEntryParams {
  session: string;
  entryId: string;
}

export interface SessionLabelParams {
  session: string;
  entryId: string;
  label?: string | null;
}

export interface SessionPinParams {
  session: string;
  entryId: string;
  /** Pin (true, the default) or unpin (false). */
  pinned?: boolean;
}

/** `ctxd check`'s params (a CLI command, not a JSON-RPC method). */
export interface SessionCheckParams {
  session: string;
  /** Also repair: append a leaf marker past a broken branch, write `<file>.repaired.jsonl`. */
  repair?: boolean;
}

export interface SessionListResult {
  roots: string[];
  sessions: SessionSummary[];
}

export interface ContextUsage {
  session: string;
  tokens: number;
  window: number;
  percent: number;
  threshold: number;
  leafId?: string | null;
}

export interface Diagnostic {
  line: number | null;
  message: string;
  [key: string]: unknown;
}

export interface SessionInfo {
  path: string;
  sessionId: string;
  cwd: string;
  name: string | null;
  version: number;
  entries: number;
  leafId: string | null;
  usage: ContextUsage;
  diagnostics: Diagnostic[];
}

// --- tree -------------------------------------------------------------------------------------

export interface TreeNodeRow {
  id: string;
  parentId: string | null;
  line: number;
  /** The entry's type: message, compaction, branch_summary, label, ... */
  type: string;
  /** user, assistant, toolResult, bashExecution, system, compaction, branchSummary, custom, or the type. */
  role: string;
  preview: string;
  tokens: number;
  labels: string[];
  childCount: number;
  onActivePath: boolean;
  isLeaf: boolean;
  depth: number;
  timestamp?: string | null;
  /** Pinned: compactions carry it verbatim after their summary (session/pin). */
  pinned?: boolean;
}

export interface CollapsedRow {
  type: 'collapsed';
  parentId: string;
  firstId: string;
  lastId: string;
  count: number;
  tokens: number | null;
  depth: number;
  onActivePath: boolean;
}

export type TreeRow = TreeNodeRow | CollapsedRow;

export function isCollapsed(row: TreeRow): row is CollapsedRow {
  return row.type === 'collapsed';
}

export interface SessionTreeParams {
  session: string;
  collapse?: number;
  offset?: number;
  limit?: number | null;
  /** Only the linear run starting at this entry, uncollapsed (to expand a collapsed run). */
  fromId?: string | null;
}

export interface SessionTreeResult {
  session: string;
  sessionId: string;
  name: string | null;
  leafId: string | null;
  entries: number;
  /** Rows before paging. */
  total: number;
  offset: number;
  rows: TreeRow[];
  /** Newer daemons: the context usage now, and whether the session is another agent's transcript. */
  usage?: ContextUsage;
  readOnly?: boolean;
}

/** A raw pi session entry. */
export interface Entry {
  type: string;
  id: string;
  parentId: string | null;
  timestamp?: string;
  [key: string]: unknown;
}

/** How ctxd made a compaction (entry.details.ctxd). Absent on compactions written by pi. */
export interface CompactionDetails {
  trigger?: string;
  path?: string;
  summarizer?: string;
  model?: string | null;
  durationMs?: number;
  usage?: Record<string, number> | null;
  cost?: number | null;
  failures?: string[];
  tokensAfter?: number;
  messagesSummarized?: number;
  turnPrefixMessages?: number;
  instructions?: string | null;
}

export interface CompactionEntry extends Entry {
  type: 'compaction';
  summary: string;
  firstKeptEntryId: string;
  tokensBefore: number;
  details?: { readFiles?: string[]; modifiedFiles?: string[]; ctxd?: CompactionDetails } & Record<string, unknown>;
}

export interface SessionEntryResult extends TreeNodeRow {
  entry: Entry;
  children: string[];
}

export interface PinResult {
  pinEntryId: string;
  entryId: string;
  pinned: boolean;
}

export interface LabelResult {
  labelEntryId: string;
  entryId: string;
  label: string | null;
}

/** Where a fact of the ledger was seen (compaction 0: since the newest compaction). */
export interface FactSeen {
  compaction: number;
  entryId: string | null;
  line: number | null;
  time: string | null;
}

/** One fact of the session's fact ledger (session/facts). */
export interface LedgerFact {
  kind: string;
  text: string;
  probes: string[];
  status: 'open' | 'resolved' | 'superseded';
  why: string | null;
  key: string | null;
  firstSeen: FactSeen;
  lastSeen: FactSeen;
}

/** session/facts: the session's fact ledger, read-only. */
/** session/archive: where ctxd keeps its copy of an opencode session (ctxd/service/agents.py). */
export interface SessionArchiveResult {
  session: string;
  /** The copy, `$XDG_DATA_HOME/ctxd/archive/opencode/<project>/<session id>.jsonl`. */
  path: string;
  /** Bytes written (0: the copy was up to date). */
  copied: number;
  /** Where the previous copy went when it held rows the database no longer has, else null. */
  rotated: string | null;
}

/** compact/prompt takes no params. */
export interface CompactPromptParams {}

/** compact/prompt: what ctxd asks an agent's own summariser for (ctxd/compaction/summary/prompts.py). */
export interface CompactPromptResult {
  /** A paragraph to add to the agent's compaction prompt: the summary's shape (state first, task by task). */
  shape: string;
  /** A whole compaction prompt in that shape (Codex's compact_prompt takes it). */
  prompt: string;
  /** One sentence on how to read what a summary left out (search_history, expand, ctxd search). */
  recall: string;
}

/** One fact a summary must keep (a fact sheet's: ctxd/compaction/ledger/mustkeep.py). */
export interface MustKeepFact {
  kind: string;
  text: string;
  probes: string[];
}

/** compact/facts: an opencode session's facts around opencode's own compactions (ctxd/service/opencode_facts.py). */
export interface CompactFactsResult {
  session: string;
  /** Compactions on the session's path the ledger has taken in. */
  compactions: number;
  /** The newest of them (its entry id), or null. */
  compactionId: string | null;
  /** What the next compaction must keep. */
  mustKeep: MustKeepFact[];
  /** The same as Markdown ('' when there is nothing). */
  mustKeepText: string;
  /** What the newest compaction's summary lacks of what it had to keep. */
  missing: MustKeepFact[];
  /** The same as Markdown, to re-inject until the next compaction ('' when nothing is missing). */
  missingText: string;
}

export interface SessionFactsResult {
  session: string;
  version: number;
  goal: string | null;
  compactions: number;
  facts: LedgerFact[];
  counts: { open: number; resolved: number; superseded: number };
  /** The open facts as markdown, most important first. */
  text: string;
}

/** One row of session/ledger (newer daemons); fields are null for compactions ctxd did not write. */
export interface LedgerEntryRow {
  entryId: string;
  line: number;
  timestamp: string | null;
  trigger: string | null;
  tokensBefore: number | null;
  tokensAfter: number | null;
  summarizer: string | null;
  model: string | null;
  path: string | null;
  cost: number | null;
  durationMs: number | null;
  failures: string[] | null;
  firstKeptEntryId: string | null;
  onActivePath: boolean;
  madeBy: 'ctxd' | 'other';
  summaryPreview: string;
  instructions?: string | null;
}

export interface LedgerResult {
  session: string;
  /** Newest first. */
  compactions: LedgerEntryRow[];
}

export interface ForkResult {
  path: string;
  sessionId: string;
  parentSession: string;
}

// --- context ----------------------------------------------------------------------------------

export interface ContextMessage {
  role: string;
  entryId: string;
  line: number;
  tokens: number;
  message?: Record<string, unknown>;
}

export interface ContextBuildParams {
  session: string;
  leafId?: string | null;
  format?: 'pi' | 'openai';
  truncateToolResults?: boolean;
  contextWindow?: number | null;
  includeMessages?: boolean;
  /** Also count tokens exactly with this model's tokenizer (litellm, offline). */
  countModel?: string | null;
  /** The leaf of a context the client holds (with `sinceRevision`): only what follows it is sent. */
  sinceLeafId?: string | null;
  sinceRevision?: string | null;
}

export interface ContextBuildResult {
  leafId: string | null;
  model: string | null;
  provider: string | null;
  modelId: string | null;
  thinkingLevel: string;
  messages: ContextMessage[];
  estimatedTokens: number;
  contextTokens: number;
  compactionId: string | null;
  diagnostics: Diagnostic[];
  truncated?: string[];
  usage: ContextUsage;
}

// --- compaction and branching -----------------------------------------------------------------

export interface CompactParams {
  session: string;
  instructions?: string | null;
  dryRun?: boolean;
  leafId?: string | null;
  keepRecentTokens?: number | null;
  workDoneToken?: string | number | null;
}

/** The dry run's result (ctxd/compaction/cut/plan.py CompactionPlan.to_json). */
export interface CompactionPlan {
  leafId: string | null;
  firstKeptEntryId: string;
  firstKeptLine: number;
  isSplitTurn: boolean;
  turnStartLine: number | null;
  messagesToSummarize: number;
  turnPrefixMessages: number;
  tokensBefore: number;
  estimatedTokensAfter: number;
  keptMessages: number;
  previousCompactionId: string | null;
  readFiles: string[];
  modifiedFiles: string[];
  summarizeEntryIds: string[];
  turnPrefixEntryIds: string[];
  /** What the compaction must keep (the fact sheet every summary is checked against), dry runs only. */
  mustKeep?: MustKeepFact[];
  /** The same as Markdown, within a budget (most important facts first). */
  mustKeepText?: string;
}

export interface MustKeepFact {
  kind: string;
  text: string;
  probes: string[];
}

export interface CompactResult {
  entryId: string;
  leafId: string;
  firstKeptEntryId: string;
  tokensBefore: number;
  tokensAfter: number;
  summary: string;
  trigger: string;
  path: string;
  summarizer: string;
  model: string | null;
  durationMs: number;
  usage: Record<string, number> | null;
  cost: number | null;
  failures: string[];
  plan: CompactionPlan;
  retry: boolean;
  /** For a read-only transcript: the pi fork that was compacted instead, and the transcript. */
  session?: string;
  forkedFrom?: string;
}

export interface BranchParams {
  session: string;
  entryId: string;
  summarize?: boolean;
  instructions?: string | null;
}

export interface BranchResult {
  leafId: string;
  previousLeafId: string | null;
  summaryEntryId: string | null;
  markerId: string | null;
  summary: string | null;
  summarizedEntries: number;
  path: string | null;
  readFiles: string[];
  modifiedFiles: string[];
  failures: string[];
}

// --- agents that write their own files (pi's extension) -------------------------------------------

/** Compaction settings over the daemon's (ctxd/compaction/settings.py), camelCase. */
export interface CompactionSettingsOverride {
  model?: string | null;
  apiBase?: string | null;
  apiKey?: string | null;
  contextWindow?: number | null;
  reserveTokens?: number;
  keepRecentTokens?: number;
  maxOutputTokens?: number | null;
  maxAttempts?: number;
  timeoutSeconds?: number;
  customInstructions?: string | null;
  [key: string]: unknown;
}

/** An agent's file tracking (pi's `FileOperations`, its sets as lists). */
export interface FileOpsParams {
  read?: string[];
  written?: string[];
  edited?: string[];
}

export interface CompactSummarizeParams {
  /** The messages the summary replaces (pi AgentMessages, oldest first). */
  messages: unknown[];
  turnPrefix?: unknown[];
  previousSummary?: string | null;
  /** The previous compaction's details: its file lists carry over. */
  previousDetails?: Record<string, unknown> | null;
  fileOps?: FileOpsParams | null;
  instructions?: string | null;
  reason?: 'manual' | 'threshold' | 'overflow';
  firstKeptEntryId?: string;
  tokensBefore?: number;
  settings?: CompactionSettingsOverride | null;
  /** The summarising model's window, when known. */
  modelWindow?: number | null;
  workDoneToken?: string | number | null;
  /** The entry id of each of `messages` ('' where unknown): where the fact ledger's facts were seen. */
  entryIds?: string[];
  turnPrefixEntryIds?: string[];
  /** The newest `details.ctxd.ledger` on the branch, when the previous compaction has none. */
  previousLedger?: Record<string, unknown> | null;
}

/** pi's Usage shape. */
export interface PiUsage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  totalTokens: number;
  cost?: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
}

export interface CompactSummarizeResult {
  summary: string;
  firstKeptEntryId: string;
  tokensBefore: number;
  tokensAfter: number;
  details: { readFiles: string[]; modifiedFiles: string[]; ctxd: CompactionDetails } & Record<string, unknown>;
  usage: PiUsage | null;
  path: string;
  summarizer: string;
  model: string | null;
  failures: string[];
  durationMs: number;
}

export interface BranchSummarizeParams {
  /** The branch's session entries, oldest first. */
  entries: unknown[];
  instructions?: string | null;
  reserveTokens?: number | null;
  settings?: CompactionSettingsOverride | null;
  modelWindow?: number | null;
}

export interface BranchSummarizeResult {
  summary: string;
  details: { readFiles: string[]; modifiedFiles: string[]; ctxd: Record<string, unknown> } & Record<string, unknown>;
  usage: PiUsage | null;
  path: string;
  summarizer: string;
  model: string | null;
  failures: string[];
  summarizedMessages: number;
}

export interface ContextTruncateParams {
  messages: unknown[];
  /** The model's window (tokens); absent when unknown (the fixed 30,000-character limit applies). */
  contextWindow?: number | null;
  /** A limit the user set (characters), instead of the window's share. */
  limitChars?: number | null;
}

export interface ContextTruncateResult {
  messages: unknown[];
  /** Indices of the messages that were cut. */
  truncated: number[];
  limitChars: number;
}

// --- history (ctxd/service/history_types.py) ---------------------------------------------------

export interface HistorySearchParams {
  /** SQLite FTS5 query; text that is not valid FTS5 is searched as plain words. */
  query: string;
  /** Only this session (an id or a file path). */
  session?: string | null;
  limit?: number;
  /** Wait up to this long (at most 10 s) for indexing in progress. */
  waitMs?: number;
  /** 'team': the team's history on PostgreSQL (docs/team.md), where `query` is a web-search query (words,
   * "a phrase", or, -word). */
  scope?: 'local' | 'team';
  /** Team scope only: narrow to a project, an agent, a user, a time range (ISO 8601). */
  project?: string | null;
  agent?: string | null;
  user?: string | null;
  since?: string | null;
  until?: string | null;
}

export interface HistorySession {
  id: string;
  path: string;
}

export interface HistoryHit {
  session: HistorySession;
  entryId: string;
  line: number;
  role: string;
  /** The matching text, matches between « and ». */
  snippet: string;
  timestamp: string | null;
  /** Summarised away in the session's current context (null: the session cannot be read now). */
  summarized: boolean | null;
  toolName: string | null;
  agent: string;
  archived: boolean;
  /** What history/expand takes to read it: the entry id, or `L<line>` when the file gives its entries none. */
  anchor?: string;
}

export interface HistorySearchResult {
  query: string;
  hits: HistoryHit[];
  /** Indexing is still in progress: recent sessions may be missing. */
  indexing: boolean;
  indexedFiles: number | null;
}

export interface HistoryExpandParams {
  session: string;
  /** A compaction or branch summary: the messages behind it; any other entry: that entry. */
  entryId?: string | null;
  fromEntryId?: string | null;
  toEntryId?: string | null;
  maxChars?: number;
  cursor?: string | null;
  /** 'team': read a team hit's session from the team database. */
  scope?: 'local' | 'team';
}

export interface HistoryMessage {
  entryId: string;
  line: number;
  role: string;
  timestamp: string | null;
  toolName: string | null;
  text: string;
  truncated: boolean;
  fromChar: number;
}

export interface HistoryExpandResult {
  session: HistorySession;
  kind: 'compaction' | 'branchSummary' | 'entry' | 'range';
  messages: HistoryMessage[];
  totalMessages: number;
  truncated: boolean;
  nextCursor: string | null;
  previousCompactionId: string | null;
}

/** A hit in the team database (history/search with scope 'team'). */
export interface TeamHistoryHit {
  /** Its id, and its path on the machine it was published from. */
  session: HistorySession;
  entryId: string;
  line: number;
  role: string;
  snippet: string;
  timestamp: string;
  toolName: string | null;
  agent: string;
  project: string;
  user: string;
  machine: string;
  score: number;
}

export interface TeamSearchResult {
  query: string;
  hits: TeamHistoryHit[];
  scope: string;
  /** Entries of this machine still waiting to be published (null: this process does not publish). */
  queued: number | null;
}

export interface TeamExpandResult {
  session: HistorySession;
  /** 'entry' or 'range' (the team database holds messages, not the session's tree). */
  kind: string;
  messages: HistoryMessage[];
  totalMessages: number;
  truncated: boolean;
  nextCursor: string | null;
  scope: string;
  /** The session's must-keep facts as last published (redacted), or null. */
  facts: unknown;
}

// --- notifications ----------------------------------------------------------------------------

export interface DidChange {
  session: string;
  sessionId: string | null;
  ids: string[];
  leafId: string | null;
  origin: 'ctxd' | 'external';
  reloaded?: boolean;
}

export interface DidCreate {
  session: string;
  sessionId?: string | null;
}

export interface DidDelete {
  session: string;
}

export type CompactionState = 'running' | 'succeeded' | 'failed' | 'cancelled';

export interface CompactionStatus {
  session: string;
  state: CompactionState;
  trigger: string;
  tokensBefore?: number | null;
  tokensAfter?: number | null;
  error?: string | null;
  entryId?: string | null;
  retry?: boolean;
  path?: string | null;
}

/** LSP's $/progress values for a compaction's workDoneToken. */
export interface WorkDoneProgress {
  kind: 'begin' | 'report' | 'end';
  title?: string;
  message?: string;
  percentage?: number;
}

// --- context/composition (ctxd/context/composition.py, ctxd/context/timeline.py) ---------------

export interface ContextCompositionParams {
  session: string;
  /** The context at this entry (default: the leaf); only the leaf's is followed by notifications. */
  leafId?: string | null;
  /** How many of the heaviest entries to list (0 to 100, default 10). */
  top?: number;
}

/** The parts a context's per-message estimates are split into, in the order a bar stacks them. */
export const COMPOSITION_PARTS = [
  'system',
  'tools',
  'summary',
  'branchSummary',
  'pinned',
  'user',
  'assistant',
  'thinking',
  'toolCalls',
  'toolResults',
  'images',
  'custom',
  'bashExecution',
] as const;

export type CompositionPart = (typeof COMPOSITION_PARTS)[number];

export interface CompositionTopEntry {
  entryId: string;
  line: number;
  role: string;
  tool: string | null;
  tokens: number;
  pinned: boolean;
}

export interface TimelinePoint {
  turn: number;
  entryId: string;
  tokens: number;
  source: 'usage' | 'estimate' | 'compaction';
  kind: 'turn' | 'compaction';
}

export interface TimelineMarker {
  kind: 'compaction' | 'branch' | 'overflow';
  /** Index of the point it belongs to. */
  at: number;
  entryId: string;
  tokensBefore: number | null;
  tokensAfter: number | null;
  trigger: string | null;
  summarizer: string | null;
  detail: string | null;
}

/** context/composition's result and context/compositionChanged's payload. */
export interface Composition {
  session: string;
  leafId: string | null;
  revision: string;
  window: number;
  threshold: number;
  reserve: number;
  contextTokens: number;
  estimatedTokens: number;
  percent: number;
  parts: Record<CompositionPart, number>;
  toolResultsByTool: Record<string, number>;
  top: CompositionTopEntry[];
  timeline: TimelinePoint[];
  markers: TimelineMarker[];
}
