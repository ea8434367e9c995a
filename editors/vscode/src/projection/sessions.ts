/**
 * The Sessions view as pure data: session/list summaries grouped by project folder (the session's
 * cwd), newest first, named from session_info, with a live marker on sessions that changed lately.
 * ctxd's archived copies of a Claude Code transcript sit under their live session (the history from
 * before its compactions); a copy whose transcript Claude Code has deleted stands on its own.
 */

import type { SessionSummary } from '@ctxd/client';
import { basename, formatAge, formatInt, oneLine, tildify } from './format';

/** A session counts as live this long after its last change. */
export const LIVE_MS = 30_000;

export interface ProjectNode {
  kind: 'project';
  key: string;
  cwd: string;
  sessions: SessionNode[];
  live: boolean;
}

export interface SessionNode {
  kind: 'session';
  key: string;
  summary: SessionSummary;
  live: boolean;
  open: boolean;
  /** ctxd's archived copies of this transcript, shown under it (the current copy first). */
  archives: SessionNode[];
  /** For a copy shown under its transcript: that transcript's path, and the copy's place (0: current). */
  archiveOf?: string;
  copyIndex?: number;
}

export interface SessionsNoticeNode {
  kind: 'notice';
  key: string;
  message: string;
}

export type SessionsNode = ProjectNode | SessionNode | SessionsNoticeNode;

export interface SessionsInput {
  sessions: readonly SessionSummary[];
  /** Last change seen per session path (ms since the epoch). */
  changed: ReadonlyMap<string, number>;
  openPath: string | undefined;
  now: number;
}

export function sessionName(s: SessionSummary): string {
  if (s.name) {
    return s.name;
  }
  if (s.title) {
    return oneLine(s.title, 60);
  }
  return s.id ? `session ${s.id.slice(0, 8)}` : basename(s.path);
}

export function isLive(path: string, changed: ReadonlyMap<string, number>, now: number): boolean {
  const t = changed.get(path);
  return t !== undefined && now - t < LIVE_MS;
}

/** Modification time in ms, counting changes seen since the listing. */
function modifiedMs(s: SessionSummary, changed: ReadonlyMap<string, number>): number {
  return Math.max(s.modified * 1000, changed.get(s.path) ?? 0);
}

function sessionNode(summary: SessionSummary, input: SessionsInput): SessionNode {
  return {
    kind: 'session',
    key: `session:${summary.path}`,
    summary,
    live: isLive(summary.path, input.changed, input.now),
    open: summary.path === input.openPath,
    archives: [],
  };
}

export function projectSessions(input: SessionsInput): ProjectNode[] {
  const groups = new Map<string, SessionNode[]>();
  const byPath = new Map(input.sessions.map((s) => [s.path, s]));
  const nested = (s: SessionSummary) => Boolean(s.archived && s.archiveOf && byPath.has(s.archiveOf));
  for (const summary of input.sessions) {
    if (nested(summary)) {
      continue; // shown under its transcript
    }
    const cwd = summary.cwd || '(unknown folder)';
    const node = sessionNode(summary, input);
    for (const path of summary.archives ?? []) {
      const copy = byPath.get(path);
      if (copy && copy.archiveOf === summary.path) {
        node.archives.push({ ...sessionNode(copy, input), archiveOf: summary.path, copyIndex: node.archives.length });
      }
    }
    const list = groups.get(cwd);
    if (list) {
      list.push(node);
    } else {
      groups.set(cwd, [node]);
    }
  }
  const projects: ProjectNode[] = [];
  for (const [cwd, sessions] of groups) {
    sessions.sort(
      (a, b) => modifiedMs(b.summary, input.changed) - modifiedMs(a.summary, input.changed) || a.key.localeCompare(b.key),
    );
    projects.push({ kind: 'project', key: `project:${cwd}`, cwd, sessions, live: sessions.some((s) => s.live) });
  }
  const newest = (p: ProjectNode) => modifiedMs(p.sessions[0]!.summary, input.changed);
  projects.sort((a, b) => newest(b) - newest(a) || a.cwd.localeCompare(b.cwd));
  return projects;
}

