/**
 * Other agents' sessions in the Sessions and Conversation views, through a real `ctxd serve`: a
 * Codex 0.169 rollout and an opencode database (copies of the real ones in tests/data) are listed
 * beside a pi session and a Claude Code transcript, each in its project folder with its agent
 * marked read-only; opened, they show their conversation, and it grows live as Codex appends to
 * its rollout and opencode writes rows to its database.
 */

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync, appendFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { CtxdClient } from '@ctxd/client';
import { Documents } from '../src/documents';
import type { SessionsNode } from '../src/projection/sessions';
import { ConversationProvider } from '../src/sessionTree';
import { SessionsProvider } from '../src/sessionsView';
import { Store } from '../src/state';
import { REPO, startDaemon, tempRoot, until } from './daemon';
import { writeSampleSession } from './fixtures';
import { Uri } from './vscode-mock';

const OPENCODE_SESSION = 'ses_deb60502affel00BqeWtCJeQt7';

/** Add one turn to the opencode database copy as opencode writes it (tests/opencode/rows.py). */
function opencodeTurn(db: string, text: string, answer: string, stamp: number): string[] {
  const venv = join(REPO, '.venv', 'bin', 'python');
  const python = existsSync(venv) ? venv : 'python3';
  const out = execFileSync(python, [join(REPO, 'tests', 'opencode', 'rows.py'), db, text, answer, String(stamp)], { encoding: 'utf8' });
  return out.trim().split(/\s+/);
}

