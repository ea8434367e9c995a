/** The shared client's JSON-RPC layer (clients/typescript/src/jsonrpc.ts) over in-memory streams. */

import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { CancellationTokenSource, Connection, Emitter, FrameReader, ResponseError, frame } from '@ctxd/client';

/** A connection and the other end of its streams: what it writes, and a way to answer. */
function pair() {
  const fromPeer = new PassThrough();
  const toPeer = new PassThrough();
  const connection = new Connection(fromPeer, toPeer);
  const sent: Array<Record<string, unknown>> = [];
  const reader = new FrameReader(
    (body) => sent.push(JSON.parse(body) as Record<string, unknown>),
    (error) => assert.fail(error),
  );
  toPeer.on('data', (chunk: Buffer) => reader.push(chunk));
  connection.listen();
  const reply = (message: unknown) => fromPeer.write(frame({ jsonrpc: '2.0', ...(message as object) }));
  const until = async (predicate: () => boolean) => {
    for (let i = 0; i < 200 && !predicate(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.ok(predicate(), 'timed out');
  };
  return { connection, fromPeer, sent, reply, until };
}

describe('LSP frames', () => {
  test('split anywhere, several per chunk, lengths in UTF-8 bytes', () => {
    const bodies: string[] = [];
    const reader = new FrameReader((b) => bodies.push(b), (e) => assert.fail(e));
    const data = Buffer.concat([
      frame({ jsonrpc: '2.0', method: 'a', params: { text: 'héllo → 世界' } }),
      frame({ jsonrpc: '2.0', method: 'b' }),
    ]);
    for (let i = 0; i < data.length; i += 7) {
      reader.push(data.subarray(i, i + 7));
    }
    assert.deepEqual(
      bodies.map((b) => JSON.parse(b)),
      [
        { jsonrpc: '2.0', method: 'a', params: { text: 'héllo → 世界' } },
        { jsonrpc: '2.0', method: 'b' },
      ],
    );
  });

  test('a header without Content-Length is reported and skipped', () => {
    const bodies: string[] = [];
    const errors: Error[] = [];
    const reader = new FrameReader((b) => bodies.push(b), (e) => errors.push(e));
    reader.push(Buffer.concat([Buffer.from('X-Junk: 1\r\n\r\n'), frame({ jsonrpc: '2.0', method: 'ok' })]));
    assert.equal(errors.length, 1);
    assert.deepEqual(JSON.parse(bodies[0]!), { jsonrpc: '2.0', method: 'ok' });
  });
});

describe('Connection', () => {
  test('requests get their own answers, errors as ResponseError', async () => {
    const { connection, sent, reply, until } = pair();
    const first = connection.sendRequest<number>('double', { n: 2 });
    const second = connection.sendRequest('fail');
    await until(() => sent.length === 2);
    assert.deepEqual(sent[0], { jsonrpc: '2.0', id: 1, method: 'double', params: { n: 2 } });
    reply({ id: 2, error: { code: -31001, message: 'no session', data: { session: 'x' } } });
    reply({ id: 1, result: 4 });
    assert.equal(await first, 4);
    await assert.rejects(second, (e: unknown) => e instanceof ResponseError && e.code === -31001 && e.message === 'no session');
  });

  test('cancelling sends $/cancelRequest; the answer settles the request', async () => {
    const { connection, sent, reply, until } = pair();
    const source = new CancellationTokenSource();
    const pending = connection.sendRequest('slow', {}, source.token);
    await until(() => sent.length === 1);
    source.cancel();
    await until(() => sent.length === 2);
    assert.deepEqual(sent[1], { jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 1 } });
    reply({ id: 1, error: { code: -32800, message: 'cancelled' } });
    await assert.rejects(pending, (e: unknown) => e instanceof ResponseError && e.code === -32800);
  });

  test('notifications and requests from the peer', async () => {
    const { connection, sent, reply, until } = pair();
    const seen: unknown[] = [];
    connection.onNotification('note', (p) => seen.push(p));
    connection.onRequest('ask', async (p: { q: string }) => ({ a: p.q.toUpperCase() }));
    reply({ method: 'note', params: { x: 1 } });
    reply({ id: 'r1', method: 'ask', params: { q: 'hi' } });
    reply({ id: 'r2', method: 'unknown' });
    await until(() => sent.length === 2 && seen.length === 1);
    assert.deepEqual(seen, [{ x: 1 }]);
    const byId = new Map(sent.map((m) => [m.id, m]));
    assert.deepEqual(byId.get('r1'), { jsonrpc: '2.0', id: 'r1', result: { a: 'HI' } });
    assert.equal((byId.get('r2')!.error as { code: number }).code, -32601);
  });

  test('pending requests fail when the peer goes away', async () => {
    const { connection, fromPeer } = pair();
    const pending = connection.sendRequest('never');
    fromPeer.end();
    await assert.rejects(pending, /closed/);
    await assert.rejects(connection.sendRequest('after'), /closed/);
  });

  test('a throwing listener does not stop the others', () => {
    const emitter = new Emitter<number>();
    const got: number[] = [];
    const errors: unknown[] = [];
    Emitter.onListenerError = (e) => errors.push(e);
    emitter.event(() => {
      throw new Error('listener bug');
    });
    const sub = emitter.event((n) => got.push(n));
    emitter.fire(1);
    sub.dispose();
    emitter.fire(2);
    Emitter.onListenerError = undefined;
    assert.deepEqual(got, [1]);
    assert.equal(errors.length, 2);
  });
});
