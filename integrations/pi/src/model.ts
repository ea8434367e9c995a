/**
 * Which model writes ctxd's summaries. By default the model pi is using, called through litellm with
 * the provider, endpoint and key pi itself would use (pi's own resolution: auth.json, models.json,
 * environment); the offline summariser when that model cannot be reached through litellm; or what
 * the settings name.
 */

import type { CompactionSettingsOverride } from './client';
import type { Settings } from './settings';

/** The parts of pi's Model and ModelRegistry used here (the same in pi 0.87 and 1.5). */
export interface PiModel {
  id: string;
  api: string;
  provider: string;
  baseUrl: string;
  contextWindow: number;
  maxTokens: number;
}

export interface PiModelRegistry {
  getApiKeyAndHeaders(model: any): Promise<{ ok: true; apiKey?: string; baseUrl?: string } | { ok: false; error: string }>;
  isUsingOAuth(model: any): boolean;
}

export interface Summarizer {
  /** Compaction settings for the daemon (model, apiBase, apiKey, windows). */
  settings: CompactionSettingsOverride;
  /** The summarising model's window, when known. */
  modelWindow: number | undefined;
  /** For logs and /ctxd: "openai/gpt-4o-mini via https://…", "offline (why)". */
  label: string;
}

/**
 * pi's API kinds and the litellm provider prefix that speaks each. Only OpenAI-compatible APIs take
 * pi's base URL as litellm's api_base (the same `…/v1` convention); the others use litellm's
 * default endpoint for their provider.
 */
const LITELLM: Record<string, { prefix: string; baseUrl: boolean }> = {
  'openai-completions': { prefix: 'openai', baseUrl: true },
  'openai-responses': { prefix: 'openai', baseUrl: true },
  'anthropic-messages': { prefix: 'anthropic', baseUrl: false },
  'google-generative-ai': { prefix: 'gemini', baseUrl: false },
  'mistral-conversations': { prefix: 'mistral', baseUrl: false },
};

function offline(why: string, extra: CompactionSettingsOverride = {}): Summarizer {
  return { settings: { ...extra, model: null, apiBase: null, apiKey: null }, modelWindow: undefined, label: `offline (${why})` };
}

/** The summariser for this compaction or branch summary (the settings' `settings` object last). */
export async function chooseSummarizer(
  settings: Settings,
  model: PiModel | undefined,
  registry: PiModelRegistry | undefined,
  reserveTokens?: number,
): Promise<Summarizer> {
  const chosen = await choose(settings, model, registry, reserveTokens);
  return { ...chosen, settings: { ...chosen.settings, ...settings.settings } };
}

async function choose(
  settings: Settings,
  model: PiModel | undefined,
  registry: PiModelRegistry | undefined,
  reserveTokens?: number,
): Promise<Summarizer> {
  const base: CompactionSettingsOverride = {};
  if (model?.contextWindow) {
    base.contextWindow = model.contextWindow;
  }
  if (reserveTokens !== undefined) {
    base.reserveTokens = reserveTokens;
  }
  const choice = settings.model;
  if (choice === 'offline') {
    return offline('settings', base);
  }
  if (choice !== 'auto') {
    // A litellm model name: its key comes from the provider's usual environment variable.
    return {
      settings: { ...base, model: choice, apiBase: settings.apiBase ?? null },
      modelWindow: undefined,
      label: settings.apiBase ? `${choice} via ${settings.apiBase}` : choice,
    };
  }
  if (!model || !registry) {
    return offline('pi has no model selected', base);
  }
  const kind = LITELLM[model.api];
  if (!kind) {
    return offline(`litellm cannot call pi's ${model.api} API`, base);
  }
  if (registry.isUsingOAuth(model)) {
    return offline(`pi signs in to ${model.provider} with OAuth, which litellm cannot use`, base);
  }
  const auth = await registry.getApiKeyAndHeaders(model);
  if (!auth.ok) {
    return offline(`no usable key for ${model.provider}: ${auth.error}`, base);
  }
  const apiBase = kind.baseUrl ? (auth.baseUrl ?? model.baseUrl)?.replace(/\/+$/, '') || null : null;
  const name = `${kind.prefix}/${model.id}`;
  const output = Math.floor(0.8 * (reserveTokens ?? 16_384));
  return {
    settings: {
      ...base,
      model: name,
      apiBase,
      apiKey: auth.apiKey ?? null,
      maxOutputTokens: Math.max(64, model.maxTokens > 0 ? Math.min(model.maxTokens, output) : output),
    },
    modelWindow: model.contextWindow || undefined,
    label: apiBase ? `${name} via ${apiBase}` : name,
  };
}
