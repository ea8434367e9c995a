/**
 * The Conversation view as pure data: ctxd's depth-first tree rows (session/tree) become nested
 * nodes. No VS Code API here; sessionTree.ts adapts these nodes to TreeItems.
 *
 * ctxd sends one row per shown entry in depth-first order. A linear run keeps the depth of its
 * first entry; the children of a branch point (childCount > 1) start runs one level deeper, one
 * after the other. Long runs arrive as a single "collapsed" row. So:
 *
 *   - an entry that is a branch point holds one `branch` node per child, each holding the rows of
 *     that child's run (and, at its end, the next branch point);
 *   - a collapsed row stays collapsed until it is expanded (its rows are fetched on demand and cut
 *     into chunks of at most CHUNK rows, so 10k hidden entries do not become 10k tree items).
 */

import { isCollapsed, type CollapsedRow, type TreeNodeRow, type TreeRow } from '@ctxd/client';
import { formatInt, formatTokens } from './format';

export const CHUNK = 200;

export interface EntryNode {
  kind: 'entry';
  /** Unique among the view's nodes: the entry id. */
  key: string;
  row: TreeNodeRow;
  /** One per child when this entry is a branch point. */
  branches: BranchNode[];
  parentKey: string | undefined;
}

export interface BranchNode {
  kind: 'branch';
  key: string;
  /** 1-based position among its siblings, and how many there are. */
  index: number;
  of: number;
  /** The run's first row. */
  head: TreeRow;
  children: ConversationNode[];
  onActivePath: boolean;
  /** Entries in the run (collapsed rows counted in full), and their tokens when known. */
  entries: number;
  tokens: number | null;
  parentKey: string | undefined;
}

export interface CollapsedNode {
  kind: 'collapsed';
  key: string;
  row: CollapsedRow;
  parentKey: string | undefined;
}

/** A slice of an expanded run, when it is too long to show at once. */
export interface ChunkNode {
  kind: 'chunk';
  key: string;
  rows: TreeNodeRow[];
  /** 1-based position of the first row within the run. */
  start: number;
  parentKey: string | undefined;
}

export interface MoreNode {
  kind: 'more';
  key: string;
  shown: number;
  total: number;
  parentKey: undefined;
}

export interface NoticeNode {
  kind: 'notice';
  key: string;
  message: string;
  parentKey: string | undefined;
}

export type ConversationNode = EntryNode | BranchNode | CollapsedNode | ChunkNode | MoreNode | NoticeNode;

export interface Projection {
  roots: ConversationNode[];
  /** Every node by key (for getParent and reveal). */
  byKey: Map<string, ConversationNode>;
  /** The key of the leaf's node, when it is shown. */
  leafKey: string | undefined;
}

/** Nest ctxd's rows; `total` (rows before paging) adds a "more" node when rows were cut. */
export function project(rows: readonly TreeRow[], total = rows.length): Projection {
  const byKey = new Map<string, ConversationNode>();
  let leafKey: string | undefined;
  let i = 0;

  const add = <N extends ConversationNode>(node: N): N => {
    byKey.set(node.key, node);
    return node;
  };

  const rowNode = (row: TreeRow, parentKey: string | undefined): EntryNode | CollapsedNode => {
    if (isCollapsed(row)) {
      return add({ kind: 'collapsed', key: `run:${row.firstId}`, row, parentKey });
    }
    if (row.isLeaf) {
      leafKey = row.id;
    }
    return add({ kind: 'entry', key: row.id, row, branches: [], parentKey });
  };

  /** Rows of one run at `depth`, until its end (a leaf or a branch point, whose branches follow). */
  const run = (depth: number, parentKey: string | undefined): ConversationNode[] => {
    const out: ConversationNode[] = [];
    while (i < rows.length && rows[i]!.depth === depth) {
      const row = rows[i++]!;
      const node = rowNode(row, parentKey);
      out.push(node);
      if (node.kind === 'collapsed') {
        continue;
      }
      const children = node.row.childCount;
      if (children === 0) {
        break;
      }
      if (children > 1) {
        node.branches = branches(node, depth + 1, children);
        break;
      }
    }
    return out;
  };

  const branches = (point: EntryNode, depth: number, count: number): BranchNode[] => {
    const out: BranchNode[] = [];
    while (out.length < count && i < rows.length && rows[i]!.depth === depth) {
      const head = rows[i]!;
      const key = `branch:${isCollapsed(head) ? head.firstId : head.id}`;
      const branch = add<BranchNode>({
        kind: 'branch',
        key,
        index: out.length + 1,
        of: count,
        head,
        children: [],
        onActivePath: head.onActivePath,
        entries: 0,
        tokens: 0,
        parentKey: point.key,
      });
      branch.children = run(depth, key);
      const size = measure(branch.children);
      branch.entries = size.entries;
      branch.tokens = size.tokens;
      out.push(branch);
    }
    return out;
  };

  const roots: ConversationNode[] = [];
  while (i < rows.length) {
    const before = i;
    const depth = rows[i]!.depth;
    roots.push(...run(depth, undefined));
    if (i === before) {
      i++; // a row that fits nowhere (a malformed page): skip it rather than loop
    }
  }
  if (total > rows.length) {
    roots.push(add<MoreNode>({ kind: 'more', key: 'more', shown: rows.length, total, parentKey: undefined }));
  }
  return { roots, byKey, leafKey };
}

