/**
 * ctxd inside opencode (1.18): an opencode plugin.
 *
 * - `experimental.session.compacting`: ctxd reads the session from opencode's database (read-only,
 *   `<database>#<session id>`) and adds to opencode's compaction prompt what the compaction must keep
 *   (`compact/facts`): the session's fact ledger, carried across every earlier compaction (ctxd keeps it in its
 *   state folder and rebuilds it from the database when it is missing), and the facts of what is about to be
 *   summarised, after the summary's shape (`compact/prompt`: state first, then task by task, as ctxd's own
 *   summaries).
 * - After the summary is written (`experimental.compaction.autocontinue`, `session.compacted`), and the first
 *   time this process serves a session (a resumed one: `opencode run --session`): the facts the newest summary
 *   lacks, which `experimental.chat.system.transform` re-injects into every request until the next compaction.
 * - `chat.params`: the model's window (its `limit.context` in opencode's provider config), per session.
 * - `tool.execute.after`: a tool output over the limit is cut by ctxd's rules (`context/truncate`: a share of the
 *   model's window, 30,000 characters when it is unknown); the model and opencode's database get the short
 *   version.
 * - `event`: after a compaction (`session.compacted`) and whenever the session goes idle
 *   (`session.idle`), ctxd copies the session's rows into its archive (`session/archive`), so a session
 *   later deleted in opencode stays readable in ctxd. (`session.deleted` comes after the rows are gone:
 *   the copy from the last idle is what is kept.)
 *
 * Settings (environment): CTXD_OPENCODE_COMMAND (default `ctxd serve`), CTXD_OPENCODE_TOOL_OUTPUT_CHARS (a fixed
 * limit instead of the window's share; 0 = never cut), CTXD_OPENCODE_DATABASE (default opencode's own database).
 * The window's share is ctxd's `toolOutputShare` (its config file, or CTXD_TOOL_OUTPUT_SHARE).
 */

import { homedir } from 'node:os';
import { join } from 'node:path';

import type { Hooks, Plugin } from '@opencode-ai/plugin';

import { CtxdClient, splitCommand } from './client';

interface Settings {
  command: string[];
  database: string;
  /** A fixed limit (characters; 0 = never cut), or undefined: the share of the model's window. */
  toolOutputChars: number | undefined;
}

/** Outputs up to this long are never cut (the least a window-relative limit keeps). Not exported: opencode
 * loads every export of a plugin module as a plugin function. */
const MIN_CUT_CHARS = 2000;

export function readSettings(env: NodeJS.ProcessEnv): Settings {
  const data = env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  const limit = env.CTXD_OPENCODE_TOOL_OUTPUT_CHARS ? Number(env.CTXD_OPENCODE_TOOL_OUTPUT_CHARS) : NaN;
  return {
    command: splitCommand(env.CTXD_OPENCODE_COMMAND || 'ctxd serve'),
    database: env.CTXD_OPENCODE_DATABASE || join(data, 'opencode', 'opencode.db'),
    toolOutputChars: Number.isInteger(limit) && limit >= 0 ? limit : undefined,
  };
}

function log(line: string): void {
  process.stderr.write(`[ctxd] ${line}\n`);
}

/** Per session: a compaction is under way (nothing is re-injected into its request), or the text to re-inject
 * ('' when the newest summary lacks nothing). */
type Reinjection = { compacting: true } | { text: string };

