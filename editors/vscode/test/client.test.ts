/** The protocol client against a real `ctxd serve` subprocess (no stub). */

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ResponseError } from '@ctxd/client';
import { CtxdClient, CtxdError, readableError, splitCommand } from '@ctxd/client';
import { ErrorCode, Notification, isCollapsed, type CompactionStatus, type WorkDoneProgress } from '@ctxd/client';
import { next, serverCommand, serverEnv, startDaemon, tempRoot } from './daemon';
import { writeSampleSession, type SessionWriter } from './fixtures';

describe('splitCommand', () => {
  test('words, quotes and escapes', () => {
    assert.deepEqual(splitCommand('ctxd serve'), ['ctxd', 'serve']);
    assert.deepEqual(splitCommand('  "/opt/my venv/bin/ctxd"  serve --tcp \'\' '), ['/opt/my venv/bin/ctxd', 'serve', '--tcp', '']);
    assert.deepEqual(splitCommand('a\\ b "c\\"d"'), ['a b', 'c"d']);
  });
});

describe('readable errors', () => {
  test('codes name their kind, in either numbering; messages are not repeated', () => {
    const e = readableError('compact', new ResponseError(-31020, 'nothing to compact: the leaf is a compaction'));
    assert.equal(e.message, 'compaction failed: nothing to compact: the leaf is a compaction');
    assert.equal(e.kind, 'compactionFailed');
    const legacy = readableError('compact', new ResponseError(-32020, 'compaction failed: model timed out'));
    assert.equal(legacy.message, 'compaction failed: model timed out');
    assert.equal(legacy.kind, 'compactionFailed');
    const field = readableError('session/tree', new ResponseError(-32602, "invalid value for field 'collapse'", { field: 'collapse' }));
    assert.equal(field.message, "invalid params: invalid value for field 'collapse' (field collapse)");
    assert.equal(readableError('compact', new ResponseError(-32800, 'cancelled by the hook')).cancelled, true);
    assert.equal(readableError('x', new Error('boom')).message, 'boom');
  });
});