/** Entries and tokens under a list of nodes (a branch's whole subtree). */
export function measure(nodes: readonly ConversationNode[]): { entries: number; tokens: number | null } {
  let entries = 0;
  let tokens: number | null = 0;
  const visit = (node: ConversationNode): void => {
    if (node.kind === 'entry') {
      entries += 1;
      tokens = tokens === null ? null : tokens + node.row.tokens;
      node.branches.forEach(visit);
    } else if (node.kind === 'collapsed') {
      entries += node.row.count;
      tokens = tokens === null || node.row.tokens === null ? null : tokens + node.row.tokens;
    } else if (node.kind === 'branch') {
      node.children.forEach(visit);
    }
  };
  nodes.forEach(visit);
  return { entries, tokens };
}

/** The children a node shows (collapsed runs and chunks are resolved by the provider). */
export function childrenOf(node: ConversationNode): ConversationNode[] {
  switch (node.kind) {
    case 'entry':
      return node.branches;
    case 'branch':
      return node.children;
    default:
      return [];
  }
}

/**
 * The nodes of an expanded collapsed run: its rows as entries, or chunks of CHUNK rows when it is
 * long. `rows` are the run's entries in order (from an uncollapsed session/tree).
 */
export function expandRun(run: CollapsedNode, rows: readonly TreeNodeRow[], chunk = CHUNK): ConversationNode[] {
  if (rows.length <= chunk) {
    return rows.map((row) => ({ kind: 'entry', key: row.id, row, branches: [], parentKey: run.key }));
  }
  const out: ChunkNode[] = [];
  for (let start = 0; start < rows.length; start += chunk) {
    const slice = rows.slice(start, start + chunk);
    out.push({ kind: 'chunk', key: `chunk:${slice[0]!.id}`, rows: slice, start: start + 1, parentKey: run.key });
  }
  return out;
}

export function expandChunk(chunk: ChunkNode): EntryNode[] {
  return chunk.rows.map((row) => ({ kind: 'entry', key: row.id, row, branches: [], parentKey: chunk.key }));
}

/**
 * The rows of a collapsed run within an uncollapsed tree (collapse=0): the `count` rows starting at
 * `firstId`. Undefined when the run is not there any more (the session changed meanwhile).
 */
export function sliceRun(full: readonly TreeRow[], run: CollapsedRow): TreeNodeRow[] | undefined {
  const start = full.findIndex((r) => !isCollapsed(r) && r.id === run.firstId);
  if (start < 0) {
    return undefined;
  }
  const out: TreeNodeRow[] = [];
  for (let j = start; j < full.length && out.length < run.count; j++) {
    const r = full[j]!;
    if (isCollapsed(r)) {
      return undefined;
    }
    out.push(r);
    if (r.id === run.lastId) {
      break;
    }
  }
  return out;
}

// --- presentation (plain data; the adapter maps it to TreeItems) -------------------------------

export interface Presentation {
  label: string;
  description: string;
  tooltip: string;
  /** A codicon id, and an optional theme colour id. */
  icon: string;
  iconColor?: string;
  expandable: 'none' | 'collapsed' | 'expanded';
  /** Highlight the whole label (the leaf). */
  highlight: boolean;
  /** For the decoration provider: active path colour and a one-character badge. */
  active: boolean;
  badge?: string;
}

export const ROLE_ICONS: Record<string, string> = {
  user: 'account',
  assistant: 'hubot',
  toolResult: 'tools',
  bashExecution: 'terminal',
  system: 'gear',
  compaction: 'fold',
  branchSummary: 'git-merge',
  custom: 'extensions',
  model_change: 'symbol-class',
  thinking_level_change: 'lightbulb',
  label: 'tag',
  session_info: 'info',
  context_edit: 'edit',
  custom_entry: 'symbol-misc',
  usage: 'graph',
};

export function roleIcon(row: TreeNodeRow): string {
  if (row.type === 'custom') {
    return ROLE_ICONS.custom_entry!;
  }
  return ROLE_ICONS[row.role] ?? ROLE_ICONS[row.type] ?? 'circle-outline';
}

const ROLE_NAMES: Record<string, string> = {
  toolResult: 'tool result',
  bashExecution: 'bash',
  branchSummary: 'branch summary',
  model_change: 'model change',
  thinking_level_change: 'thinking level',
  session_info: 'session name',
  context_edit: 'context edit',
};

export function roleName(role: string): string {
  return ROLE_NAMES[role] ?? role;
}

function isMarked(row: TreeNodeRow): 'compaction' | 'branchSummary' | undefined {
  if (row.type === 'compaction') {
    return 'compaction';
  }
  if (row.type === 'branch_summary') {
    return 'branchSummary';
  }
  return undefined;
}

