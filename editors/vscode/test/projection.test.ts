/** The pure projections: conversation tree, sessions, ledger, status bar, formats, documents. */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CHUNK,
  expandRun,
  measure,
  present,
  project,
  sliceRun,
  type BranchNode,
  type CollapsedNode,
  type EntryNode,
} from '../src/projection/conversation';
import { formatAge, formatCost, formatDuration, formatTokens, formatWhen, tildify } from '../src/projection/format';
import { buildLedger, compactionIds, ledgerRow, ledgerRowFromServer, modelOf, presentLedger } from '../src/projection/ledger';
import { renderEntryDocument, renderPreviewDocument } from '../src/projection/render';
import { LIVE_MS, presentSession, projectSessions, sessionName } from '../src/projection/sessions';
import { presentStatus } from '../src/projection/status';
import type { CollapsedRow, Entry, SessionSummary, TreeNodeRow, TreeRow } from '@ctxd/client';

function row(id: string, parentId: string | null, extra: Partial<TreeNodeRow> = {}): TreeNodeRow {
  return {
    id,
    parentId,
    line: 2,
    type: 'message',
    role: 'user',
    preview: `entry ${id}`,
    tokens: 10,
    labels: [],
    childCount: 1,
    onActivePath: true,
    isLeaf: false,
    depth: 0,
    timestamp: '2025-01-01T00:00:00Z',
    ...extra,
  };
}

function collapsed(parentId: string, firstId: string, lastId: string, count: number, extra: Partial<CollapsedRow> = {}): CollapsedRow {
  return { type: 'collapsed', parentId, firstId, lastId, count, tokens: count * 10, depth: 0, onActivePath: true, ...extra };
}

