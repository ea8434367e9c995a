/** The status bar item as pure data: `ctxd 112k/200k (56%)`, a spinner while compacting, colours. */

import type { CompactionStatus, ContextUsage } from '@ctxd/client';
import { formatInt, formatTokens } from './format';

/** Warn from this share of the compaction threshold. */
export const WARN_SHARE = 0.9;

export type ServerState = 'stopped' | 'starting' | 'running' | 'failed';

export interface StatusInput {
  server: ServerState;
  serverError?: string;
  sessionName?: string;
  usage?: ContextUsage;
  compaction?: CompactionStatus;
}

export interface StatusPresentation {
  text: string;
  tooltip: string;
  /** 'warning' | 'error' background, or none. */
  background?: 'warning' | 'error';
}

export function usageText(usage: ContextUsage): string {
  return `${formatTokens(usage.tokens)}/${formatTokens(usage.window)} (${Math.round(usage.percent)}%)`;
}

export function level(usage: ContextUsage): 'ok' | 'warning' | 'error' {
  if (usage.tokens >= usage.window) {
    return 'error';
  }
  if (usage.threshold > 0 && usage.tokens >= usage.threshold * WARN_SHARE) {
    return 'warning';
  }
  return 'ok';
}

export function presentStatus(input: StatusInput): StatusPresentation {
  if (input.server === 'starting') {
    return { text: '$(loading~spin) ctxd', tooltip: 'ctxd: starting the server…' };
  }
  if (input.server === 'failed' || input.server === 'stopped') {
    return {
      text: '$(error) ctxd',
      tooltip: `ctxd: the server is not running${input.serverError ? ` — ${input.serverError}` : ''}. Click for actions.`,
      background: input.server === 'failed' ? 'error' : undefined,
    };
  }
  const usage = input.usage;
  if (input.compaction?.state === 'running') {
    const before = input.compaction.tokensBefore ?? usage?.tokens;
    return {
      text: `$(sync~spin) ctxd compacting… ${before !== undefined && before !== null ? formatTokens(before) : ''}`.trimEnd(),
      tooltip: `ctxd: compacting ${input.sessionName ?? 'the session'} (${input.compaction.trigger})`,
    };
  }
  if (!usage) {
    return { text: '$(hubot) ctxd', tooltip: 'ctxd: no session open. Click for actions.' };
  }
  const lvl = level(usage);
  const lines = [
    `ctxd: ${input.sessionName ?? usage.session}`,
    `context ${formatInt(usage.tokens)} of ${formatInt(usage.window)} tokens (${usage.percent}%)`,
    `compaction threshold ${formatInt(usage.threshold)} tokens`,
  ];
  if (input.compaction) {
    const c = input.compaction;
    lines.push(
      c.state === 'succeeded'
        ? `last compaction: ${formatInt(c.tokensBefore)} → ${formatInt(c.tokensAfter)} tokens (${c.trigger})`
        : `last compaction ${c.state}${c.error ? `: ${c.error}` : ''}`,
    );
  }
  if (lvl !== 'ok') {
    lines.push(lvl === 'error' ? 'the context is over the window' : 'near the compaction threshold');
  }
  lines.push('Click for actions.');
  return {
    text: `${lvl === 'ok' ? '' : '$(warning) '}ctxd ${usageText(usage)}`,
    tooltip: lines.join('\n'),
    background: lvl === 'ok' ? undefined : lvl,
  };
}