describe('Codex and opencode sessions beside pi and Claude Code', { timeout: 120_000 }, () => {
  const { root: base, cleanup } = tempRoot('ctxd-vscode-agents-');
  const pi = join(base, 'pi');
  const claude = join(base, 'claude', 'projects');
  const codex = join(base, 'codex', 'sessions');
  const rollout = join(codex, '2026', '11', '25', 'rollout-2026-11-25T21-29-59-01a2149d-8f0f-74c1-8dfa-7129af1db7c5.jsonl');
  const transcript = join(claude, '-home-dev-service', '2696e685-97f7-47e2-9b90-766d279ab840.jsonl');
  const db = join(base, 'opencode', 'opencode.db');
  const lines = readFileSync(join(REPO, 'tests', 'data', 'codex', 'rollout-0.169-compactions.jsonl'), 'utf8').split(/(?<=\n)/);
  let client: CtxdClient;
  const store = new Store({ debounceMs: 20 });
  const sessions = new SessionsProvider(store);
  const conversation = new ConversationProvider(store);
  let opencodePath = '';

  before(async () => {
    mkdirSync(pi, { recursive: true });
    writeSampleSession(pi, { turns: 1, cwd: '/home/dev/calc' });
    mkdirSync(dirname(transcript), { recursive: true });
    copyFileSync(join(REPO, 'tests', 'data', 'claude', 'claude-2.1.330-compact.jsonl'), transcript);
    mkdirSync(dirname(rollout), { recursive: true });
    writeFileSync(rollout, lines.slice(0, 40).join('')); // Codex is still writing it: two compactions so far
    mkdirSync(dirname(db), { recursive: true });
    copyFileSync(join(REPO, 'tests', 'data', 'opencode', 'opencode.db'), db);
    opencodePath = `${realpathSync(db)}#${OPENCODE_SESSION}`;
    client = await startDaemon(pi, {
      initializationOptions: { transcriptRoots: [claude, codex], opencodeDatabases: [db], watch: true },
    });
    await store.attach(client);
  });

  after(async () => {
    conversation.dispose();
    sessions.dispose();
    store.dispose();
    await client?.stop();
    cleanup();
  });

  function shown(): Map<string, { folder: string; label: string; description: string; icon: string }> {
    const out = new Map<string, { folder: string; label: string; description: string; icon: string }>();
    for (const project of sessions.getChildren()) {
      for (const node of sessions.getChildren(project) as SessionsNode[]) {
        if (node.kind === 'session') {
          const item = sessions.getTreeItem(node);
          const icon = (item.iconPath as { id: string }).id;
          out.set(node.summary.path, {
            folder: String(sessions.getTreeItem(project).label),
            label: String(item.label),
            description: String(item.description),
            icon,
          });
        }
      }
    }
    return out;
  }

  test('each agent is listed in its project folder, named, marked with its agent and read-only', () => {
    const items = shown();
    assert.equal(items.size, 4, [...items.keys()].join('\n'));
    const codexItem = items.get(rollout);
    assert.ok(codexItem, 'the Codex rollout is listed');
    assert.equal(codexItem.folder, 'project'); // /tmp/cx/rec/project, from session_meta
    assert.equal(codexItem.label, 'Create notes.txt with a greeting. Constraint: never edit RE…'); // the first user text
    assert.match(codexItem.description, /^codex · read-only · /);
    assert.equal(codexItem.icon, 'lock');
    const opencodeItem = items.get(opencodePath);
    assert.ok(opencodeItem, `the opencode session is listed as ${opencodePath}`);
    assert.equal(opencodeItem.folder, 'work'); // /tmp/oc1/work
    assert.equal(opencodeItem.label, 'Hello with bash');
    assert.match(opencodeItem.description, /^opencode · read-only · /);
    assert.equal(opencodeItem.icon, 'lock');
    assert.match(items.get(transcript)!.description, /^claude · read-only · /); // the pattern they follow
    const piItem = [...items.entries()].find(([path]) => path.startsWith(realpathSync(pi)))?.[1];
    assert.ok(piItem && piItem.folder === 'calc' && !/read-only/.test(piItem.description) && piItem.icon === 'comment-discussion');
  });

  test('a Codex rollout opens with its conversation, which grows as Codex appends', async () => {
    const info = await store.open(rollout);
    assert.equal(info.path, rollout);
    const before = store.current!.tree!;
    assert.ok(before.rows.some((r) => 'type' in r && r.type === 'compaction'));
    appendFileSync(rollout, lines.slice(40).join('')); // the third compaction and the second turn
    await until(() => store.current?.tree?.leafId !== before.leafId, 10_000, 'the appended lines in the conversation');
    assert.ok(store.current!.tree!.entries > before.entries);
    const roots = await conversation.getChildren();
    assert.ok(roots.length > 0);
    await until(() => /● live · open/.test(shown().get(rollout)!.description), 10_000, 'a live marker on the rollout');
  });

  test('an opencode session opens by <db>#<id> with its conversation, which grows as opencode writes rows', async () => {
    const info = await store.open(opencodePath);
    assert.equal(info.path, opencodePath); // a session inside the database, not a file
    assert.match(shown().get(opencodePath)!.description, /open/);
    assert.equal(shown().get(opencodePath)!.label, 'Hello with bash'); // opencode's title, kept once opened
    assert.equal(store.current!.info.name, 'Hello with bash'); // the Conversation view's title
    const before = store.current!.tree!;
    assert.ok(before.rows.some((r) => 'type' in r && r.type === 'compaction'));
    const [, answerId] = opencodeTurn(db, 'one more thing', 'done, live', 1795642500000);
    await until(() => store.current?.tree?.leafId === answerId, 10_000, 'the new opencode turn in the conversation');
    assert.equal(store.current!.tree!.entries, before.entries + 2);
    // The Context document names the session in its URI's query: the '#' of <db>#<id> survives the round trip.
    const docs = new Documents(store, () => client);
    try {
      const uri = Documents.uri('context', opencodePath, 'Hello with bash');
      const text = await docs.render(Uri.parse(uri.toString()) as unknown as import('vscode').Uri);
      assert.match(text, /Hello with bash/);
      assert.match(text, /done, live/);
    } finally {
      docs.dispose();
    }
    await until(() => /● live · open/.test(shown().get(opencodePath)!.description), 10_000, 'a live marker on the opencode session');
  });
});
