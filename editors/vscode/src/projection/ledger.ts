/**
 * The compaction ledger as pure data. ctxd has no ledger method: the rows of type "compaction" in
 * session/tree say which compactions exist, and session/entry gives each one's entry (immutable, so
 * fetched once). Compactions written by pi have no `details.ctxd`: their fields are unknown.
 */

import { isCollapsed, type CompactionEntry, type Entry, type LedgerEntryRow, type TreeRow } from '@ctxd/client';
import { formatCost, formatDuration, formatInt, formatTokens, formatWhen } from './format';

export interface LedgerRow {
  kind: 'compaction';
  key: string;
  entryId: string;
  timestamp: string | undefined;
  trigger: string;
  tokensBefore: number | undefined;
  tokensAfter: number | undefined;
  model: string | undefined;
  /** How the summary was made: model, offline, hook, fallback-… */
  path: string | undefined;
  summarizer: string | undefined;
  cost: number | undefined;
  durationMs: number | undefined;
  failures: string[];
  onActivePath: boolean;
  summary: string;
  firstKeptEntryId: string | undefined;
  instructions: string | undefined;
  readFiles: string[];
  modifiedFiles: string[];
  /** Written by ctxd (details.ctxd present) or by another tool (pi). */
  byCtxd: boolean;
}

export interface LedgerNoticeNode {
  kind: 'notice';
  key: string;
  message: string;
}

export type LedgerNode = LedgerRow | LedgerNoticeNode;

/** The compaction entries' ids in a session/tree page, with whether each is on the active path. */
export function compactionIds(rows: readonly TreeRow[]): { id: string; onActivePath: boolean }[] {
  const out: { id: string; onActivePath: boolean }[] = [];
  for (const row of rows) {
    if (!isCollapsed(row) && row.type === 'compaction') {
      out.push({ id: row.id, onActivePath: row.onActivePath });
    }
  }
  return out;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v ? v : undefined;
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

export function ledgerRow(entry: Entry, onActivePath: boolean): LedgerRow {
  const c = entry as CompactionEntry;
  const details = (typeof c.details === 'object' && c.details) || {};
  const ctxd = (typeof details.ctxd === 'object' && details.ctxd) || undefined;
  const usage = (entry as { usage?: { cost?: { total?: unknown } } }).usage;
  return {
    kind: 'compaction',
    key: `compaction:${entry.id}`,
    entryId: entry.id,
    timestamp: str(entry.timestamp),
    trigger: str(ctxd?.trigger) ?? (ctxd ? 'unknown' : EXTERNAL),
    tokensBefore: num(c.tokensBefore),
    tokensAfter: num(ctxd?.tokensAfter),
    model: str(ctxd?.model) ?? undefined,
    path: str(ctxd?.path),
    summarizer: str(ctxd?.summarizer),
    // ctxd records the cost (null: unknown); another tool may have left pi's usage.cost only.
    cost: ctxd ? num(ctxd.cost) : num(usage?.cost?.total),
    durationMs: num(ctxd?.durationMs),
    failures: strings(ctxd?.failures),
    onActivePath,
    summary: typeof c.summary === 'string' ? c.summary : '',
    firstKeptEntryId: str(c.firstKeptEntryId),
    instructions: str(ctxd?.instructions),
    readFiles: strings(details.readFiles),
    modifiedFiles: strings(details.modifiedFiles),
    byCtxd: ctxd !== undefined,
  };
}

/** The trigger shown for compactions another tool (pi) wrote: ctxd did not record why. */
export const EXTERNAL = 'external';

/** A row of the daemon's session/ledger as a ledger row (the summary is only a preview). */
export function ledgerRowFromServer(r: LedgerEntryRow): LedgerRow {
  const byCtxd = r.madeBy === 'ctxd';
  return {
    kind: 'compaction',
    key: `compaction:${r.entryId}`,
    entryId: r.entryId,
    timestamp: str(r.timestamp),
    trigger: str(r.trigger) ?? (byCtxd ? 'unknown' : EXTERNAL),
    tokensBefore: num(r.tokensBefore),
    tokensAfter: num(r.tokensAfter),
    model: str(r.model),
    path: str(r.path),
    summarizer: str(r.summarizer),
    cost: num(r.cost),
    durationMs: num(r.durationMs),
    failures: strings(r.failures),
    onActivePath: r.onActivePath,
    summary: r.summaryPreview ?? '',
    firstKeptEntryId: str(r.firstKeptEntryId),
    instructions: str(r.instructions),
    readFiles: [],
    modifiedFiles: [],
    byCtxd,
  };
}

/** Ledger rows, newest first (ties: the order in the tree, later first). */
export function buildLedger(
  ids: readonly { id: string; onActivePath: boolean }[],
  entries: ReadonlyMap<string, Entry>,
): LedgerRow[] {
  const rows: { row: LedgerRow; order: number }[] = [];
  ids.forEach(({ id, onActivePath }, order) => {
    const entry = entries.get(id);
    if (entry) {
      rows.push({ row: ledgerRow(entry, onActivePath), order });
    }
  });
  const time = (r: LedgerRow) => (r.timestamp ? Date.parse(r.timestamp) || 0 : 0);
  rows.sort((a, b) => time(b.row) - time(a.row) || b.order - a.order);
  return rows.map((r) => r.row);
}

/** The model column: the model name, else how the summary was made (offline, hook, …). */
export function modelOf(row: LedgerRow): string {
  return row.model ?? row.summarizer ?? row.path ?? (row.byCtxd ? 'offline' : 'unknown');
}

export interface LedgerPresentation {
  label: string;
  description: string;
  tooltip: string;
  icon: string;
  iconColor?: string;
}

export function presentLedger(row: LedgerNode, now: number): LedgerPresentation {
  if (row.kind === 'notice') {
    return { label: row.message, description: '', tooltip: row.message, icon: 'info' };
  }
  const when = formatWhen(row.timestamp, now);
  const tokens = `${formatTokens(row.tokensBefore)} → ${formatTokens(row.tokensAfter)}`;
  const bits = [tokens, modelOf(row)];
  const cost = formatCost(row.cost);
  if (cost) {
    bits.push(cost);
  }
  if (row.durationMs !== undefined) {
    bits.push(formatDuration(row.durationMs));
  }
  if (row.failures.length) {
    bits.push(`⚠ ${row.failures.length} fallback${row.failures.length === 1 ? '' : 's'}`);
  }
  const saved =
    row.tokensBefore !== undefined && row.tokensAfter !== undefined
      ? ` (${formatInt(row.tokensBefore - row.tokensAfter)} tokens saved)`
      : '';
  const tooltip = [
    `Compaction ${row.entryId} at ${row.timestamp ?? '?'}`,
    `why: ${row.trigger}${row.path ? ` · made by ${row.path}` : ''}`,
    `tokens: ${formatInt(row.tokensBefore)} → ${formatInt(row.tokensAfter)}${saved}`,
    `model: ${modelOf(row)}${cost ? ` · cost ${cost}` : ''}${row.durationMs !== undefined ? ` · ${formatDuration(row.durationMs)}` : ''}`,
    row.instructions ? `instructions: ${row.instructions}` : '',
    ...row.failures.map((f) => `fallback: ${f}`),
    row.onActivePath ? 'on the active path' : 'on another branch',
    'Select to open the summary.',
  ]
    .filter(Boolean)
    .join('\n');
  return {
    label: `${when} · ${row.trigger}`,
    description: bits.join(' · '),
    tooltip,
    icon: row.failures.length ? 'warning' : 'fold',
    iconColor: row.onActivePath ? 'ctxd.compactionForeground' : undefined,
  };
}
