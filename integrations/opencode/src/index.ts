/**
 * ctxd inside opencode (1.18): an opencode plugin.
 *
 * - `experimental.session.compacting`: ctxd reads the session from opencode's database (read-only,
 *   `<database>#<session id>`), works out the must-keep facts of what is about to be summarised
 *   (`compact` with `dryRun`) and adds them to opencode's compaction prompt, after the summary's shape
 *   (`compact/prompt`: state first, then task by task, as ctxd's own summaries).
 * - `experimental.compaction.autocontinue` (after the summary is written): the facts the summary still
 *   lacks are kept, and `experimental.chat.system.transform` re-injects them into every request until
 *   the next compaction.
 * - `tool.execute.after`: a tool output over the limit is cut to its head and tail (the model and
 *   opencode's database get the short version).
 * - `event`: after a compaction (`session.compacted`) and whenever the session goes idle
 *   (`session.idle`), ctxd copies the session's rows into its archive (`session/archive`), so a session
 *   later deleted in opencode stays readable in ctxd. (`session.deleted` comes after the rows are gone:
 *   the copy from the last idle is what is kept.)
 *
 * Settings (environment): CTXD_OPENCODE_COMMAND (default `ctxd serve`), CTXD_OPENCODE_TOOL_OUTPUT_CHARS
 * (default 30000; 0 = never cut), CTXD_OPENCODE_DATABASE (default opencode's own database).
 */

import { homedir } from 'node:os';
import { join } from 'node:path';

import type { Hooks, Plugin } from '@opencode-ai/plugin';

import { CtxdClient, splitCommand } from './client';
import { cutOutput, type Fact, missingFacts, renderMissing } from './facts';

interface Settings {
  command: string[];
  database: string;
  toolOutputChars: number;
}

export function readSettings(env: NodeJS.ProcessEnv): Settings {
  const data = env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  const limit = Number(env.CTXD_OPENCODE_TOOL_OUTPUT_CHARS ?? '30000');
  return {
    command: splitCommand(env.CTXD_OPENCODE_COMMAND || 'ctxd serve'),
    database: env.CTXD_OPENCODE_DATABASE || join(data, 'opencode', 'opencode.db'),
    toolOutputChars: Number.isFinite(limit) && limit >= 0 ? limit : 30000,
  };
}

function log(line: string): void {
  process.stderr.write(`[ctxd] ${line}\n`);
}

export const CtxdPlugin: Plugin = async () => {
  const settings = readSettings(process.env);
  let started: Promise<CtxdClient> | undefined;
  const factsAtCompaction = new Map<string, Fact[]>();
  const reinject = new Map<string, string>();
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

  const hooks: Hooks = {
    'experimental.session.compacting': async (input, output) => {
      reinject.delete(input.sessionID);
      try {
        // opencode summarises the whole conversation: nothing is kept verbatim.
        const plan = await (await ctxd()).previewCompaction(ref(input.sessionID), { keepRecentTokens: 0 });
        const facts = (plan.mustKeep ?? []) as Fact[];
        factsAtCompaction.set(input.sessionID, facts);
        // The summary's shape, the one ctxd's own summaries have (opencode's prompt and previous summary stay).
        const asked = await (await ctxd()).compactPrompt();
        recall = asked.recall;
        output.context.push(asked.shape);
        if (plan.mustKeepText) {
          output.context.push(
            `${plan.mustKeepText}\n\nThe summary must keep every fact above (file paths, commands and values word for word).`,
          );
        }
      } catch (error) {
        log(`no must-keep facts for ${input.sessionID}: ${String(error)}`);
      }
    },
    'experimental.compaction.autocontinue': async (input) => {
      const facts = factsAtCompaction.get(input.sessionID);
      factsAtCompaction.delete(input.sessionID);
      if (!facts || facts.length === 0) return;
      try {
        const built = await (await ctxd()).buildContext({ session: ref(input.sessionID) });
        const summaries = built.messages.filter((m) => m.role === 'compactionSummary');
        const newest = summaries[summaries.length - 1]?.message as { summary?: string } | undefined;
        const missing = missingFacts(facts, newest?.summary ?? '');
        if (missing.length > 0) reinject.set(input.sessionID, `${renderMissing(missing)}${recall ? `\n\n${recall}` : ''}`);
      } catch (error) {
        log(`cannot check the summary of ${input.sessionID}: ${String(error)}`);
      }
    },
    'experimental.chat.system.transform': async (input, output) => {
      const text = input.sessionID ? reinject.get(input.sessionID) : undefined;
      if (text) output.system.push(text);
    },
    'tool.execute.after': async (_input, output) => {
      if (settings.toolOutputChars > 0 && typeof output.output === 'string') {
        output.output = cutOutput(output.output, settings.toolOutputChars);
      }
    },
    event: async ({ event }) => {
      if (event.type !== 'session.compacted' && event.type !== 'session.idle') return;
      const sessionID = event.properties.sessionID;
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
