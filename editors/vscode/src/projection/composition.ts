/**
 * The Context view's picture of a `context/composition` result: the window bar's segments (one per
 * part, coloured by a theme variable), the threshold and the reserve, the timeline's series and
 * markers with their hover texts, and the heaviest entries. Pure: no VS Code API, no DOM; the
 * webview (webview/context.ts) draws it with Chart.js.
 */

import { COMPOSITION_PARTS, type Composition, type CompositionPart } from '@ctxd/client';
import { formatInt, formatTokens } from './format';

/** Each part's label and the theme colour (a CSS variable VS Code defines in every theme). */
export const PART_STYLE: Record<CompositionPart, { label: string; color: string }> = {
  system: { label: 'System prompt', color: '--vscode-charts-purple' },
  tools: { label: 'Tools', color: '--vscode-terminal-ansiMagenta' },
  summary: { label: 'Summary', color: '--vscode-charts-green' },
  branchSummary: { label: 'Branch summaries', color: '--vscode-terminal-ansiGreen' },
  pinned: { label: 'Pinned', color: '--vscode-charts-yellow' },
  user: { label: 'User', color: '--vscode-charts-blue' },
  assistant: { label: 'Assistant text', color: '--vscode-terminal-ansiCyan' },
  thinking: { label: 'Thinking', color: '--vscode-terminal-ansiBrightBlack' },
  toolCalls: { label: 'Tool calls', color: '--vscode-charts-orange' },
  toolResults: { label: 'Tool results', color: '--vscode-charts-red' },
  images: { label: 'Images', color: '--vscode-terminal-ansiBrightRed' },
  custom: { label: 'Custom messages', color: '--vscode-terminal-ansiBrightBlue' },
  bashExecution: { label: 'Shell runs', color: '--vscode-terminal-ansiYellow' },
};

export interface Segment {
  part: CompositionPart;
  label: string;
  tokens: number;
  color: string;
  /** What a hover says: "Tool results: 64,613 tokens (32% of the window) · read 41,085, bash …". */
  detail: string;
}

export interface TimelineMark {
  /** Index into the series. */
  index: number;
  tokens: number;
  kind: 'compaction' | 'overflow' | 'branch';
  /** What a hover says, one line each (for a compaction: tokens before → after, trigger, summariser). */
  text: string;
}

export interface TopRow {
  entryId: string;
  label: string;
  tokens: number;
  /** Share of the context's estimated tokens, 0..100. */
  percent: number;
}

export interface CompositionModel {
  session: string;
  leafId: string | null;
  headline: string;
  window: number;
  threshold: number;
  reserve: number;
  contextTokens: number;
  segments: Segment[];
  timeline: { labels: string[]; tokens: number[]; marks: TimelineMark[] };
  top: TopRow[];
  /** "3 compactions · 2 branches · 1 overflow". */
  timelineSummary: string;
}

export function projectComposition(c: Composition): CompositionModel {
  const window = Math.max(1, c.window);
  const share = (n: number): string => `${Math.round((100 * n) / window)}% of the window`;
  const segments: Segment[] = [];
  for (const part of COMPOSITION_PARTS) {
    const tokens = c.parts[part] ?? 0;
    if (tokens <= 0) {
      continue;
    }
    const { label, color } = PART_STYLE[part];
    let detail = `${label}: ${formatInt(tokens)} tokens (${share(tokens)})`;
    if (part === 'toolResults') {
      const tools = Object.entries(c.toolResultsByTool)
        .slice(0, 5)
        .map(([name, n]) => `${name} ${formatInt(n)}`);
      if (tools.length) {
        detail += ` · ${tools.join(', ')}`;
      }
    }
    segments.push({ part, label, tokens, color, detail });
  }
  const marks: TimelineMark[] = [];
  const counts = { compaction: 0, branch: 0, overflow: 0 };
  for (const m of c.markers) {
    const point = c.timeline[m.at];
    if (!point) {
      continue;
    }
    counts[m.kind]++;
    marks.push({ index: m.at, tokens: point.tokens, kind: m.kind, text: markText(m) });
  }
  const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;
  const estimated = Math.max(1, c.estimatedTokens);
  return {
    session: c.session,
    leafId: c.leafId,
    headline:
      `${formatTokens(c.contextTokens)} of ${formatTokens(c.window)} tokens (${c.percent}%)` +
      ` · compaction at ${formatTokens(c.threshold)} · reserve ${formatTokens(c.reserve)}`,
    window: c.window,
    threshold: c.threshold,
    reserve: c.reserve,
    contextTokens: c.contextTokens,
    segments,
    timeline: {
      labels: c.timeline.map((p) => (p.kind === 'compaction' ? `compaction after turn ${p.turn}` : `turn ${p.turn}`)),
      tokens: c.timeline.map((p) => p.tokens),
      marks,
    },
    top: c.top.map((e) => ({
      entryId: e.entryId,
      label: `${e.role}${e.tool ? ` ${e.tool}` : ''}${e.pinned ? ' · pinned' : ''} · line ${e.line}`,
      tokens: e.tokens,
      percent: Math.round((1000 * e.tokens) / estimated) / 10,
    })),
    timelineSummary: [
      plural(counts.compaction, 'compaction', 'compactions'),
      plural(counts.branch, 'branch', 'branches'),
      plural(counts.overflow, 'overflow', 'overflows'),
    ].join(' · '),
  };
}

function markText(m: Composition['markers'][number]): string {
  if (m.kind === 'compaction') {
    const how = [m.trigger ? `trigger: ${m.trigger}` : '', m.summarizer ? `summariser: ${m.summarizer}` : ''].filter(Boolean);
    return [`Compaction: ${formatInt(m.tokensBefore)} → ${formatInt(m.tokensAfter)} tokens`, ...how].join('\n');
  }
  if (m.kind === 'overflow') {
    return `Overflow${m.detail ? `: ${m.detail}` : ''}`;
  }
  return `Branch${m.detail ? `: ${m.detail}` : ''}`;
}
