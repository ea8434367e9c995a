/**
 * The extension's settings: the `ctxd` object in pi's settings.json (in pi's agent directory),
 * then CTXD_PI_* environment variables over it.
 *
 *   "ctxd": {
 *     "command": "ctxd serve",          // how to start the daemon (a string or an argv array)
 *     "model": "auto",                  // "auto": the model pi uses; "offline"; or a litellm model name
 *     "apiBase": null,                  // with a litellm model name: its endpoint
 *     "compaction": true,               // summarise pi's compactions
 *     "branchSummary": true,            // summarise branches left in /tree
 *     "truncateToolResults": true,      // cut oversized tool results as they arrive
 *     "truncateContext": false,         // also cut them in memory before every model call
 *     "settings": {}                    // more ctxd compaction settings (keepLastTurns, timeoutSeconds, ...)
 *   }
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { splitCommand, type CompactionSettingsOverride } from './client';

export interface Settings {
  command: string[];
  model: string;
  apiBase: string | undefined;
  compaction: boolean;
  branchSummary: boolean;
  truncateToolResults: boolean;
  truncateContext: boolean;
  settings: CompactionSettingsOverride;
  /** A file to append the extension's log to (the daemon's stderr included). */
  logFile: string | undefined;
  /** Where each value came from, for /ctxd. */
  problems: string[];
}

export const DEFAULTS: Omit<Settings, 'problems'> = {
  command: ['ctxd', 'serve'],
  model: 'auto',
  apiBase: undefined,
  compaction: true,
  branchSummary: true,
  truncateToolResults: true,
  truncateContext: false,
  settings: {},
  logFile: undefined,
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readJson(path: string, problems: string[]): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  }
  try {
    const data: unknown = JSON.parse(text);
    return isRecord(data) ? data : {};
  } catch (error) {
    problems.push(`${path}: ${(error as Error).message}`);
    return {};
  }
}

function flag(value: string | undefined): boolean | undefined {
  if (value === undefined || value === '') {
    return undefined;
  }
  return !['0', 'false', 'no', 'off'].includes(value.toLowerCase());
}

/** The settings for pi's agent directory and this environment. */
export function loadSettings(agentDir: string, env: NodeJS.ProcessEnv = process.env): Settings {
  const problems: string[] = [];
  const out: Settings = { ...DEFAULTS, settings: {}, problems };
  const raw = readJson(join(agentDir, 'settings.json'), problems).ctxd;
  const file = isRecord(raw) ? raw : {};
  if (raw !== undefined && !isRecord(raw)) {
    problems.push('settings.json: "ctxd" must be an object');
  }
  const command = file.command;
  if (typeof command === 'string' && command.trim()) {
    out.command = splitCommand(command);
  } else if (Array.isArray(command) && command.length && command.every((c) => typeof c === 'string')) {
    out.command = command as string[];
  } else if (command !== undefined) {
    problems.push('ctxd.command must be a string or an array of strings');
  }
  if (typeof file.model === 'string' && file.model.trim()) {
    out.model = file.model.trim();
  }
  if (typeof file.apiBase === 'string' && file.apiBase) {
    out.apiBase = file.apiBase;
  }
  for (const key of ['compaction', 'branchSummary', 'truncateToolResults', 'truncateContext'] as const) {
    if (typeof file[key] === 'boolean') {
      out[key] = file[key] as boolean;
    } else if (file[key] !== undefined) {
      problems.push(`ctxd.${key} must be true or false`);
    }
  }
  if (isRecord(file.settings)) {
    out.settings = { ...file.settings };
  }
  if (typeof file.logFile === 'string' && file.logFile) {
    out.logFile = file.logFile;
  }

  const envCommand = env.CTXD_PI_COMMAND?.trim();
  if (envCommand) {
    out.command = splitCommand(envCommand);
  }
  if (env.CTXD_PI_MODEL?.trim()) {
    out.model = env.CTXD_PI_MODEL.trim();
  }
  if (env.CTXD_PI_API_BASE?.trim()) {
    out.apiBase = env.CTXD_PI_API_BASE.trim();
  }
  out.truncateContext = flag(env.CTXD_PI_TRUNCATE_CONTEXT) ?? out.truncateContext;
  out.truncateToolResults = flag(env.CTXD_PI_TRUNCATE_TOOL_RESULTS) ?? out.truncateToolResults;
  out.compaction = flag(env.CTXD_PI_COMPACTION) ?? out.compaction;
  out.branchSummary = flag(env.CTXD_PI_BRANCH_SUMMARY) ?? out.branchSummary;
  if (env.CTXD_PI_LOG?.trim()) {
    out.logFile = env.CTXD_PI_LOG.trim();
  }
  return out;
}
