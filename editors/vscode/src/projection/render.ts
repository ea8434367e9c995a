/**
 * Read-only Markdown documents: an entry (rendered, then as raw JSON), the built context with token
 * counts, a compaction preview (dry run) and a compaction's summary. Pure functions of payloads.
 */

import type {
  CompactionPlan,
  ContextBuildResult,
  Entry,
  SessionEntryResult,
  TreeNodeRow,
  TreeRow,
} from '@ctxd/client';
import { isCollapsed } from '@ctxd/client';
import { formatCost, formatDuration, formatInt, formatTokens, formatWhen, oneLine } from './format';
import { modelOf, type LedgerRow } from './ledger';
import { roleName } from './conversation';

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A fence long enough for `text` (which may hold fences itself). */
function fence(text: string, lang = ''): string {
  let ticks = '```';
  while (text.includes(ticks)) {
    ticks += '`';
  }
  return `${ticks}${lang}\n${text.replace(/\n$/, '')}\n${ticks}`;
}

function quote(text: string): string {
  return text
    .split('\n')
    .map((l) => `> ${l}`)
    .join('\n');
}

/** Escape Markdown table cell contents. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** Content blocks (pi's text, thinking, toolCall, image) or a string, as Markdown. */
export function renderContent(content: unknown): string {
  if (typeof content === 'string') {
    return content;
  }
  if (!Array.isArray(content)) {
    return content === undefined || content === null ? '' : fence(JSON.stringify(content, null, 2), 'json');
  }
  const parts: string[] = [];
  for (const block of content) {
    if (!isObj(block)) {
      continue;
    }
    switch (block.type) {
      case 'text':
        parts.push(String(block.text ?? ''));
        break;
      case 'thinking':
        parts.push(`*thinking*\n\n${quote(String(block.thinking ?? block.text ?? ''))}`);
        break;
      case 'toolCall':
        parts.push(`**→ ${String(block.name ?? 'tool')}** \`${String(block.id ?? '')}\`\n\n${fence(JSON.stringify(block.arguments ?? {}, null, 2), 'json')}`);
        break;
      case 'image':
        parts.push(`*[image${block.mimeType ? `: ${String(block.mimeType)}` : ''}]*`);
        break;
      default:
        parts.push(fence(JSON.stringify(block, null, 2), 'json'));
    }
  }
  return parts.join('\n\n');
}

/** An AgentMessage as Markdown (without a heading). */
export function renderMessage(message: Json): string {
  const role = String(message.role ?? '?');
  const lines: string[] = [];
  if (role === 'assistant') {
    const meta = [message.provider, message.model].filter(Boolean).join('/');
    const usage = isObj(message.usage) ? message.usage : undefined;
    const bits = [meta, message.stopReason ? `stop: ${String(message.stopReason)}` : '', usage?.totalTokens ? `usage ${formatInt(Number(usage.totalTokens))} tokens` : '']
      .filter(Boolean)
      .join(' · ');
    if (bits) {
      lines.push(`*${bits}*`);
    }
    if (message.errorMessage) {
      lines.push(`**error:** ${String(message.errorMessage)}`);
    }
    lines.push(renderContent(message.content));
  } else if (role === 'toolResult') {
    lines.push(`*${String(message.toolName ?? 'tool')} result${message.isError ? ' (error)' : ''}* \`${String(message.toolCallId ?? '')}\``);
    const text = renderContent(message.content);
    lines.push(Array.isArray(message.content) && message.content.every((b) => isObj(b) && b.type === 'text') ? fence(text) : text);
  } else if (role === 'bashExecution') {
    lines.push(fence(`$ ${String(message.command ?? '')}\n${String(message.output ?? '')}`, 'sh'));
    lines.push(`*exit ${String(message.exitCode ?? '?')}*`);
  } else if (role === 'compactionSummary' || role === 'branchSummary') {
    lines.push(String(message.summary ?? renderContent(message.content)));
  } else {
    lines.push(renderContent(message.content));
  }
  return lines.filter((l) => l !== '').join('\n\n');
}

