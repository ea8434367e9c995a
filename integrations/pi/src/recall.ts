/**
 * Recall inside pi: the tools `search_history`, `expand` and `session_facts` (the same three `ctxd mcp`
 * serves), registered with pi: each calls the daemon (history/search, history/expand, session/facts) through
 * the shared client. The current session is pi's session file; the model may name another one or "all".
 */

import type { ExtensionAPI, ExtensionContext } from '@earendil-works/pi-coding-agent';
import { Type } from 'typebox';
import type { CtxdClient } from './client';

/** How long a search waits for the daemon's indexing in progress (a model can afford it; a request cannot). */
const SEARCH_WAIT_MS = 5_000;

const SEARCH_HELP =
  'Search the full history of this session (or all sessions), including what earlier compactions summarised ' +
  'away. Use when the conversation summary lacks a detail from earlier: an exact figure, an error text, a ' +
  'command or its output, a path, a decision. Returns ranked hits, each with the anchor to give expand (an ' +
  'entry id, or L<line> for a file without ids).';
const EXPAND_HELP =
  'Read the original messages behind a summary or around a search hit. Use after search_history, or when a ' +
  'summary names entries: entry_id of a compaction gives the messages it summarised; of any other entry, that ' +
  'entry in full; or from_entry_id/to_entry_id for a range. Each names an entry by its id, by the first 8 or ' +
  'more characters of it (as summaries write them), or as L<line> (its line in the session file). Long answers ' +
  'come in pages: pass cursor from the previous answer.';
const FACTS_HELP =
  "The must-keep facts of this session (goal, latest request, the user's constraints and corrections, errors, " +
  'files, commands with their outcome). Use after a compaction, or before finishing a task, to check that ' +
  'nothing the user asked for was lost.';

type Ready = (ctx: ExtensionContext) => Promise<CtxdClient | undefined>;

function text(value: unknown) {
  return { content: [{ type: 'text' as const, text: JSON.stringify(value) }], details: value };
}

function current(ctx: ExtensionContext, given: string | undefined): string | null {
  if (given && given.trim().toLowerCase() === 'all') {
    return null;
  }
  return given || ctx.sessionManager.getSessionFile() || ctx.sessionManager.getSessionId();
}

async function daemon(ready: Ready, ctx: ExtensionContext): Promise<CtxdClient> {
  const client = await ready(ctx);
  if (!client) {
    throw new Error('ctxd is not running (see /ctxd)');
  }
  return client;
}

export function registerRecall(pi: ExtensionAPI, ready: Ready): void {
  pi.registerTool({
    name: 'search_history',
    label: 'ctxd: search history',
    description: SEARCH_HELP,
    promptSnippet: 'search_history: find details that compaction summaries left out',
    parameters: Type.Object({
      query: Type.String({ description: 'words or a quoted phrase (SQLite FTS5: OR, NOT, prefix*)' }),
      session: Type.Optional(Type.String({ description: "a session id or file; default this session; 'all'" })),
      limit: Type.Optional(Type.Number({ description: 'at most this many hits (default 10)' })),
    }),
    async execute(_id, params, _signal, _onUpdate, ctx) {
      const client = await daemon(ready, ctx);
      const result = await client.searchHistory({
        query: params.query,
        session: current(ctx, params.session),
        limit: Math.max(1, Math.min(params.limit ?? 10, 50)),
        waitMs: SEARCH_WAIT_MS,
      });
      return text(result);
    },
  });

  pi.registerTool({
    name: 'expand',
    label: 'ctxd: expand',
    description: EXPAND_HELP,
    parameters: Type.Object({
      entry_id: Type.Optional(
        Type.String({ description: 'a compaction, branch summary or any entry: its id, 8+ characters of it, or L<line>' }),
      ),
      session: Type.Optional(Type.String({ description: 'a session id or file; default this session' })),
      from_entry_id: Type.Optional(Type.String()),
      to_entry_id: Type.Optional(Type.String()),
      cursor: Type.Optional(Type.String({ description: 'nextCursor of the previous answer' })),
      max_chars: Type.Optional(Type.Number({ description: 'text per page (default 20000)' })),
    }),
    async execute(_id, params, _signal, _onUpdate, ctx) {
      const client = await daemon(ready, ctx);
      const session = current(ctx, params.session);
      if (!session) {
        throw new Error('expand reads one session: name it (a session id or file)');
      }
      const result = await client.expandHistory({
        session,
        entryId: params.entry_id ?? null,
        fromEntryId: params.from_entry_id ?? null,
        toEntryId: params.to_entry_id ?? null,
        cursor: params.cursor ?? null,
        maxChars: params.max_chars ?? 20_000,
      });
      return text(result);
    },
  });

  pi.registerTool({
    name: 'session_facts',
    label: 'ctxd: session facts',
    description: FACTS_HELP,
    parameters: Type.Object({
      session: Type.Optional(Type.String({ description: 'a session file; default this session' })),
    }),
    async execute(_id, params, _signal, _onUpdate, ctx) {
      const session = current(ctx, params.session);
      if (!session) {
        throw new Error('session_facts reads one session: name it');
      }
      const result = await (await daemon(ready, ctx)).sessionFacts(session);
      return { content: [{ type: 'text' as const, text: result.text || 'no must-keep facts found' }], details: result };
    },
  });
}
