/**
 * Session files written the way an agent (pi) writes them: one JSON line per entry, appended.
 * Shared by the unit tests and the end-to-end test; no ctxd code involved.
 */

import { randomBytes, randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function newId(): string {
  return randomBytes(4).toString('hex');
}

function cwdDir(cwd: string): string {
  return `--${cwd.replace(/^[/\\]/, '').replace(/[/\\:]/g, '-')}--`;
}

export interface Turn {
  user: string;
  tool?: { name: string; args: Record<string, unknown>; result: string };
  answer: string;
}

export class SessionWriter {
  readonly path: string;
  readonly id: string;
  leafId: string | null = null;
  /** Every entry written, by id. */
  readonly ids: string[] = [];
  private clock: number;

  constructor(root: string, cwd: string, start = Date.now() - 60_000) {
    this.id = randomUUID();
    this.clock = start;
    const iso = new Date(start).toISOString();
    const dir = join(root, cwdDir(cwd));
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, `${iso.replace(/[:.]/g, '-')}_${this.id}.jsonl`);
    writeFileSync(this.path, `${JSON.stringify({ type: 'session', version: 3, id: this.id, timestamp: iso, cwd })}\n`, { mode: 0o600 });
  }

  /** Reopen an existing file (its last line's id is the leaf). */
  static reopen(path: string): SessionWriter {
    const w = Object.create(SessionWriter.prototype) as SessionWriter;
    const lines = readFileSync(path, 'utf8').trim().split('\n');
    const header = JSON.parse(lines[0]!) as { id: string };
    Object.assign(w, { path, id: header.id, ids: [], clock: Date.now() });
    for (const line of lines.slice(1)) {
      const e = JSON.parse(line) as { id: string };
      w.ids.push(e.id);
      w.leafId = e.id;
    }
    return w;
  }

  /** Append one entry under `parentId` (default: the leaf) and make it the leaf. */
  append(entry: Record<string, unknown>, parentId: string | null = this.leafId): string {
    const id = newId();
    this.clock += 1000;
    const line = { ...entry, id, parentId, timestamp: new Date(this.clock).toISOString() };
    appendFileSync(this.path, `${JSON.stringify(line)}\n`);
    this.ids.push(id);
    this.leafId = id;
    return id;
  }

  message(message: Record<string, unknown>, parentId: string | null = this.leafId): string {
    return this.append({ type: 'message', message: { timestamp: this.clock, ...message } }, parentId);
  }

  user(text: string, parentId: string | null = this.leafId): string {
    return this.message({ role: 'user', content: text }, parentId);
  }

  assistant(text: string, totalTokens: number, calls: { id: string; name: string; args: Record<string, unknown> }[] = []): string {
    const content: Record<string, unknown>[] = [];
    if (text) {
      content.push({ type: 'text', text });
    }
    for (const c of calls) {
      content.push({ type: 'toolCall', id: c.id, name: c.name, arguments: c.args });
    }
    return this.message({
      role: 'assistant',
      content,
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      usage: { input: totalTokens - 200, output: 200, cacheRead: 0, cacheWrite: 0, totalTokens },
      stopReason: calls.length ? 'toolUse' : 'stop',
    });
  }

  toolResult(callId: string, name: string, text: string): string {
    return this.message({ role: 'toolResult', toolCallId: callId, toolName: name, content: [{ type: 'text', text }], isError: false });
  }

  turn(t: Turn, totalTokens: number): void {
    this.user(t.user);
    if (t.tool) {
      const callId = `call_${newId()}`;
      this.assistant('Let me look.', totalTokens, [{ id: callId, name: t.tool.name, args: t.tool.args }]);
      this.toolResult(callId, t.tool.name, t.tool.result);
    }
    this.assistant(t.answer, totalTokens + 300);
  }
}

/** Source text of about `tokens` tokens (4 characters each). */
export function fileBody(n: number, tokens: number): string {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < tokens * 4; i++) {
    const line = `export function step${n}_${i}(x: number): number { return x * ${i} + ${n}; }`;
    lines.push(line);
    size += line.length + 1;
  }
  return lines.join('\n');
}

/**
 * A session about fixing a calculator: a model change, a name, `turns` tool-loop turns with
 * `toolTokens`-sized tool results, and a label. Big enough to compact with ctxd's defaults when
 * turns * toolTokens > 20k.
 */
export function writeSampleSession(
  root: string,
  opts: { cwd?: string; name?: string; turns?: number; toolTokens?: number; start?: number } = {},
): SessionWriter {
  const w = new SessionWriter(root, opts.cwd ?? '/home/dev/calc', opts.start);
  w.append({ type: 'model_change', provider: 'anthropic', modelId: 'claude-sonnet-4-5' }, null);
  w.append({ type: 'session_info', name: opts.name ?? "Fix the calculator's rounding" });
  const turns = opts.turns ?? 6;
  const toolTokens = opts.toolTokens ?? 1000;
  let total = 2400;
  for (let n = 0; n < turns; n++) {
    total += toolTokens + 400;
    w.turn(
      {
        user: `Step ${n + 1}: the calculator rounds 2.675 to 2.67; fix rounding in src/file${n}.ts without changing the public API.`,
        tool: { name: 'read', args: { path: `src/file${n}.ts` }, result: fileBody(n, toolTokens) },
        answer: `Done: step ${n + 1} is fixed and the tests pass.`,
      },
      total,
    );
  }
  return w;
}
