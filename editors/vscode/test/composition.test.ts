/** The Context view's projection (pure) and its feed against a real `ctxd serve`: asked for when a
 * session opens, then followed through context/compositionChanged while an agent writes and the
 * daemon compacts. */

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Composition, CtxdClient } from '@ctxd/client';
import { CompositionFeed } from '../src/compositionFeed';
import { PART_STYLE, projectComposition } from '../src/projection/composition';
import { Store } from '../src/state';
import { startDaemon, tempRoot, until } from './daemon';
import { writeSampleSession, type SessionWriter } from './fixtures';

function composition(extra: Partial<Composition> = {}): Composition {
  const parts = {
    system: 0, tools: 0, summary: 1200, branchSummary: 0, pinned: 0, user: 800, assistant: 500, thinking: 0,
    toolCalls: 300, toolResults: 9000, images: 0, custom: 0, bashExecution: 0,
  };
  return {
    session: '/s.jsonl',
    leafId: 'f0000009',
    revision: 'r.1.0.0',
    window: 20_000,
    threshold: 16_000,
    reserve: 4_000,
    contextTokens: 12_500,
    estimatedTokens: 11_800,
    percent: 62.5,
    parts,
    toolResultsByTool: { read: 7000, bash: 2000 },
    top: [{ entryId: 'a1', line: 7, role: 'toolResult', tool: 'read', tokens: 5900, pinned: false }],
    timeline: [
      { turn: 1, entryId: 'a1', tokens: 9000, source: 'usage', kind: 'turn' },
      { turn: 2, entryId: 'a2', tokens: 17_000, source: 'usage', kind: 'turn' },
      { turn: 2, entryId: 'c1', tokens: 3000, source: 'compaction', kind: 'compaction' },
      { turn: 3, entryId: 'a3', tokens: 12_500, source: 'usage', kind: 'turn' },
    ],
    markers: [
      { kind: 'compaction', at: 2, entryId: 'c1', tokensBefore: 17_000, tokensAfter: 3000, trigger: 'threshold', summarizer: 'offline', detail: null },
      { kind: 'branch', at: 1, entryId: 'a2', tokensBefore: null, tokensAfter: null, trigger: null, summarizer: null, detail: '1 other branch' },
    ],
    ...extra,
  };
}

describe('projectComposition', () => {
  test('segments in bar order, only parts that hold tokens, coloured by theme variables', () => {
    const m = projectComposition(composition());
    assert.deepEqual(
      m.segments.map((s) => [s.part, s.tokens, s.color]),
      [
        ['summary', 1200, '--vscode-charts-green'],
        ['user', 800, '--vscode-charts-blue'],
        ['assistant', 500, '--vscode-terminal-ansiCyan'],
        ['toolCalls', 300, '--vscode-charts-orange'],
        ['toolResults', 9000, '--vscode-charts-red'],
      ],
    );
    assert.equal(m.segments[4]!.detail, 'Tool results: 9,000 tokens (45% of the window) · read 7,000, bash 2,000');
    assert.ok(Object.values(PART_STYLE).every((s) => s.color.startsWith('--vscode-')));
    assert.equal(m.headline, '13k of 20k tokens (62.5%) · compaction at 16k · reserve 4k');
    assert.equal(m.threshold, 16_000);
    assert.equal(m.window, 20_000);
  });

  test('the timeline: one value per point, markers with their hover texts', () => {
    const m = projectComposition(composition());
    assert.deepEqual(m.timeline.tokens, [9000, 17_000, 3000, 12_500]);
    assert.deepEqual(m.timeline.labels, ['turn 1', 'turn 2', 'compaction after turn 2', 'turn 3']);
    assert.deepEqual(m.timeline.marks, [
      { index: 2, tokens: 3000, kind: 'compaction', text: 'Compaction: 17,000 → 3,000 tokens\ntrigger: threshold\nsummariser: offline' },
      { index: 1, tokens: 17_000, kind: 'branch', text: 'Branch: 1 other branch' },
    ]);
    assert.equal(m.timelineSummary, '1 compaction · 1 branch · 0 overflows');
  });

  test('the heaviest entries: label and share of the estimate', () => {
    const m = projectComposition(composition());
    assert.deepEqual(m.top, [{ entryId: 'a1', label: 'toolResult read · line 7', tokens: 5900, percent: 50 }]);
  });

  test('a marker whose point is missing is left out; an empty context has no segments', () => {
    const empty = composition({
      parts: projectlessParts(),
      markers: [{ kind: 'overflow', at: 9, entryId: 'x', tokensBefore: null, tokensAfter: null, trigger: null, summarizer: null, detail: 'too long' }],
    });
    const m = projectComposition(empty);
    assert.deepEqual(m.segments, []);
    assert.deepEqual(m.timeline.marks, []);
  });
});

function projectlessParts(): Composition['parts'] {
  return {
    system: 0, tools: 0, summary: 0, branchSummary: 0, pinned: 0, user: 0, assistant: 0, thinking: 0,
    toolCalls: 0, toolResults: 0, images: 0, custom: 0, bashExecution: 0,
  };
}

describe('CompositionFeed against ctxd serve', { timeout: 120_000 }, () => {
  const { root, cleanup } = tempRoot();
  let client: CtxdClient;
  let session: SessionWriter;
  const store = new Store({ debounceMs: 20 });
  let feed: CompositionFeed;
  const seen: (Composition | undefined)[] = [];

  before(async () => {
    session = writeSampleSession(root, { turns: 3, toolTokens: 1500 });
    client = await startDaemon(root, {
      initializationOptions: {
        autoCompact: true,
        autoCompactExternal: true,
        compaction: { contextWindow: 12_000, reserveTokens: 2000, keepRecentTokens: 500 },
      },
    });
    await store.attach(client);
    feed = new CompositionFeed(store, () => client);
    feed.onDidChange((c) => seen.push(c));
  });

  after(async () => {
    feed.dispose();
    store.dispose();
    await client.stop();
    cleanup();
  });

  test('opening a session asks for its composition; the parts add up to the estimate', async () => {
    await store.open(session.path);
    await until(() => feed.latest !== undefined, 15_000, 'the composition');
    const c = feed.latest!;
    assert.equal(c.session, store.current!.path);
    assert.equal(Object.values(c.parts).reduce((a, b) => a + b, 0), c.estimatedTokens);
    assert.equal(c.timeline.length, 3);
    assert.equal(c.top[0]!.role, 'toolResult');
  });

  test('an agent writing: the feed follows; past the threshold the daemon compacts and the timeline shows it', async () => {
    const before = feed.latest!;
    session.user('Now the CLI, please.');
    session.assistant('The CLI prints two decimals now.', 8000);
    await until(() => feed.latest !== before && feed.latest!.timeline.length === 4, 15_000, 'the composition after the turn');
    session.user('And the docs.');
    session.assistant('Docs updated; the context is big now.', 11_000);
    await until(() => feed.latest!.markers.some((m) => m.kind === 'compaction'), 30_000, 'the compaction in the timeline');
    const m = projectComposition(feed.latest!);
    const mark = m.timeline.marks.find((x) => x.kind === 'compaction')!;
    assert.match(mark.text, /^Compaction: 11,000 → [\d,]+ tokens\ntrigger: threshold\nsummariser: offline$/);
    assert.ok(m.segments.some((s) => s.part === 'summary'));
  });
});
