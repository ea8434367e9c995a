/**
 * Must-keep facts against a summary, as ctxd compares them (ctxd/compaction/mustkeep.py): a fact is kept
 * when one of its probes occurs in the normalised summary (lower case, markup and quotes removed, spaces
 * collapsed). Also the cut of an oversized tool output, with ctxd's omission marker.
 */

export interface Fact {
  kind: string;
  text: string;
  probes: string[];
}

const MARKUP = /[`*_"'\u2018\u2019\u201c\u201d]|\[\.\.\.\d+ chars omitted\.\.\.\]/g;
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;

export function normalize(text: string): string {
  return text.replace(ANSI, '').toLowerCase().replace(MARKUP, '').replace(/\s+/g, ' ').trim();
}

/** The facts none of whose probes the summary holds. */
export function missingFacts(facts: Fact[], summary: string): Fact[] {
  const norm = normalize(summary);
  return facts.filter((f) => f.probes.length > 0 && !f.probes.some((p) => norm.includes(p)));
}

const LABELS: Record<string, string> = {
  goal: 'Goal',
  constraint: 'Constraint',
  error: 'Error',
  'file-modified': 'File modified',
  'file-read': 'File read',
  next: 'Next step',
  decision: 'Decision',
  command: 'Command',
};

/** The text re-injected after a compaction whose summary lacks these facts. */
export function renderMissing(facts: Fact[]): string {
  const lines = facts.map((f) => `- ${LABELS[f.kind] ?? f.kind}: ${f.text}`);
  return ['## Facts the compaction summary left out (kept by ctxd)', ...lines].join('\n');
}

/** ``text`` cut to about ``limit`` characters: its head and tail, with ctxd's marker between them. */
export function cutOutput(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const head = Math.floor(limit * 0.6);
  const tail = Math.max(0, limit - head);
  const omitted = text.length - head - tail;
  return `${text.slice(0, head)}\n[...${omitted} chars omitted...]\n${text.slice(text.length - tail)}`;
}
