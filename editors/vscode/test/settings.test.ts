/**
 * Settings -> how the daemon is started (readSettings), with a stand-in configuration object.
 */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type * as vscode from 'vscode';
import { readSettings } from '../src/server';

function configuration(values: Record<string, unknown>): vscode.WorkspaceConfiguration {
  const get = (key: string, fallback?: unknown): unknown => (key in values ? values[key] : fallback);
  return { get } as unknown as vscode.WorkspaceConfiguration;
}

describe('readSettings', () => {
  test('the defaults: ctxd serve, autoCompact on, other writers left to compact their own sessions', () => {
    const settings = readSettings(configuration({}), '0.1.0');
    assert.deepEqual(settings.command, ['ctxd', 'serve']);
    assert.equal(settings.initializationOptions.autoCompact, true);
    assert.equal(settings.initializationOptions.autoCompactExternal, undefined);
  });

  test('autoCompactExternal is sent when set', () => {
    const settings = readSettings(configuration({ autoCompact: true, autoCompactExternal: true }), '0.1.0');
    assert.equal(settings.initializationOptions.autoCompactExternal, true);
  });
});