export const CtxdPlugin: Plugin = async () => {
  const settings = readSettings(process.env);
  let started: Promise<CtxdClient> | undefined;
  const reinjection = new Map<string, Reinjection>();
  const windows = new Map<string, number>();
  /** How to read what a summary left out (ctxd's one sentence), added to the facts re-injected after it. */
  let recall = '';
  const ref = (sessionID: string) => `${settings.database}#${sessionID}`;

  function ctxd(): Promise<CtxdClient> {
    if (!started) {
      const client = new CtxdClient({
        command: settings.command,
        env: process.env,
        clientName: 'ctxd-opencode',
        log,
        commandHint: 'install ctxd, or set CTXD_OPENCODE_COMMAND',
        // Reads opencode's database only; it never writes it, nor compacts on its own.
        // No watching: an opencode session is caught up with the database on every request anyway.
        initializationOptions: {
          transcriptRoots: [],
          opencodeDatabases: [settings.database],
          autoCompact: false,
          watch: false,
        },
      });
      started = client.start().then(() => client);
      started.catch((error) => {
        log(`cannot start ctxd: ${String(error)}`);
        started = undefined;
      });
    }
    return started;
  }

  /** What the newest compaction's summary lacks, asked of ctxd and kept for the requests until the next one
   * (one question at a time per session: opencode's title and main requests start together). */
  const asking = new Map<string, { answer: Promise<Reinjection> }>();
  function refresh(sessionID: string): Promise<Reinjection> {
    const pending = asking.get(sessionID);
    if (pending) return pending.answer;
    const question = { answer: Promise.resolve<Reinjection>({ text: '' }) };
    question.answer = (async () => {
      let found: Reinjection = { text: '' };
      try {
        const missing = (await (await ctxd()).compactFacts(ref(sessionID))).missingText;
        found = { text: missing && recall ? `${missing}\n\n${recall}` : missing };
      } catch (error) {
        log(`no facts to re-inject for ${sessionID}: ${String(error)}`);
      }
      if (asking.get(sessionID) === question) {
        // Not when a compaction began meanwhile: the answer was about the summary before it.
        reinjection.set(sessionID, found);
        asking.delete(sessionID);
      }
      return found;
    })();
    asking.set(sessionID, question);
    return question.answer;
  }

  // Started now, while opencode starts: a session's first request waits for what to re-inject (a session
  // resumed after a compaction), and would otherwise wait for ctxd to start as well.
  ctxd().catch(() => undefined);

  const hooks: Hooks = {
    'chat.params': async (input) => {
      const window = input.model?.limit?.context;
      if (input.agent !== 'title' && typeof window === 'number' && window > 0) windows.set(input.sessionID, window);
    },
    'experimental.session.compacting': async (input, output) => {
      reinjection.set(input.sessionID, { compacting: true });
      asking.delete(input.sessionID);
      try {
        // The summary's shape, the one ctxd's own summaries have (opencode's prompt and previous summary stay).
        try {
          const asked = await (await ctxd()).compactPrompt();
          recall = asked.recall;
          output.context.push(asked.shape);
        } catch (error) {
          log(`no summary shape for ${input.sessionID}: ${String(error)}`);
        }
        // opencode summarises the whole conversation since its last summary: nothing is kept verbatim.
        const facts = await (await ctxd()).compactFacts(ref(input.sessionID));
        if (facts.mustKeepText) {
          output.context.push(
            `${facts.mustKeepText}\n\nThe summary must keep every fact above (file paths, commands and values word for word).`,
          );
        }
      } catch (error) {
        log(`no must-keep facts for ${input.sessionID}: ${String(error)}`);
      }
    },
    'experimental.compaction.autocontinue': async (input) => {
      await refresh(input.sessionID);
    },
    'experimental.chat.system.transform': async (input, output) => {
      if (!input.sessionID) return;
      const known = reinjection.get(input.sessionID) ?? (await refresh(input.sessionID));
      if ('text' in known && known.text) output.system.push(known.text);
    },
    'tool.execute.after': async (input, output) => {
      const limit = settings.toolOutputChars;
      const text = output.output;
      if (limit === 0 || typeof text !== 'string' || text.length <= (limit ?? MIN_CUT_CHARS)) return;
      try {
        const message = {
          role: 'toolResult',
          toolCallId: input.callID,
          toolName: input.tool,
          content: [{ type: 'text', text }],
          isError: false,
          timestamp: Date.now(),
        };
        const window = windows.get(input.sessionID);
        const cut = await (await ctxd()).truncate({
          messages: [message],
          ...(window ? { contextWindow: window } : {}),
          ...(limit ? { limitChars: limit } : {}),
        });
        if (cut.truncated.length === 0) return;
        const content = (cut.messages[0] as { content?: { type: string; text?: string }[] }).content ?? [];
        const shortened = content.map((block) => block.text ?? '').join('');
        if (shortened) output.output = shortened;
      } catch (error) {
        log(`could not cut a ${input.tool} output: ${String(error)}`);
      }
    },
    event: async ({ event }) => {
      if (event.type !== 'session.compacted' && event.type !== 'session.idle') return;
      const sessionID = event.properties.sessionID;
      if (event.type === 'session.compacted') await refresh(sessionID);
      try {
        await (await ctxd()).archiveSession(ref(sessionID));
      } catch (error) {
        log(`cannot archive ${sessionID}: ${String(error)}`);
      }
    },
    dispose: async () => {
      const client = started;
      started = undefined;
      if (client) await (await client).stop();
    },
  };
  return hooks;
};

export default CtxdPlugin;