describe('CtxdClient against ctxd serve', { timeout: 120_000 }, () => {
  const { root, cleanup } = tempRoot();
  let client: CtxdClient;
  let session: SessionWriter;
  const log: string[] = [];

  before(async () => {
    session = writeSampleSession(root, { turns: 12, toolTokens: 2000 });
    client = await startDaemon(root, {}, log);
  });

  after(async () => {
    await client?.stop();
    cleanup();
  });

  test('initialize declares ctxd capabilities', () => {
    const caps = client.capabilities!;
    assert.ok(caps, 'capabilities.experimental.ctxd');
    assert.ok(caps.methods.includes('session/tree'));
    assert.ok(caps.methods.includes('compact'));
    for (const n of Object.values(Notification)) {
      assert.ok(caps.notifications.includes(n), n);
    }
    assert.ok(client.running);
    assert.ok(client.pid);
  });

  test('session/list names the session from session_info', async () => {
    const list = await client.listSessions();
    assert.deepEqual(list.roots, [root]);
    assert.equal(list.sessions.length, 1);
    const s = list.sessions[0]!;
    assert.equal(s.name, "Fix the calculator's rounding");
    assert.equal(s.cwd, '/home/dev/calc');
    assert.equal(s.entries, session.ids.length);
  });

  test('session/open and session/tree: collapsed runs, the leaf, usage', async () => {
    const info = await client.openSession(session.path);
    assert.equal(info.leafId, session.leafId);
    assert.equal(info.entries, session.ids.length);
    assert.ok(info.usage.tokens > 30_000, `usage ${info.usage.tokens}`);
    assert.equal(info.usage.window, 200_000);
    const tree = await client.tree({ session: session.path });
    assert.ok(tree.rows.some(isCollapsed), 'a long run is collapsed');
    assert.ok(tree.rows.length < 10);
    const leaf = tree.rows.find((r) => !isCollapsed(r) && r.isLeaf);
    assert.equal(leaf && !isCollapsed(leaf) ? leaf.id : undefined, session.leafId);
    const full = await client.tree({ session: session.path, collapse: 0 });
    assert.equal(full.rows.length, session.ids.length);
  });

  test('an append from another process arrives as didChange (external) and context/usage', async () => {
    const changed = next(client.onDidChange, (p) => p.origin === 'external' && p.session === session.path, 10_000, 'didChange');
    const usage = next(client.onContextUsage, (p) => p.session === session.path && p.tokens >= 112_000, 10_000, 'usage');
    session.user('One more thing: print two decimals.');
    const id = session.assistant('Printing two decimals now.', 112_000);
    const change = await changed;
    assert.ok(change.ids.length >= 1);
    const u = await usage;
    assert.equal(u.leafId ?? id, id);
    assert.equal(Math.round(u.percent), 56);
  });

  test('session/append through ctxd: didChange with origin ctxd', async () => {
    const changed = next(client.onDidChange, (p) => p.origin === 'ctxd' && p.session === session.path, 10_000, 'didChange');
    const result = await client.append({ session: session.path, messages: [{ role: 'user', content: 'and a test', timestamp: Date.now() }] });
    const change = await changed;
    assert.deepEqual(change.ids, result.ids);
    session.leafId = result.ids[0]!;
  });

  test('compact: a dry run, then a compaction with progress and status notifications', async () => {
    const plan = await client.previewCompaction(session.path);
    assert.ok(plan.summarizeEntryIds.length > 0);
    assert.ok(plan.tokensBefore > plan.estimatedTokensAfter);
    const statuses: CompactionStatus[] = [];
    const sub = client.onCompactionStatus((s) => statuses.push(s));
    const progress: WorkDoneProgress[] = [];
    const done = next(client.onCompactionStatus, (s) => s.state === 'succeeded', 30_000, 'compaction/status succeeded');
    const result = await client.compact(session.path, { instructions: 'keep the rounding decisions' }, (p) => progress.push(p));
    await done;
    sub.dispose();
    assert.equal(result.trigger, 'manual');
    assert.ok(result.tokensAfter < result.tokensBefore);
    assert.deepEqual(
      statuses.map((s) => s.state),
      ['running', 'succeeded'],
    );
    assert.equal(progress[0]?.kind, 'begin');
    assert.equal(progress.at(-1)?.kind, 'end');
    const entry = await client.entry(session.path, result.entryId);
    assert.equal(entry.type, 'compaction');
    const details = (entry.entry.details as { ctxd: Record<string, unknown> }).ctxd;
    assert.equal(details.trigger, 'manual');
    assert.equal(details.instructions, 'keep the rounding decisions');
    assert.equal(details.tokensAfter, result.tokensAfter);
  });

  test('label, branch (with and without summary) and fork', async () => {
    const full = await client.tree({ session: session.path, collapse: 0 });
    const target = full.rows.find((r) => !isCollapsed(r) && r.role === 'user' && r.onActivePath);
    assert.ok(target && !isCollapsed(target));
    const labelled = next(client.onDidChange, (p) => p.origin === 'ctxd', 10_000, 'didChange after label');
    await client.label(session.path, target.id, 'start here');
    await labelled;
    const again = await client.entry(session.path, target.id);
    assert.deepEqual(again.labels, ['start here']);

    const branched = await client.branch({ session: session.path, entryId: target.id });
    assert.equal(branched.summaryEntryId, null);
    const info = await client.openSession(session.path);
    assert.equal(info.leafId, branched.leafId);

    // The leaf moved back: the entries after it are off the active path until something is added.
    let tree = await client.tree({ session: session.path, collapse: 0 });
    const leafRow = tree.rows.find((r) => !isCollapsed(r) && r.isLeaf);
    assert.equal(leafRow && !isCollapsed(leafRow) ? leafRow.id : undefined, target.id);
    await client.append({ session: session.path, messages: [{ role: 'user', content: 'a new direction', timestamp: Date.now() }] });
    tree = await client.tree({ session: session.path });
    assert.ok(tree.rows.some((r) => !isCollapsed(r) && r.id === target.id && r.childCount === 2), 'a branch point');

    const withSummary = await client.branch({ session: session.path, entryId: target.id, summarize: true });
    assert.ok(withSummary.summaryEntryId);

    const fork = await client.fork(session.path, target.id);
    assert.notEqual(fork.path, session.path);
    const list = await client.listSessions();
    assert.equal(list.sessions.length, 2);
  });

  test('context/build counts tokens per message', async () => {
    const ctx = await client.buildContext({ session: session.path });
    assert.ok(ctx.messages.length > 0);
    assert.ok(ctx.messages.every((m) => typeof m.tokens === 'number'));
    assert.ok(ctx.usage.window > 0);
  });

  test('errors are readable CtxdErrors with ctxd codes', async () => {
    await assert.rejects(client.openSession('no-such-session'), (e: unknown) => {
      assert.ok(e instanceof CtxdError);
      assert.equal(e.kind, 'unknownSession');
      assert.match(e.message, /^unknown session: no session 'no-such-session'/);
      return true;
    });
    await assert.rejects(client.entry(session.path, 'nope'), (e: CtxdError) => e.kind === 'unknownEntry' && /no entry 'nope'/.test(e.message));
    await assert.rejects(client.request('session/tree', { session: session.path, collapse: 'x' }), (e: CtxdError) => {
      assert.equal(e.code, ErrorCode.invalidParams);
      assert.equal(e.kind, 'invalidParams');
      assert.match(e.message, /collapse/);
      return true;
    });
  });

  test('stop: shutdown and exit, the process leaves and says so', async () => {
    const second = await startDaemon(root);
    const exited = next(second.onExit, () => true, 10_000, 'exit');
    await second.stop();
    const info = await exited;
    assert.equal(info.expected, true);
    assert.equal(info.code, 0);
    assert.equal(second.running, false);
    await assert.rejects(second.listSessions(), /not running/);
  });

  test('a daemon that dies unexpectedly is reported as such', async () => {
    const third = await startDaemon(root);
    const exited = next(third.onExit, () => true, 10_000, 'exit');
    process.kill(third.pid!, 'SIGKILL');
    const info = await exited;
    assert.equal(info.expected, false);
    assert.equal(info.signal, 'SIGKILL');
  });

  test('a command that cannot start fails with a readable message', async () => {
    const bad = new CtxdClient({ command: ['/nonexistent/ctxd', 'serve'], env: serverEnv() });
    await assert.rejects(bad.start(), /could not start "\/nonexistent\/ctxd serve": spawn \/nonexistent\/ctxd ENOENT/);
    const dies = new CtxdClient({ command: [...serverCommand().slice(0, -1), 'no-such-subcommand'], env: serverEnv() });
    await assert.rejects(dies.start(), /exited during startup/);
  });
});
