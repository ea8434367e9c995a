/**
 * ctxd as pi's context engine. A pi extension that
 *
 * - starts `ctxd serve` when a session starts (pi's sessions folder as its root) and stops it when
 *   the session ends;
 * - writes pi's compactions' summaries with ctxd (`session_before_compact` -> compact/summarize):
 *   ctxd's summariser with its chunking, fallbacks and file lists, its ledger in `details.ctxd`;
 *   pi writes the entry. If ctxd fails, pi's own compaction runs and the reason is shown;
 * - writes the summary of a branch left in /tree (`session_before_tree` -> branch/summarize);
 * - cuts oversized tool results as they arrive (`tool_result` -> context/truncate, from the
 *   model's window), and optionally before every model call (`context`).
 *
 * Settings: see ./settings.ts. `/ctxd` shows the daemon's state and its recent log.
 */

import { getAgentDir, type ExtensionAPI, type ExtensionContext } from '@earendil-works/pi-coding-agent';
import { basename, dirname, join, resolve } from 'node:path';
import { CancellationTokenSource, type CtxdClient, type PiUsage } from './client';
import { Daemon } from './daemon';
import { chooseSummarizer, type PiModel, type PiModelRegistry } from './model';
import { registerRecall } from './recall';
import { loadSettings, type Settings } from './settings';

export const VERSION = '0.1.0';

/** Tool results shorter than this are never cut (ctxd's smallest limit), so they skip the daemon. */
const MIN_TRUNCATE_CHARS = 2_000;

type UI = ExtensionContext['ui'];

interface TextBlock {
  type: string;
  text?: string;
}

function textChars(content: unknown): number {
  if (typeof content === 'string') {
    return content.length;
  }
  if (!Array.isArray(content)) {
    return 0;
  }
  let chars = 0;
  for (const block of content as TextBlock[]) {
    if (block?.type === 'text' && typeof block.text === 'string') {
      chars += block.text.length;
    }
  }
  return chars;
}

/** pi's sessions folder: the parent of the per-folder directory pi writes into. */
export function sessionsRoot(sessionDir: string, agentDir: string): string {
  const sessions = resolve(join(agentDir, 'sessions'));
  const dir = resolve(sessionDir);
  if (dir === sessions || dirname(dir) === sessions) {
    return sessions;
  }
  const name = basename(dir);
  return name.startsWith('--') && name.endsWith('--') ? dirname(dir) : dir;
}

/** pi needs a complete Usage (cost included); ctxd leaves cost out when a model is unpriced. */
function piUsage(usage: PiUsage | null | undefined): any {
  if (!usage) {
    return undefined;
  }
  return { ...usage, cost: usage.cost ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The newest compaction entry on the branch (its details carry the file lists over). */
function previousCompaction(entries: readonly unknown[]): Record<string, unknown> | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i] as { type?: string } | undefined;
    if (entry?.type === 'compaction') {
      return entry as Record<string, unknown>;
    }
  }
  return undefined;
}

/** The entry id of each message ('' where pi made the message, e.g. from a summary): where ctxd's fact ledger
 * saw a fact. pi's preparation hands over the entries' own message objects. */
function entryIdsOf(messages: readonly unknown[], entries: readonly unknown[]): string[] {
  const ids = new Map<unknown, string>();
  for (const entry of entries as { type?: string; id?: string; message?: unknown }[]) {
    if (entry?.type === 'message' && entry.message && typeof entry.id === 'string') {
      ids.set(entry.message, entry.id);
    }
  }
  return messages.map((message) => ids.get(message) ?? '');
}

/** The newest fact ledger ctxd wrote on the branch (`details.ctxd.ledger`), or null. */
function newestLedger(entries: readonly unknown[]): Record<string, unknown> | null {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i] as { type?: string; details?: { ctxd?: { ledger?: unknown } } } | undefined;
    const ledger = entry?.type === 'compaction' ? entry.details?.ctxd?.ledger : undefined;
    if (ledger && typeof ledger === 'object') {
      return ledger as Record<string, unknown>;
    }
  }
  return null;
}

function cancellation(signal: AbortSignal | undefined): CancellationTokenSource {
  const source = new CancellationTokenSource();
  if (signal?.aborted) {
    source.cancel();
  } else {
    signal?.addEventListener('abort', () => source.cancel(), { once: true });
  }
  return source;
}