export function present(node: ConversationNode): Presentation {
  switch (node.kind) {
    case 'entry': {
      const row = node.row;
      const marked = isMarked(row);
      const bits: string[] = [];
      if (row.isLeaf) {
        bits.push('◀ leaf');
      }
      if (marked === 'compaction') {
        bits.push('COMPACTION');
      } else if (marked === 'branchSummary') {
        bits.push('BRANCH SUMMARY');
      }
      if (row.pinned) {
        bits.push('📌 pinned');
      }
      bits.push(`${formatTokens(row.tokens)} tok`);
      for (const label of row.labels) {
        bits.push(`#${label}`);
      }
      if (row.childCount > 1) {
        bits.push(`${row.childCount} branches`);
      }
      const tooltip = [
        `${roleName(row.role)} · ${row.type}`,
        `id ${row.id} · line ${row.line}`,
        `${formatInt(row.tokens)} tokens (estimated)`,
        row.timestamp ? `at ${row.timestamp}` : '',
        row.labels.length ? `labels: ${row.labels.join(', ')}` : '',
        row.pinned ? 'pinned: compactions carry it verbatim after their summary' : '',
        row.onActivePath ? (row.isLeaf ? 'the leaf: the next message attaches here' : 'on the active path') : 'off the active path',
        '',
        row.preview,
      ]
        .filter((line, k, all) => line !== '' || (k > 0 && all[k - 1] !== ''))
        .join('\n');
      return {
        label: row.preview || `(${roleName(row.role)})`,
        description: bits.join(' · '),
        tooltip,
        icon: roleIcon(row),
        iconColor: marked ? 'ctxd.compactionForeground' : row.onActivePath ? 'ctxd.activePathForeground' : undefined,
        expandable: node.branches.length ? (row.onActivePath ? 'expanded' : 'collapsed') : 'none',
        highlight: row.isLeaf,
        active: row.onActivePath,
        badge: row.isLeaf ? '◀' : marked === 'compaction' ? 'C' : marked === 'branchSummary' ? 'B' : undefined,
      };
    }
    case 'branch': {
      const head = node.head;
      const preview = isCollapsed(head) ? `${head.count} entries` : head.preview;
      const tokens = node.tokens === null ? '' : ` · ${formatTokens(node.tokens)} tok`;
      return {
        label: `branch ${node.index}/${node.of}: ${preview}`,
        description: `${formatInt(node.entries)} ${node.entries === 1 ? 'entry' : 'entries'}${tokens}${node.onActivePath ? ' · active' : ''}`,
        tooltip: `Branch ${node.index} of ${node.of}${node.onActivePath ? ' (the active path)' : ''}: ${node.entries} entries`,
        icon: 'git-branch',
        iconColor: node.onActivePath ? 'ctxd.activePathForeground' : undefined,
        expandable: node.onActivePath ? 'expanded' : 'collapsed',
        highlight: false,
        active: node.onActivePath,
      };
    }
    case 'collapsed': {
      const row = node.row;
      const tokens = row.tokens === null ? '' : ` · ${formatTokens(row.tokens)} tok`;
      return {
        label: `… ${formatInt(row.count)} more ${row.count === 1 ? 'entry' : 'entries'}`,
        description: `collapsed run${tokens}`,
        tooltip: `${row.count} entries of a linear run, from ${row.firstId} to ${row.lastId}. Expand to show them.`,
        icon: 'ellipsis',
        iconColor: row.onActivePath ? 'ctxd.activePathForeground' : undefined,
        expandable: 'collapsed',
        highlight: false,
        active: row.onActivePath,
      };
    }
    case 'chunk': {
      const end = node.start + node.rows.length - 1;
      const tokens = node.rows.reduce((sum, r) => sum + r.tokens, 0);
      return {
        label: `entries ${formatInt(node.start)}–${formatInt(end)}`,
        description: `${formatTokens(tokens)} tok`,
        tooltip: `${node.rows.length} entries, ${node.rows[0]?.id} to ${node.rows[node.rows.length - 1]?.id}`,
        icon: 'list-flat',
        expandable: 'collapsed',
        highlight: false,
        active: node.rows[0]?.onActivePath ?? false,
      };
    }
    case 'more':
      return {
        label: `Load more rows (${formatInt(node.shown)} of ${formatInt(node.total)} shown)`,
        description: '',
        tooltip: 'The tree is paged: load the next rows',
        icon: 'more',
        expandable: 'none',
        highlight: false,
        active: false,
      };
    case 'notice':
      return {
        label: node.message,
        description: '',
        tooltip: node.message,
        icon: 'info',
        expandable: 'none',
        highlight: false,
        active: false,
      };
  }
}

/** The entry rows of a projection in display order (for quick picks and searches). */
export function entryRows(rows: readonly TreeRow[]): TreeNodeRow[] {
  return rows.filter((r): r is TreeNodeRow => !isCollapsed(r));
}
