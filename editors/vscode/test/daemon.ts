/** Starting a real `ctxd serve` for the tests. */

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CtxdClient, splitCommand, type ClientOptions } from '@ctxd/client';

/** The repository's root (tests are bundled into editors/vscode/out/test). */
export const REPO = process.env.CTXD_REPO ?? resolve(__dirname, '../../../..');

/** $CTXD_SERVER_COMMAND, else the repo's .venv/bin/ctxd serve, else python3 -m ctxd serve. */
export function serverCommand(): string[] {
  const fromEnv = process.env.CTXD_SERVER_COMMAND?.trim();
  if (fromEnv) {
    return splitCommand(fromEnv);
  }
  const venv = join(REPO, '.venv', 'bin', 'ctxd');
  return existsSync(venv) ? [venv, 'serve'] : ['python3', '-m', 'ctxd', 'serve'];
}

/** Our environment without CTXD_* settings, ctxd importable, no config file, no network for litellm. */
export function serverEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('CTXD_')) {
      env[k] = v;
    }
  }
  env.PYTHONPATH = [REPO, process.env.PYTHONPATH].filter(Boolean).join(':');
  env.CTXD_CONFIG = join(REPO, 'no-such-ctxd-config.json');
  env.LITELLM_LOCAL_MODEL_COST_MAP = 'True';
  return { ...env, ...extra };
}

export function tempRoot(prefix = 'ctxd-vscode-test-'): { root: string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  return { root, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

export async function startDaemon(root: string, options: Partial<ClientOptions> = {}, log?: string[]): Promise<CtxdClient> {
  const { initializationOptions, ...rest } = options;
  const client = new CtxdClient({
    command: serverCommand(),
    cwd: REPO,
    env: serverEnv(),
    log: (line) => log?.push(line),
    startTimeoutMs: 60_000,
    ...rest,
    initializationOptions: { roots: [root], transcriptRoots: [], autoCompact: false, ...initializationOptions },
  });
  await client.start();
  return client;
}

/** Resolve with the first event that passes `predicate`, or reject after `ms`. */
export function next<T>(
  event: (listener: (e: T) => unknown) => { dispose(): void },
  predicate: (e: T) => boolean = () => true,
  ms = 10_000,
  what = 'an event',
): Promise<T> {
  return new Promise<T>((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      sub.dispose();
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    const sub = event((e) => {
      if (predicate(e)) {
        clearTimeout(timer);
        sub.dispose();
        resolvePromise(e);
      }
    });
  });
}

export async function until(check: () => boolean, ms = 10_000, what = 'a condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