export default function ctxd(pi: ExtensionAPI): void {
  let settings: Settings | undefined;
  let daemon: Daemon | undefined;
  let ui: UI | undefined;
  let lastSummarizer = 'not used yet';

  const warn = (message: string) => {
    daemon?.log(`[ctxd-pi] ${message}`);
    ui?.notify(`ctxd: ${message}`, 'warning');
  };

  /** The daemon's client when a feature is on and the daemon runs; undefined otherwise. */
  const client = async (ctx: ExtensionContext, enabled: (s: Settings) => boolean): Promise<CtxdClient | undefined> => {
    ui = ctx.ui;
    if (!settings || !daemon || !enabled(settings)) {
      return undefined;
    }
    return daemon.ready();
  };

  const summarizer = async (ctx: ExtensionContext, reserveTokens?: number) => {
    const chosen = await chooseSummarizer(
      settings!,
      ctx.model as PiModel | undefined,
      ctx.modelRegistry as unknown as PiModelRegistry,
      reserveTokens,
    );
    lastSummarizer = chosen.label;
    daemon?.log(`[ctxd-pi] summariser: ${chosen.label}`);
    return chosen;
  };

  pi.on('session_start', async (_event, ctx) => {
    ui = ctx.ui;
    const agentDir = getAgentDir();
    settings = loadSettings(agentDir);
    const root = sessionsRoot(ctx.sessionManager.getSessionDir(), agentDir);
    daemon = new Daemon(settings, root, ctx.cwd, VERSION, warn);
    for (const problem of settings.problems) {
      warn(`settings: ${problem}`);
    }
    daemon.start();
  });

  pi.on('session_shutdown', async () => {
    const stopping = daemon;
    daemon = undefined;
    await stopping?.stop();
  });

  pi.on('session_before_compact', async (event, ctx) => {
    const ctxd = await client(ctx, (s) => s.compaction);
    if (!ctxd) {
      if (settings?.compaction && daemon?.problem) {
        warn(`pi compacts on its own: ${daemon.problem}`);
      }
      return undefined;
    }
    const prep = event.preparation;
    const previous = previousCompaction(event.branchEntries);
    const chosen = await summarizer(ctx, prep.settings?.reserveTokens);
    const source = cancellation(event.signal);
    try {
      const result = await ctxd.summarizeCompaction(
        {
          messages: prep.messagesToSummarize,
          turnPrefix: prep.turnPrefixMessages,
          previousSummary: prep.previousSummary ?? null,
          previousDetails: (previous?.details as Record<string, unknown> | undefined) ?? null,
          fileOps: {
            read: [...prep.fileOps.read],
            written: [...prep.fileOps.written],
            edited: [...prep.fileOps.edited],
          },
          instructions: event.customInstructions ?? null,
          reason: event.reason,
          firstKeptEntryId: prep.firstKeptEntryId,
          tokensBefore: prep.tokensBefore,
          settings: chosen.settings,
          modelWindow: chosen.modelWindow ?? null,
          entryIds: entryIdsOf(prep.messagesToSummarize, event.branchEntries),
          turnPrefixEntryIds: entryIdsOf(prep.turnPrefixMessages, event.branchEntries),
          previousLedger: newestLedger(event.branchEntries),
        },
        source.token,
      );
      daemon?.log(
        `[ctxd-pi] compaction (${event.reason}): ${result.path}, ${prep.tokensBefore} -> ~${result.tokensAfter} tokens` +
          (result.failures.length ? `; failures: ${result.failures.join('; ')}` : ''),
      );
      if (result.failures.length) {
        warn(`the summary came from ${result.path}: ${result.failures.join('; ')}`);
      }
      return {
        compaction: {
          summary: result.summary,
          firstKeptEntryId: prep.firstKeptEntryId,
          tokensBefore: prep.tokensBefore,
          details: result.details,
          usage: piUsage(result.usage),
        },
      };
    } catch (error) {
      if (event.signal.aborted) {
        return undefined; // pi stops the compaction itself
      }
      warn(`could not summarise this compaction (${describe(error)}); pi's own compaction runs instead`);
      return undefined;
    } finally {
      source.dispose();
    }
  });

  pi.on('session_before_tree', async (event, ctx) => {
    const prep = event.preparation;
    if (!prep.userWantsSummary || prep.entriesToSummarize.length === 0) {
      return undefined;
    }
    const ctxd = await client(ctx, (s) => s.branchSummary);
    if (!ctxd) {
      return undefined;
    }
    const chosen = await summarizer(ctx);
    const source = cancellation(event.signal);
    try {
      const result = await ctxd.summarizeBranch(
        {
          entries: prep.entriesToSummarize,
          instructions: prep.customInstructions ?? null,
          settings: chosen.settings,
          modelWindow: chosen.modelWindow ?? null,
        },
        source.token,
      );
      daemon?.log(`[ctxd-pi] branch summary: ${result.path}, ${result.summarizedMessages} messages`);
      return { summary: { summary: result.summary, details: result.details, usage: piUsage(result.usage) } };
    } catch (error) {
      if (!event.signal.aborted) {
        warn(`could not summarise the branch (${describe(error)}); pi's own summary is used`);
      }
      return undefined;
    } finally {
      source.dispose();
    }
  });

  pi.on('tool_result', async (event, ctx) => {
    const window = ctx.model?.contextWindow;
    if (!window || textChars(event.content) <= MIN_TRUNCATE_CHARS) {
      return undefined;
    }
    const ctxd = await client(ctx, (s) => s.truncateToolResults);
    if (!ctxd) {
      return undefined;
    }
    try {
      const message = {
        role: 'toolResult',
        toolCallId: event.toolCallId,
        toolName: event.toolName,
        content: event.content,
        details: event.details,
        isError: event.isError,
      };
      const result = await ctxd.truncate({ messages: [message], contextWindow: window });
      if (!result.truncated.length) {
        return undefined;
      }
      const cut = result.messages[0] as { content: typeof event.content; details?: unknown };
      daemon?.log(`[ctxd-pi] ${event.toolName} result cut to ${result.limitChars} characters`);
      return { content: cut.content, details: cut.details };
    } catch (error) {
      daemon?.log(`[ctxd-pi] could not truncate a ${event.toolName} result: ${describe(error)}`);
      return undefined;
    }
  });

  pi.on('context', async (event, ctx) => {
    const window = ctx.model?.contextWindow;
    if (!window || !settings?.truncateContext) {
      return undefined;
    }
    const candidates: number[] = [];
    event.messages.forEach((message, i) => {
      const m = message as { role?: string; content?: unknown };
      if (m.role === 'toolResult' && textChars(m.content) > MIN_TRUNCATE_CHARS) {
        candidates.push(i);
      }
    });
    if (!candidates.length) {
      return undefined;
    }
    const ctxd = await client(ctx, (s) => s.truncateContext);
    if (!ctxd) {
      return undefined;
    }
    try {
      const result = await ctxd.truncate({
        messages: candidates.map((i) => event.messages[i]),
        contextWindow: window,
      });
      if (!result.truncated.length) {
        return undefined;
      }
      const messages = [...event.messages];
      for (const k of result.truncated) {
        messages[candidates[k]!] = result.messages[k] as (typeof messages)[number];
      }
      return { messages };
    } catch (error) {
      daemon?.log(`[ctxd-pi] could not truncate the context: ${describe(error)}`);
      return undefined;
    }
  });

  // search_history, expand and session_facts: the tools `ctxd mcp` serves, here through the daemon.
  registerRecall(pi, (ctx) => client(ctx, () => true));

  pi.registerCommand('ctxd', {
    description: "ctxd: the daemon's state, the summariser, and its recent log",
    handler: async (_args, ctx) => {
      const lines = [
        `ctxd-pi ${VERSION}: ${daemon?.pid ? `ctxd running (pid ${daemon.pid})` : `ctxd not running${daemon?.problem ? `: ${daemon.problem}` : ''}`}`,
        `command: ${settings?.command.join(' ') ?? '?'}`,
        `summariser: ${settings?.model ?? 'auto'} (last: ${lastSummarizer})`,
        `compaction ${settings?.compaction ? 'on' : 'off'}, branch summaries ${settings?.branchSummary ? 'on' : 'off'}, ` +
          `tool results ${settings?.truncateToolResults ? 'cut' : 'kept'}, context ${settings?.truncateContext ? 'cut' : 'kept'}`,
        ...(daemon?.lines.slice(-10) ?? []),
      ];
      ctx.ui.notify(lines.join('\n'), 'info');
    },
  });
}
