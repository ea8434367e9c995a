/**
 * The store and the view adapters (with the `vscode` mock) following a real `ctxd serve`: live
 * appends, compaction into the ledger, the status bar, and a restart that empties and refills.
 */

import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, realpathSync, rmSync, symlinkSync, utimesSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { CtxdClient } from '@ctxd/client';
import { LedgerProvider } from '../src/ledgerView';
import { entryRows, type ConversationNode } from '../src/projection/conversation';
import type { LedgerNode } from '../src/projection/ledger';
import type { SessionsNode } from '../src/projection/sessions';
import { ConversationProvider, NodeDecorations } from '../src/sessionTree';
import { SessionsProvider } from '../src/sessionsView';
import { Store } from '../src/state';
import { StatusBar } from '../src/statusBar';
import { REPO, startDaemon, tempRoot, until } from './daemon';
import { SessionWriter, writeSampleSession } from './fixtures';
import { TreeItemCollapsibleState, Uri } from './vscode-mock';

async function walk(provider: ConversationProvider, nodes?: ConversationNode[]): Promise<ConversationNode[]> {
  const out: ConversationNode[] = [];
  for (const node of nodes ?? (await provider.getChildren())) {
    out.push(node);
    if (node.kind === 'entry' || node.kind === 'branch') {
      out.push(...(await walk(provider, await provider.getChildren(node))));
    }
  }
  return out;
}