/** What an entry says, whatever its type. */
export function renderEntryBody(entry: Entry): string {
  switch (entry.type) {
    case 'message':
      return isObj(entry.message) ? renderMessage(entry.message) : '';
    case 'compaction':
      return [
        `Compacted **${formatInt(Number(entry.tokensBefore))}** tokens; kept from \`${String(entry.firstKeptEntryId ?? '?')}\`.`,
        '### Summary',
        String(entry.summary ?? ''),
      ].join('\n\n');
    case 'branch_summary':
      return [`Summary of the branch left at \`${String(entry.fromId ?? '?')}\`:`, String(entry.summary ?? '')].join('\n\n');
    case 'custom_message':
      return [`*custom message \`${String(entry.customType ?? '')}\`*`, renderContent(entry.content)].join('\n\n');
    case 'model_change':
      return `Model → **${String(entry.provider ?? '')}/${String(entry.modelId ?? '')}**`;
    case 'thinking_level_change':
      return `Thinking level → **${String(entry.thinkingLevel ?? '')}**`;
    case 'label':
      return entry.label ? `Label \`${String(entry.targetId ?? '')}\` as **${String(entry.label)}**` : `Clear the label of \`${String(entry.targetId ?? '')}\``;
    case 'session_info':
      return `Session name → **${String(entry.name ?? '')}**`;
    default:
      return fence(JSON.stringify(entry, null, 2), 'json');
  }
}

export function renderEntryDocument(result: SessionEntryResult, sessionName: string): string {
  const entry = result.entry;
  const head = `# ${roleName(result.role)} · ${formatInt(result.tokens)} tokens`;
  const facts = [
    `| | |`,
    `|---|---|`,
    `| session | ${cell(sessionName)} |`,
    `| entry | \`${result.id}\` (line ${result.line}) |`,
    `| type | ${cell(result.type)} |`,
    `| parent | ${result.parentId ? `\`${result.parentId}\`` : '—'} |`,
    `| children | ${result.children.length ? result.children.map((c) => `\`${c}\``).join(', ') : '—'} |`,
    `| time | ${cell(String(entry.timestamp ?? '—'))} |`,
    `| labels | ${result.labels.length ? cell(result.labels.join(', ')) : '—'} |`,
    `| active path | ${result.onActivePath ? (result.isLeaf ? 'yes — the leaf' : 'yes') : 'no'} |`,
  ].join('\n');
  return [head, facts, '## Rendered', renderEntryBody(entry), '## Raw JSON', fence(JSON.stringify(entry, null, 2), 'json'), ''].join('\n\n');
}

export function renderContextDocument(ctx: ContextBuildResult, sessionName: string): string {
  const usage = ctx.usage;
  const lines: string[] = [
    `# Context of ${sessionName}`,
    [
      `| | |`,
      `|---|---|`,
      `| leaf | ${ctx.leafId ? `\`${ctx.leafId}\`` : '—'} |`,
      `| model | ${cell(ctx.model ?? '—')} · thinking ${cell(ctx.thinkingLevel)} |`,
      `| messages | ${ctx.messages.length} |`,
      `| estimated tokens | ${formatInt(ctx.estimatedTokens)} |`,
      `| context tokens | ${formatInt(ctx.contextTokens)} of ${formatInt(usage.window)} (${usage.percent}%) · threshold ${formatInt(usage.threshold)} |`,
      `| opens with compaction | ${ctx.compactionId ? `\`${ctx.compactionId}\`` : '—'} |`,
    ].join('\n'),
  ];
  if (ctx.diagnostics.length) {
    lines.push('## Diagnostics', ctx.diagnostics.map((d) => `- ${d.line !== null ? `line ${d.line}: ` : ''}${d.message}`).join('\n'));
  }
  lines.push(
    '## Messages',
    ['| # | role | tokens | entry | line |', '|---:|---|---:|---|---:|', ...ctx.messages.map((m, k) => `| ${k + 1} | ${roleName(m.role)} | ${formatInt(m.tokens)} | \`${m.entryId}\` | ${m.line} |`)].join('\n'),
  );
  ctx.messages.forEach((m, k) => {
    lines.push(`### ${k + 1}. ${roleName(m.role)} · ${formatInt(m.tokens)} tokens · \`${m.entryId}\``);
    if (m.message) {
      lines.push(renderMessage(m.message));
    }
  });
  lines.push('');
  return lines.join('\n\n');
}