export interface SessionsPresentation {
  label: string;
  description: string;
  tooltip: string;
  icon: string;
  iconColor?: string;
  expandable: 'none' | 'collapsed' | 'expanded';
}

export function presentSession(node: SessionsNode, now: number, home?: string): SessionsPresentation {
  switch (node.kind) {
    case 'project':
      return {
        label: basename(node.cwd),
        description: `${tildify(node.cwd, home)}${node.live ? ' · live' : ''}`,
        tooltip: `${node.cwd}\n${node.sessions.length} session${node.sessions.length === 1 ? '' : 's'}`,
        icon: 'folder',
        iconColor: node.live ? 'ctxd.liveForeground' : undefined,
        expandable: 'expanded',
      };
    case 'session': {
      const s = node.summary;
      if (node.archiveOf !== undefined) {
        return presentCopy(node, now);
      }
      const bits: string[] = [];
      if (node.live) {
        bits.push('● live');
      }
      if (node.open) {
        bits.push('open');
      }
      if (s.parentSession) {
        bits.push('fork');
      }
      if (s.archived) {
        bits.push(`${s.agent ?? 'transcript'} · ctxd archive`);
      } else if (s.readOnly) {
        bits.push(`${s.agent ?? 'transcript'} · read-only`);
      }
      if (node.archives.length) {
        bits.push(`${node.archives.length} archived`);
      }
      bits.push(formatAge(s.modified * 1000, now));
      bits.push(`${formatInt(s.entries)} entries`);
      if (s.error) {
        bits.push(`⚠ ${s.error}`);
      }
      const tooltip = [
        sessionName(s),
        s.name && s.title ? oneLine(s.title, 200) : '',
        `${s.path}`,
        `id ${s.id}`,
        `created ${s.created}`,
        `${formatInt(s.entries)} entries, ${formatInt(s.size)} bytes`,
        s.parentSession ? `forked from ${s.parentSession}` : '',
        s.archived
          ? `ctxd's archived copy of a ${s.agent ?? 'transcript'} whose live file is gone: the history stays readable here`
          : s.readOnly
            ? `a ${s.agent ?? 'other agent'} transcript, read-only: compacting it compacts a pi fork`
            : '',
        node.archives.length ? `${node.archives.length} archived cop${node.archives.length === 1 ? 'y' : 'ies'} by ctxd (expand)` : '',
        s.error ? `problem: ${s.error}` : '',
      ]
        .filter(Boolean)
        .join('\n');
      return {
        label: sessionName(s),
        description: bits.filter(Boolean).join(' · '),
        tooltip,
        icon: node.live
          ? 'circle-filled'
          : s.error
            ? 'warning'
            : node.open
              ? 'eye'
              : s.archived
                ? 'archive'
                : s.readOnly
                  ? 'lock'
                  : 'comment-discussion',
        iconColor: node.live ? 'ctxd.liveForeground' : undefined,
        expandable: node.archives.length ? 'collapsed' : 'none',
      };
    }
    case 'notice':
      return { label: node.message, description: '', tooltip: node.message, icon: 'info', expandable: 'none' };
  }
}

/** A copy under its transcript: which copy, when it was last brought up to date, how much it holds. */
function presentCopy(node: SessionNode, now: number): SessionsPresentation {
  const s = node.summary;
  const label = node.copyIndex ? 'earlier copy (ctxd archive)' : 'ctxd archive';
  const bits = [node.open ? 'open' : '', formatAge(s.modified * 1000, now), `${formatInt(s.entries)} entries`];
  const tooltip = [
    label,
    s.path,
    node.copyIndex
      ? 'kept when the transcript stopped extending the archived copy (rewritten or truncated)'
      : "ctxd's copy, brought up to date before each compaction and at the end of each session",
    `copy of ${node.archiveOf}`,
    `${formatInt(s.entries)} entries, ${formatInt(s.size)} bytes`,
  ].join('\n');
  return { label, description: bits.filter(Boolean).join(' · '), tooltip, icon: 'archive', expandable: 'none' };
}