describe('store and views against ctxd serve', { timeout: 120_000 }, () => {
  const { root, cleanup } = tempRoot();
  let client: CtxdClient;
  let session: SessionWriter;
  let other: SessionWriter;
  const store = new Store({ debounceMs: 20 });
  const conversation = new ConversationProvider(store);
  const sessions = new SessionsProvider(store);
  const ledger = new LedgerProvider(store);
  const status = new StatusBar(store);

  before(async () => {
    session = writeSampleSession(root, { turns: 12, toolTokens: 2000 });
    other = writeSampleSession(root, { cwd: '/home/dev/other', name: 'Another project', turns: 1, start: Date.now() - 3_600_000 });
    const anHourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(other.path, anHourAgo, anHourAgo);
    client = await startDaemon(root);
    await store.attach(client);
  });

  after(async () => {
    conversation.dispose();
    sessions.dispose();
    ledger.dispose();
    status.dispose();
    store.dispose();
    await client?.stop();
    cleanup();
  });

  test('sessions: grouped by folder, newest first', () => {
    const projects = sessions.getChildren();
    assert.deepEqual(
      projects.map((p) => sessions.getTreeItem(p).label),
      ['calc', 'other'],
    );
    const inCalc = sessions.getChildren(projects[0]) as SessionsNode[];
    const item = sessions.getTreeItem(inCalc[0]!);
    assert.equal(item.label, "Fix the calculator's rounding");
    assert.equal(item.contextValue, 'session');
    assert.equal(item.command?.command, 'ctxd.openSession');
    assert.equal(status.text, '$(hubot) ctxd');
  });

  test('opening a session fills the conversation, the ledger and the status bar', async () => {
    await store.open(session.path);
    const nodes = await walk(conversation);
    const leaf = nodes.find((n) => n.kind === 'entry' && n.row.isLeaf);
    assert.ok(leaf && leaf.kind === 'entry');
    assert.equal(leaf.row.id, session.leafId);
    const item = conversation.getTreeItem(leaf);
    assert.equal(item.contextValue, 'entry');
    assert.deepEqual(item.label, { label: leaf.row.preview, highlights: [[0, leaf.row.preview.length]] });
    assert.match(String(item.description), /◀ leaf · \d+ tok/);
    const decoration = new NodeDecorations().provideFileDecoration(item.resourceUri as unknown as import('vscode').Uri);
    assert.equal(decoration?.badge, '◀');
    assert.equal((decoration?.color as { id: string } | undefined)?.id, 'ctxd.activePathForeground');
    assert.match(status.text, /^ctxd 3\dk\/200k \(1\d%\)$/);
    assert.deepEqual(
      ledger.getChildren().map((n: LedgerNode) => n.kind),
      ['notice'],
    );
    // a collapsed run expands into its entries (from an uncollapsed session/tree)
    const run = nodes.find((n) => n.kind === 'collapsed');
    assert.ok(run && run.kind === 'collapsed');
    assert.equal(conversation.getTreeItem(run).collapsibleState, TreeItemCollapsibleState.Collapsed);
    const hidden = await conversation.getChildren(run);
    assert.equal(hidden.length, run.row.count);
    assert.equal(conversation.getParent(hidden[0]!), run);
  });

  test('an external append shows a new node, a live marker and new usage without polling', async () => {
    session.user('Now print results with two decimals.');
    const id = session.assistant('Printing with two decimals.', 112_000);
    await until(() => store.current?.tree?.leafId === id, 10_000, 'the new leaf');
    await until(() => status.text === 'ctxd 112k/200k (56%)', 10_000, `status text, now ${status.text}`);
    const nodes = await walk(conversation);
    const leaf = nodes.find((n) => n.kind === 'entry' && n.row.isLeaf);
    assert.equal(leaf?.kind === 'entry' ? leaf.row.preview : '', 'Printing with two decimals.');
    const calc = sessions.getChildren()[0]!;
    const first = sessions.getChildren(calc)[0]!;
    assert.match(String(sessions.getTreeItem(first).description), /● live · open/);
    assert.equal(store.changed.has(other.path), false);
  });

  test('a compaction lands in the ledger; selecting a row opens the summary', async () => {
    await client.compact(session.path, {});
    await until(() => store.ledger.length === 1, 10_000, 'a ledger row');
    const rows = ledger.getChildren();
    const item = ledger.getTreeItem(rows[0]!);
    assert.match(String(item.label), /manual$/);
    assert.match(String(item.description), /^\d+k → \d+(\.\d)?k · offline · \d+ ms$/);
    assert.equal(item.command?.command, 'ctxd.showSummary');
    assert.equal(item.contextValue, 'compaction');
    const nodes = await walk(conversation);
    const compaction = nodes.find((n) => n.kind === 'entry' && n.row.type === 'compaction');
    assert.ok(compaction);
    assert.match(String(conversation.getTreeItem(compaction).description), /COMPACTION/);
    await until(() => !status.text.includes('112k'), 10_000, 'usage after compaction');
  });

  test('the ledger from session/ledger matches the one built from the tree and entries', async () => {
    if (!client.supports('session/ledger')) {
      return; // an older daemon: only the fallback exists, tested above
    }
    const fromMethod = store.ledger.map(({ summary: _s, instructions: _i, readFiles: _r, modifiedFiles: _m, ...rest }) => rest);
    const caps = client.capabilities!;
    client.capabilities = { ...caps, methods: caps.methods.filter((m) => m !== 'session/ledger') };
    try {
      await store.reloadTree();
      const fromTree = store.ledger.map(({ summary: _s, instructions: _i, readFiles: _r, modifiedFiles: _m, ...rest }) => rest);
      assert.deepEqual(fromTree, fromMethod);
    } finally {
      client.capabilities = caps;
    }
  });

  test('a pinned message shows a pin and offers Unpin; unpinning takes the pin away', async () => {
    await store.open(session.path);
    const entryOf = async (id?: string) =>
      (await walk(conversation)).find((n) => n.kind === 'entry' && (id ? n.row.id === id : n.row.type === 'message'));
    const target = await entryOf();
    assert.ok(target && target.kind === 'entry' && !target.row.pinned);
    assert.equal(conversation.getTreeItem(target).contextValue, 'entry');
    await client.pin(session.path, target.row.id, true);
    await store.settled();
    const pinned = await entryOf(target.row.id);
    assert.ok(pinned && pinned.kind === 'entry' && pinned.row.pinned === true);
    const item = conversation.getTreeItem(pinned);
    assert.equal(item.contextValue, 'entry.pinned'); // the context menu offers Unpin Message
    assert.match(String(item.description), /📌 pinned/);
    assert.match(String(item.tooltip), /pinned: compactions carry it verbatim after their summary/);
    await client.pin(session.path, target.row.id, false);
    await store.settled();
    const unpinned = await entryOf(target.row.id);
    assert.ok(unpinned && unpinned.kind === 'entry' && !unpinned.row.pinned);
    assert.equal(conversation.getTreeItem(unpinned).contextValue, 'entry');
  });

  test('a branch shows as a branch point with the active branch open', async () => {
    const target = entryRows(await store.allRows()).find((r) => r.role === 'user' && r.onActivePath);
    assert.ok(target);
    await client.branch({ session: session.path, entryId: target.id });
    await client.append({ session: session.path, messages: [{ role: 'user', content: 'another way', timestamp: Date.now() }] });
    await until(() => store.shownRows().some((r) => r.id === target.id && r.childCount === 2), 10_000, 'a branch point');
    await store.settled();
    const nodes = await walk(conversation);
    const branches = nodes.filter((n) => n.kind === 'branch');
    assert.equal(branches.length, 2);
    const states = branches.map((b) => conversation.getTreeItem(b).collapsibleState);
    assert.deepEqual(states.sort(), [TreeItemCollapsibleState.Collapsed, TreeItemCollapsibleState.Expanded].sort());
    // the ledger row of the compaction left behind is off the active path now
    await until(() => store.ledger.length === 1 && !store.ledger[0]!.onActivePath, 10_000, 'ledger row off the path');
  });

  test('detaching (a server restart) clears every view; attaching again refills them', async () => {
    const path = store.current!.path;
    store.detach('stopped');
    assert.equal(sessions.getChildren().length, 0);
    assert.equal((await conversation.getChildren()).length, 0);
    assert.equal(ledger.getChildren().length, 0);
    assert.equal(status.text, '$(error) ctxd');
    const fresh = await startDaemon(root);
    try {
      await store.attach(fresh, path);
      assert.equal(sessions.getChildren().length, 2);
      assert.ok((await conversation.getChildren()).length > 0);
      assert.equal(store.ledger.length, 1);
      assert.match(status.text, /^ctxd /);
    } finally {
      store.detach();
      await fresh.stop();
    }
  });

  test('a session of 10k entries stays usable: a handful of rows, a long run expands in chunks', async () => {
    const big = new SessionWriter(root, '/home/dev/big');
    big.append({ type: 'session_info', name: 'Ten thousand entries' }, null);
    for (let k = 0; k < 5000; k++) {
      big.user(`request ${k}`);
      big.assistant(`answer ${k}`, 1000 + k);
    }
    const fresh = await startDaemon(root);
    const bigStore = new Store({ debounceMs: 20 });
    const provider = new ConversationProvider(bigStore);
    try {
      await bigStore.attach(fresh);
      let started = Date.now();
      await bigStore.open(big.path);
      const openMs = Date.now() - started;
      const roots = await provider.getChildren();
      assert.ok(roots.length <= 10, `${roots.length} rows`);
      const run = roots.find((n) => n.kind === 'collapsed');
      assert.ok(run && run.kind === 'collapsed' && run.row.count > 9_000);
      started = Date.now();
      const chunks = await provider.getChildren(run);
      const expandMs = Date.now() - started;
      assert.equal(chunks[0]!.kind, 'chunk');
      assert.equal(chunks.length, Math.ceil(run.row.count / 200));
      const entries = await provider.getChildren(chunks[chunks.length - 1]);
      assert.ok(entries.length > 0 && entries.length <= 200);
      assert.equal(provider.getParent(entries[0]!), chunks[chunks.length - 1]);
      process.stdout.write(`# 10k entries: open + tree ${openMs} ms, expanding the run ${expandMs} ms\n`);
      assert.ok(openMs < 10_000 && expandMs < 10_000);
    } finally {
      provider.dispose();
      bigStore.dispose();
      await fresh.stop();
    }
  });

  test('under a symlinked root, listed sessions match the real paths of notifications', async () => {
    const { root: real, cleanup: done } = tempRoot('ctxd-vscode-real-');
    const link = `${real}-link`;
    symlinkSync(real, link);
    const writer = writeSampleSession(link, { turns: 1 });
    const fresh = await startDaemon(link);
    const linked = new Store({ debounceMs: 20 });
    try {
      await linked.attach(fresh);
      assert.equal(linked.sessions[0]?.path, realpathSync(writer.path));
      writer.user('one more');
      await until(() => linked.changed.has(linked.sessions[0]!.path), 10_000, 'a live marker on the listed session');
    } finally {
      linked.dispose();
      await fresh.stop();
      rmSync(link, { force: true });
      done();
    }
  });

  test("a Claude Code transcript shows ctxd's archived copy under it, and the copy stays after Claude deletes it", async () => {
    const { root: base, cleanup: done } = tempRoot('ctxd-vscode-archive-');
    const id = '2696e685-97f7-47e2-9b90-766d279ab840';
    const projects = join(base, 'claude', 'projects');
    const archive = join(base, 'data', 'ctxd', 'archive');
    const live = join(projects, '-home-dev-service', `${id}.jsonl`);
    const copy = join(archive, 'claude', '-home-dev-service', `${id}.jsonl`);
    const recorded = join(REPO, 'tests', 'data', 'claude', 'claude-2.1.330-compact.jsonl');
    mkdirSync(dirname(live), { recursive: true });
    mkdirSync(dirname(copy), { recursive: true });
    copyFileSync(recorded, live);
    copyFileSync(recorded, copy); // what `ctxd hook PreCompact` keeps (tests/claude_code run the real hooks)
    const fresh = await startDaemon(join(base, 'pi'), {
      initializationOptions: { transcriptRoots: [projects], archiveRoots: [archive], watch: true },
    });
    const archived = new Store({ debounceMs: 20 });
    const view = new SessionsProvider(archived);
    const tree = new ConversationProvider(archived);
    try {
      await archived.attach(fresh);
      const [project] = view.getChildren();
      assert.equal(view.getTreeItem(project!).label, 'service'); // the cwd, from the first line that has one
      const top = view.getChildren(project) as SessionsNode[];
      assert.equal(top.length, 1);
      const item = view.getTreeItem(top[0]!);
      assert.equal(item.collapsibleState, TreeItemCollapsibleState.Collapsed);
      assert.match(String(item.description), /claude · read-only · 1 archived/);
      const [child] = view.getChildren(top[0]!) as SessionsNode[];
      assert.ok(child && child.kind === 'session');
      assert.equal(child.summary.path, copy);
      assert.equal(view.getTreeItem(child).label, 'ctxd archive');
      assert.equal(view.getParent(child), top[0]);
      // The copy opens like any transcript: its tree holds the history from before /compact.
      await archived.open(child.summary.path);
      const nodes = await walk(tree);
      assert.ok(nodes.some((n) => n.kind === 'entry' && n.row.type === 'compaction'));
      // Claude's cleanup deletes the live transcript: the copy moves up, on its own.
      rmSync(live);
      await until(() => archived.sessions.length === 1, 10_000, 'the deleted transcript to leave the list');
      await archived.refreshSessions();
      const alone = view.getChildren(view.getChildren()[0]) as SessionsNode[];
      assert.deepEqual(
        alone.map((n) => (n.kind === 'session' ? [n.summary.path, view.getTreeItem(n).collapsibleState] : [])),
        [[copy, TreeItemCollapsibleState.None]],
      );
      assert.match(String(view.getTreeItem(alone[0]!).description), /claude · ctxd archive/);
    } finally {
      tree.dispose();
      view.dispose();
      archived.dispose();
      await fresh.stop();
      done();
    }
  });

  test('the decoration provider ignores other schemes', () => {
    assert.equal(new NodeDecorations().provideFileDecoration(Uri.file('/x') as unknown as import('vscode').Uri), undefined);
  });
});