export function renderPreviewDocument(plan: CompactionPlan, sessionName: string, rows: readonly TreeRow[]): string {
  const byId = new Map<string, TreeNodeRow>();
  for (const r of rows) {
    if (!isCollapsed(r)) {
      byId.set(r.id, r);
    }
  }
  const saved = plan.tokensBefore - plan.estimatedTokensAfter;
  const list = (ids: readonly string[]): string => {
    if (!ids.length) {
      return '*none*';
    }
    const out = ['| # | entry | role | tokens | preview |', '|---:|---|---|---:|---|'];
    ids.forEach((id, k) => {
      const r = byId.get(id);
      out.push(`| ${k + 1} | \`${id}\` | ${r ? roleName(r.role) : '?'} | ${r ? formatInt(r.tokens) : '?'} | ${r ? cell(oneLine(r.preview, 80)) : ''} |`);
    });
    return out.join('\n');
  };
  const summarizedTokens = plan.summarizeEntryIds.reduce((sum, id) => sum + (byId.get(id)?.tokens ?? 0), 0);
  return [
    `# Compaction preview: ${sessionName}`,
    `*A dry run: nothing was written and no model was called.*`,
    [
      `| | |`,
      `|---|---|`,
      `| tokens before | **${formatInt(plan.tokensBefore)}** |`,
      `| tokens after (estimated) | **${formatInt(plan.estimatedTokensAfter)}** (${saved >= 0 ? `${formatInt(saved)} fewer` : `${formatInt(-saved)} more`}) |`,
      `| entries to summarise | ${plan.summarizeEntryIds.length} (${plan.messagesToSummarize} messages, ${formatInt(summarizedTokens)} tokens) |`,
      `| split turn | ${plan.isSplitTurn ? `yes: ${plan.turnPrefixMessages} messages of the current turn are summarised too` : 'no'} |`,
      `| first kept entry | \`${plan.firstKeptEntryId}\` (line ${plan.firstKeptLine}) |`,
      `| kept messages | ${plan.keptMessages} |`,
      `| previous compaction | ${plan.previousCompactionId ? `\`${plan.previousCompactionId}\`` : '—'} |`,
      `| leaf | ${plan.leafId ? `\`${plan.leafId}\`` : '—'} |`,
    ].join('\n'),
    `## Entries that would be summarised (${plan.summarizeEntryIds.length})`,
    list(plan.summarizeEntryIds),
    ...(plan.turnPrefixEntryIds.length ? [`## Turn prefix summarised with them (${plan.turnPrefixEntryIds.length})`, list(plan.turnPrefixEntryIds)] : []),
    ...mustKeepSection(plan),
    '## Files',
    `- read: ${plan.readFiles.length ? plan.readFiles.map((f) => `\`${f}\``).join(', ') : '—'}`,
    `- modified: ${plan.modifiedFiles.length ? plan.modifiedFiles.map((f) => `\`${f}\``).join(', ') : '—'}`,
    '',
  ].join('\n\n');
}

/** "What this compaction must keep": the fact sheet every summary is checked against (ctxd renders it). */
function mustKeepSection(plan: CompactionPlan): string[] {
  if (plan.mustKeepText) {
    return [plan.mustKeepText];
  }
  if (plan.mustKeep?.length) {
    return ['## What this compaction must keep', plan.mustKeep.map((f) => `- ${f.kind}: ${f.text}`).join('\n')];
  }
  return [];
}

export function renderSummaryDocument(row: LedgerRow, sessionName: string, now: number): string {
  const cost = formatCost(row.cost);
  return [
    `# Compaction ${formatWhen(row.timestamp, now)} · ${row.trigger}`,
    [
      `| | |`,
      `|---|---|`,
      `| session | ${cell(sessionName)} |`,
      `| entry | \`${row.entryId}\` |`,
      `| when | ${cell(row.timestamp ?? '?')} |`,
      `| why | ${cell(row.trigger)} |`,
      `| tokens | ${formatInt(row.tokensBefore)} → ${formatInt(row.tokensAfter)} (${formatTokens(row.tokensBefore)} → ${formatTokens(row.tokensAfter)}) |`,
      `| model | ${cell(modelOf(row))}${row.path && row.path !== modelOf(row) ? ` (summary made by: ${cell(row.path)})` : ''} |`,
      `| cost | ${cost ?? '—'} |`,
      `| duration | ${row.durationMs !== undefined ? formatDuration(row.durationMs) : '—'} |`,
      `| first kept entry | ${row.firstKeptEntryId ? `\`${row.firstKeptEntryId}\`` : '—'} |`,
      `| instructions | ${row.instructions ? cell(row.instructions) : '—'} |`,
      `| fallbacks | ${row.failures.length ? cell(row.failures.join('; ')) : '—'} |`,
      `| active path | ${row.onActivePath ? 'yes' : 'no'} |`,
    ].join('\n'),
    '## Summary',
    row.summary,
    '',
  ].join('\n\n');
}