describe('conversation projection', () => {
  test('a linear session with a collapsed run stays flat, the leaf is found', () => {
    const rows: TreeRow[] = [
      row('a', null),
      row('b', 'a'),
      collapsed('b', 'c', 'x', 100),
      row('y', 'x'),
      row('z', 'y', { childCount: 0, isLeaf: true, role: 'assistant' }),
    ];
    const p = project(rows);
    assert.deepEqual(
      p.roots.map((n) => n.kind),
      ['entry', 'entry', 'collapsed', 'entry', 'entry'],
    );
    assert.equal(p.leafKey, 'z');
    assert.equal(p.byKey.get('run:c')?.kind, 'collapsed');
    assert.deepEqual(measure(p.roots), { entries: 104, tokens: 1040 });
  });

  test('a branch point holds one branch per child, each with its own run', () => {
    // a - b (branch point) ─┬─ c - d          (old branch)
    //                       └─ e - f ─┬─ g    (active, with a nested branch point)
    //                                 └─ h (leaf)
    const rows: TreeRow[] = [
      row('a', null),
      row('b', 'a', { childCount: 2 }),
      row('c', 'b', { depth: 1, onActivePath: false }),
      row('d', 'c', { depth: 1, onActivePath: false, childCount: 0 }),
      row('e', 'b', { depth: 1 }),
      row('f', 'e', { depth: 1, childCount: 2 }),
      row('g', 'f', { depth: 2, childCount: 0, onActivePath: false }),
      row('h', 'f', { depth: 2, childCount: 0, isLeaf: true }),
    ];
    const p = project(rows);
    assert.deepEqual(
      p.roots.map((n) => n.key),
      ['a', 'b'],
    );
    const b = p.roots[1] as EntryNode;
    assert.equal(b.branches.length, 2);
    const [old, active] = b.branches as [BranchNode, BranchNode];
    assert.deepEqual(
      old.children.map((n) => n.key),
      ['c', 'd'],
    );
    assert.equal(old.onActivePath, false);
    assert.equal(old.entries, 2);
    assert.deepEqual(
      active.children.map((n) => n.key),
      ['e', 'f'],
    );
    const f = active.children[1] as EntryNode;
    assert.deepEqual(
      f.branches.map((x) => x.children.map((n) => n.key)),
      [['g'], ['h']],
    );
    assert.equal(p.leafKey, 'h');
    // parents for reveal(): h -> branch:h -> f -> branch:e -> b
    const chain: string[] = [];
    for (let n = p.byKey.get('h'); n; n = n.parentKey ? p.byKey.get(n.parentKey) : undefined) {
      chain.push(n.key);
    }
    assert.deepEqual(chain, ['h', 'branch:h', 'f', 'branch:e', 'b']);
    // presentation: the active branch opens, the old one does not; the leaf is marked
    assert.equal(present(active).expandable, 'expanded');
    assert.equal(present(old).expandable, 'collapsed');
    assert.match(present(old).label, /^branch 1\/2: entry c/);
    const leaf = present(p.byKey.get('h')!);
    assert.equal(leaf.highlight, true);
    assert.equal(leaf.badge, '◀');
    assert.match(leaf.description, /◀ leaf/);
  });

  test('a paged tree ends with a "more" node; malformed pages do not loop', () => {
    const p = project([row('a', null), row('b', 'a')], 10);
    assert.equal(p.roots.at(-1)?.kind, 'more');
    const weird = project([row('a', null, { depth: 3 }), row('b', 'a', { depth: 1, childCount: 0 })]);
    assert.equal(weird.roots.length, 2);
  });

  test('compaction and branch summary entries are marked; icons follow roles', () => {
    const c = present({ kind: 'entry', key: 'c', row: row('c', null, { type: 'compaction', role: 'compaction' }), branches: [], parentKey: undefined });
    assert.equal(c.icon, 'fold');
    assert.equal(c.badge, 'C');
    assert.match(c.description, /COMPACTION/);
    const s = present({ kind: 'entry', key: 's', row: row('s', null, { type: 'branch_summary', role: 'branchSummary' }), branches: [], parentKey: undefined });
    assert.equal(s.badge, 'B');
    assert.match(s.description, /BRANCH SUMMARY/);
    const t = present({ kind: 'entry', key: 't', row: row('t', null, { role: 'toolResult', labels: ['important'] }), branches: [], parentKey: undefined });
    assert.equal(t.icon, 'tools');
    assert.match(t.description, /#important/);
    assert.equal(t.active, true);
  });

  test('a long collapsed run expands into chunks; sliceRun finds it in the full tree', () => {
    const full: TreeRow[] = [row('a', null)];
    let parent = 'a';
    for (let k = 0; k < 1000; k++) {
      full.push(row(`r${k}`, parent));
      parent = `r${k}`;
    }
    const run = collapsed('a', 'r0', 'r999', 1000);
    const rows = sliceRun(full, run)!;
    assert.equal(rows.length, 1000);
    const node: CollapsedNode = { kind: 'collapsed', key: 'run:r0', row: run, parentKey: undefined };
    const chunks = expandRun(node, rows);
    assert.equal(chunks.length, Math.ceil(1000 / CHUNK));
    assert.equal(chunks[0]!.kind, 'chunk');
    assert.match(present(chunks[1]!).label, /^entries 201–400$/);
    assert.equal(sliceRun(full, collapsed('a', 'nope', 'r9', 3)), undefined);
    assert.equal(expandRun(node, rows.slice(0, 5)).length, 5);
  });

  test('10k entries project quickly', () => {
    const rows: TreeRow[] = [];
    for (let k = 0; k < 10_000; k++) {
      rows.push(row(`e${k}`, k ? `e${k - 1}` : null, { childCount: k === 9999 ? 0 : 1, isLeaf: k === 9999 }));
    }
    const started = performance.now();
    const p = project(rows);
    assert.equal(p.roots.length, 10_000);
    assert.ok(performance.now() - started < 500);
  });
});

function summary(path: string, cwd: string, modified: number, extra: Partial<SessionSummary> = {}): SessionSummary {
  return { path, id: path, cwd, root: '/r', name: null, title: `title of ${path}`, created: '', modified, size: 1, entries: 3, ...extra };
}

describe('sessions projection', () => {
  test('grouped by project folder, newest first, named from session_info, live markers', () => {
    const now = 1_000_000_000;
    const sessions = [
      summary('/r/a/1', '/home/me/a', 100),
      summary('/r/b/2', '/home/me/b', 300, { name: 'Named' }),
      summary('/r/a/3', '/home/me/a', 200),
    ];
    const changed = new Map([['/r/a/1', now - 1000]]);
    const projects = projectSessions({ sessions, changed, openPath: '/r/b/2', now });
    // /r/a/1 changed just now: its project is newest
    assert.deepEqual(
      projects.map((p) => p.cwd),
      ['/home/me/a', '/home/me/b'],
    );
    assert.deepEqual(
      projects[0]!.sessions.map((s) => s.summary.path),
      ['/r/a/1', '/r/a/3'],
    );
    assert.equal(projects[0]!.sessions[0]!.live, true);
    assert.equal(projects[0]!.live, true);
    assert.equal(projects[1]!.sessions[0]!.open, true);
    const p = presentSession(projects[0]!.sessions[0]!, now);
    assert.match(p.description, /● live/);
    assert.equal(p.icon, 'circle-filled');
    assert.equal(presentSession(projects[1]!.sessions[0]!, now).label, 'Named');
    assert.equal(presentSession(projects[0]!, now, '/home/me').description, '~/a · live');
    // the live marker goes out after LIVE_MS
    const later = projectSessions({ sessions, changed, openPath: undefined, now: now + LIVE_MS });
    assert.equal(later.flatMap((x) => x.sessions).some((s) => s.live), false);
    assert.equal(sessionName(summary('/x', '', 0, { title: '', id: '0123456789' })), 'session 01234567');
    const transcript = projectSessions({ sessions: [summary('/t', '/w', 1, { agent: 'claude', readOnly: true })], changed: new Map(), openPath: undefined, now });
    const t = presentSession(transcript[0]!.sessions[0]!, now);
    assert.match(t.description, /claude · read-only/);
    assert.equal(t.icon, 'lock');
  });

  test("ctxd's archived copies sit under their live transcript; a copy whose transcript is gone stands alone", () => {
    const now = 1_000_000_000;
    const claude = { agent: 'claude', readOnly: true };
    const live = summary('/c/s.jsonl', '/w', 300, { ...claude, archives: ['/a/s.jsonl', '/a/s/earlier/t.jsonl'] });
    const copy = summary('/a/s.jsonl', '/w', 200, { ...claude, archived: true, archiveOf: '/c/s.jsonl' });
    const earlier = summary('/a/s/earlier/t.jsonl', '/w', 100, { ...claude, archived: true, archiveOf: '/c/s.jsonl' });
    const orphan = summary('/a/gone.jsonl', '/w', 50, { ...claude, archived: true, archiveOf: null, title: 'Old work' });
    const [project] = projectSessions({ sessions: [copy, live, earlier, orphan], changed: new Map(), openPath: '/a/s.jsonl', now });
    assert.deepEqual(
      project!.sessions.map((s) => s.summary.path),
      ['/c/s.jsonl', '/a/gone.jsonl'],
    );
    const top = project!.sessions[0]!;
    assert.deepEqual(
      top.archives.map((a) => [a.summary.path, a.archiveOf, a.copyIndex, a.open]),
      [
        ['/a/s.jsonl', '/c/s.jsonl', 0, true],
        ['/a/s/earlier/t.jsonl', '/c/s.jsonl', 1, false],
      ],
    );
    const p = presentSession(top, now);
    assert.equal(p.expandable, 'collapsed');
    assert.match(p.description, /claude · read-only · 2 archived/);
    assert.match(p.tooltip, /2 archived copies by ctxd/);
    const first = presentSession(top.archives[0]!, now);
    assert.equal(first.label, 'ctxd archive');
    assert.equal(first.icon, 'archive');
    assert.match(first.description, /^open · /);
    assert.match(first.tooltip, /copy of \/c\/s\.jsonl/);
    assert.equal(presentSession(top.archives[1]!, now).label, 'earlier copy (ctxd archive)');
    const alone = presentSession(project!.sessions[1]!, now);
    assert.equal(alone.label, 'Old work');
    assert.equal(alone.icon, 'archive');
    assert.match(alone.description, /claude · ctxd archive/);
    assert.match(alone.tooltip, /live file is gone/);
    // When the live transcript leaves the list (Claude deleted it), its copies move up.
    const after = projectSessions({ sessions: [copy, earlier], changed: new Map(), openPath: undefined, now });
    assert.deepEqual(
      after[0]!.sessions.map((s) => [s.summary.path, s.archives.length]),
      [
        ['/a/s.jsonl', 0],
        ['/a/s/earlier/t.jsonl', 0],
      ],
    );
  });
});

function compactionEntry(id: string, timestamp: string, ctxd?: Record<string, unknown>): Entry {
  return {
    type: 'compaction',
    id,
    parentId: 'p',
    timestamp,
    summary: `summary ${id}`,
    firstKeptEntryId: 'k',
    tokensBefore: 112_000,
    details: ctxd ? { readFiles: ['a.ts'], modifiedFiles: [], ctxd } : undefined,
  };
}

describe('ledger', () => {
  test('rows from compaction rows and their entries, newest first, with every column', () => {
    const rows: TreeRow[] = [row('a', null), row('c1', 'a', { type: 'compaction', role: 'compaction', onActivePath: false }), collapsed('c1', 'x', 'y', 20), row('c2', 'y', { type: 'compaction', role: 'compaction' })];
    const ids = compactionIds(rows);
    assert.deepEqual(ids, [
      { id: 'c1', onActivePath: false },
      { id: 'c2', onActivePath: true },
    ]);
    const entries = new Map<string, Entry>([
      ['c1', compactionEntry('c1', '2025-01-01T10:00:00Z')],
      [
        'c2',
        compactionEntry('c2', '2025-01-01T11:00:00Z', {
          trigger: 'threshold',
          path: 'model',
          summarizer: 'litellm',
          model: 'anthropic/claude-3-5-haiku',
          durationMs: 3200,
          cost: 0.0042,
          failures: [],
          tokensAfter: 23_000,
        }),
      ],
    ]);
    const ledger = buildLedger(ids, entries);
    assert.deepEqual(
      ledger.map((r) => r.entryId),
      ['c2', 'c1'],
    );
    const [newest, old] = ledger as [ReturnType<typeof ledgerRow>, ReturnType<typeof ledgerRow>];
    assert.equal(newest.trigger, 'threshold');
    assert.equal(modelOf(newest), 'anthropic/claude-3-5-haiku');
    const p = presentLedger(newest, Date.parse('2025-01-01T12:00:00Z'));
    assert.match(p.label, /threshold$/);
    assert.equal(p.description, '112k → 23k · anthropic/claude-3-5-haiku · $0.0042 · 3.2 s');
    assert.match(p.tooltip, /89,000 tokens saved/);
    // written by pi: no details.ctxd
    assert.equal(old.trigger, 'external');
    assert.equal(old.byCtxd, false);
    assert.equal(presentLedger(old, 0).description, '112k → ? · unknown');
    // an offline compaction
    const offline = ledgerRow(compactionEntry('c3', '2025-01-01T11:00:00Z', { trigger: 'manual', path: 'offline', summarizer: 'offline', model: null, durationMs: 4, cost: null, tokensAfter: 900 }), true);
    assert.equal(presentLedger(offline, 0).description, '112k → 900 · offline · 4 ms');
  });
});

describe('ledger from session/ledger', () => {
  test('server rows map to the same ledger rows', () => {
    const row = ledgerRowFromServer({
      entryId: 'c9',
      line: 9,
      timestamp: '2025-01-01T11:00:00Z',
      trigger: 'threshold',
      tokensBefore: 112_000,
      tokensAfter: 23_000,
      summarizer: 'litellm',
      model: 'anthropic/claude-3-5-haiku',
      path: 'model',
      cost: 0.0042,
      durationMs: 3200,
      failures: [],
      firstKeptEntryId: 'k',
      onActivePath: true,
      madeBy: 'ctxd',
      summaryPreview: '## Goal …',
    });
    assert.equal(presentLedger(row, 0).description, '112k → 23k · anthropic/claude-3-5-haiku · $0.0042 · 3.2 s');
    const other = ledgerRowFromServer({ ...{ entryId: 'p1', line: 3, timestamp: null, trigger: null, tokensBefore: 5000, tokensAfter: null, summarizer: null, model: null, path: null, cost: null, durationMs: null, failures: null, firstKeptEntryId: null, onActivePath: false, madeBy: 'other', summaryPreview: '' } });
    assert.equal(other.trigger, 'external');
    assert.equal(other.byCtxd, false);
    assert.equal(presentLedger(other, 0).description, '5k → ? · unknown');
  });
});

describe('status bar', () => {
  const usage = { session: '/s', tokens: 112_000, window: 200_000, percent: 56, threshold: 183_616 };
  test('usage text and colours', () => {
    assert.equal(presentStatus({ server: 'running', usage }).text, 'ctxd 112k/200k (56%)');
    assert.equal(presentStatus({ server: 'running', usage }).background, undefined);
    const near = presentStatus({ server: 'running', usage: { ...usage, tokens: 170_000, percent: 85 } });
    assert.equal(near.background, 'warning');
    assert.equal(near.text, '$(warning) ctxd 170k/200k (85%)');
    assert.equal(presentStatus({ server: 'running', usage: { ...usage, tokens: 210_000, percent: 105 } }).background, 'error');
  });
  test('spinner while compacting, states of the server', () => {
    const running = presentStatus({ server: 'running', usage, compaction: { session: '/s', state: 'running', trigger: 'manual', tokensBefore: 112_000 } });
    assert.equal(running.text, '$(sync~spin) ctxd compacting… 112k');
    const done = presentStatus({ server: 'running', usage, compaction: { session: '/s', state: 'succeeded', trigger: 'manual', tokensBefore: 112_000, tokensAfter: 20_000 } });
    assert.match(done.tooltip, /112,000 → 20,000/);
    assert.equal(presentStatus({ server: 'running' }).text, '$(hubot) ctxd');
    assert.equal(presentStatus({ server: 'failed', serverError: 'boom' }).background, 'error');
    assert.match(presentStatus({ server: 'failed', serverError: 'boom' }).tooltip, /boom/);
  });
});

describe('formats', () => {
  test('tokens, durations, costs, ages', () => {
    assert.deepEqual(
      [0, 950, 1000, 1234, 9999, 12_345, 112_000, 999_499, 1_200_000].map(formatTokens),
      ['0', '950', '1k', '1.2k', '10k', '12k', '112k', '999k', '1.2M'],
    );
    assert.equal(formatTokens(undefined), '?');
    assert.deepEqual([850, 3200, 60_000, 125_000].map(formatDuration), ['850 ms', '3.2 s', '1 min', '2 min 5 s']);
    assert.deepEqual([0, 0.0042, 1.234, null].map(formatCost), ['$0', '$0.0042', '$1.23', undefined]);
    const now = Date.parse('2025-06-01T12:00:00Z');
    assert.equal(formatAge(now - 2000, now), 'just now');
    assert.equal(formatAge((now - 3 * 60_000) / 1000, now), '3 min ago');
    assert.match(formatWhen(now - 1000, now), /^\d\d:\d\d:\d\d$/);
    assert.equal(tildify('/home/me/x', '/home/me'), '~/x');
    assert.equal(tildify('/home/meme/x', '/home/me'), '/home/meme/x');
  });
});

describe('documents', () => {
  test('an entry renders as Markdown and as raw JSON', () => {
    const entry = {
      type: 'message',
      id: 'e1',
      parentId: null,
      timestamp: '2025-01-01T00:00:00Z',
      message: { role: 'assistant', content: [{ type: 'text', text: 'Hello' }, { type: 'toolCall', id: 't', name: 'read', arguments: { path: 'a.ts' } }] },
    };
    const doc = renderEntryDocument({ ...row('e1', null, { role: 'assistant' }), entry, children: ['e2'] }, 'My session');
    assert.match(doc, /^# assistant · 10 tokens/);
    assert.match(doc, /## Rendered\n\n[\s\S]*Hello[\s\S]*\*\*→ read\*\*/);
    assert.match(doc, /## Raw JSON\n\n```json\n\{\n {2}"type": "message"/);
  });
  test('a preview lists the entries that would be summarised with tokens before and after', () => {
    const plan = {
      leafId: 'z',
      firstKeptEntryId: 'k',
      firstKeptLine: 9,
      isSplitTurn: false,
      turnStartLine: null,
      messagesToSummarize: 2,
      turnPrefixMessages: 0,
      tokensBefore: 31_500,
      estimatedTokensAfter: 20_056,
      keptMessages: 5,
      previousCompactionId: null,
      readFiles: ['src/a.ts'],
      modifiedFiles: [],
      summarizeEntryIds: ['a', 'b'],
      turnPrefixEntryIds: [],
    };
    const doc = renderPreviewDocument(plan, 'S', [row('a', null, { preview: 'first | piped' }), row('b', 'a', { tokens: 2000 })]);
    assert.match(doc, /tokens before \| \*\*31,500\*\*/);
    assert.match(doc, /tokens after \(estimated\) \| \*\*20,056\*\* \(11,444 fewer\)/);
    assert.match(doc, /\| 1 \| `a` \| user \| 10 \| first \\\| piped \|/);
    assert.match(doc, /2 \(2 messages, 2,010 tokens\)/);
    assert.doesNotMatch(doc, /must keep/);
  });

  test('a preview shows what the compaction must keep, before the file lists', () => {
    const plan = {
      leafId: 'z', firstKeptEntryId: 'k', firstKeptLine: 9, isSplitTurn: false, turnStartLine: null,
      messagesToSummarize: 2, turnPrefixMessages: 0, tokensBefore: 31_500, estimatedTokensAfter: 20_056,
      keptMessages: 5, previousCompactionId: null, readFiles: [], modifiedFiles: ['src/a.ts'],
      summarizeEntryIds: ['a'], turnPrefixEntryIds: [],
      mustKeep: [{ kind: 'goal', text: 'Ship the parser', probes: ['ship the parser'] }],
      mustKeepText: '## What this compaction must keep\n- Goal: Ship the parser\n- Files modified: src/a.ts',
    };
    const doc = renderPreviewDocument(plan, 'S', [row('a', null)]);
    assert.match(doc, /## What this compaction must keep\n- Goal: Ship the parser\n- Files modified: src\/a\.ts/);
    assert.ok(doc.indexOf('must keep') < doc.indexOf('## Files'));
    const bare = renderPreviewDocument({ ...plan, mustKeepText: undefined }, 'S', [row('a', null)]);
    assert.match(bare, /## What this compaction must keep\n\n- goal: Ship the parser/);
  });
});
