/**
 * JSON-RPC 2.0 with LSP framing (`Content-Length: N\r\n\r\n` + N bytes of UTF-8 JSON) over a pair of
 * Node streams: requests both ways, notifications, cancellation ($/cancelRequest), and the small
 * event and cancellation types the clients use. No dependencies, so that hosts that load
 * TypeScript as it is (pi, through jiti) can use the client without installing anything.
 */

import type { Readable, Writable } from 'node:stream';

// --- events -----------------------------------------------------------------------------------

export interface Disposable {
  dispose(): void;
}

/** Subscribe with a listener; dispose the result to unsubscribe. */
export type Event<T> = (listener: (e: T) => unknown, thisArgs?: unknown, disposables?: Disposable[]) => Disposable;

export class Emitter<T> {
  /** Where a listener's exception goes (it never reaches the code that fired the event). */
  static onListenerError: ((error: unknown) => void) | undefined;
  private listeners: Array<(e: T) => unknown> | undefined = [];

  readonly event: Event<T> = (listener, thisArgs, disposables) => {
    const bound = thisArgs === undefined ? listener : listener.bind(thisArgs);
    this.listeners?.push(bound);
    const subscription = {
      dispose: () => {
        const at = this.listeners?.indexOf(bound) ?? -1;
        if (at >= 0) {
          this.listeners!.splice(at, 1);
        }
      },
    };
    disposables?.push(subscription);
    return subscription;
  };

  fire(event: T): void {
    for (const listener of [...(this.listeners ?? [])]) {
      try {
        listener(event);
      } catch (error) {
        // One failing listener must not stop the others, nor the reader that fired.
        Emitter.onListenerError?.(error);
      }
    }
  }

  dispose(): void {
    this.listeners = undefined;
  }
}

// --- cancellation -----------------------------------------------------------------------------

export interface CancellationToken {
  readonly isCancellationRequested: boolean;
  readonly onCancellationRequested: Event<unknown>;
}

export class CancellationTokenSource implements Disposable {
  private cancelled = false;
  private readonly emitter = new Emitter<void>();
  readonly token: CancellationToken;

  constructor() {
    const source = this;
    this.token = {
      get isCancellationRequested() {
        return source.cancelled;
      },
      onCancellationRequested: (listener, thisArgs, disposables) => {
        if (source.cancelled) {
          // Already cancelled: call back at once, as VS Code's tokens do.
          queueMicrotask(() => listener.call(thisArgs, undefined));
          return { dispose() {} };
        }
        return source.emitter.event(listener, thisArgs, disposables);
      },
    };
  }

  cancel(): void {
    if (!this.cancelled) {
      this.cancelled = true;
      this.emitter.fire();
    }
  }

  dispose(): void {
    this.emitter.dispose();
  }
}

// --- messages ---------------------------------------------------------------------------------

/** An error answer: JSON-RPC's {code, message, data}. */
export class ResponseError extends Error {
  readonly code: number;
  readonly data: unknown;

  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = 'ResponseError';
    this.code = code;
    this.data = data;
  }
}

type Id = number | string;

interface Message {
  jsonrpc: '2.0';
  id?: Id | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

type NotificationHandler = (params: any) => void;
type RequestHandler = (params: any) => unknown;

const HEADER_END = Buffer.from('\r\n\r\n');
const MAX_HEADER = 64 * 1024;

/** Splits a byte stream into LSP frames; feed it chunks, it calls `onMessage` for each body. */
export class FrameReader {
  private buffer: Buffer = Buffer.alloc(0);
  private length: number | undefined;

  constructor(
    private readonly onMessage: (body: string) => void,
    private readonly onError: (error: Error) => void,
  ) {}

  push(chunk: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    for (;;) {
      if (this.length === undefined) {
        const end = this.buffer.indexOf(HEADER_END);
        if (end < 0) {
          if (this.buffer.length > MAX_HEADER) {
            this.onError(new Error('LSP header too long'));
            this.buffer = Buffer.alloc(0);
          }
          return;
        }
        const header = this.buffer.subarray(0, end).toString('ascii');
        this.buffer = this.buffer.subarray(end + HEADER_END.length);
        const match = /^content-length:\s*(\d+)\s*$/im.exec(header);
        if (!match) {
          this.onError(new Error(`LSP frame without Content-Length: ${JSON.stringify(header)}`));
          continue;
        }
        this.length = Number(match[1]);
      }
      if (this.buffer.length < this.length) {
        return;
      }
      const body = this.buffer.subarray(0, this.length).toString('utf8');
      this.buffer = this.buffer.subarray(this.length);
      this.length = undefined;
      this.onMessage(body);
    }
  }
}

export function frame(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]);
}

/** One JSON-RPC connection over a readable (the peer's output) and a writable (its input). */
export class Connection implements Disposable {
  private nextId = 1;
  private closed = false;
  private readonly pending = new Map<Id, { resolve: (v: unknown) => void; reject: (e: Error) => void; method: string }>();
  private readonly notificationHandlers = new Map<string, NotificationHandler>();
  private readonly requestHandlers = new Map<string, RequestHandler>();
  private readonly errorEmitter = new Emitter<Error>();
  private readonly closeEmitter = new Emitter<void>();
  readonly onError: Event<Error> = this.errorEmitter.event;
  readonly onClose: Event<void> = this.closeEmitter.event;

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
  ) {}

  /** Start reading. */
  listen(): void {
    const reader = new FrameReader(
      (body) => this.receive(body),
      (error) => this.errorEmitter.fire(error),
    );
    this.input.on('data', (chunk: Buffer | string) => reader.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    this.input.on('end', () => this.close(new Error('the connection closed')));
    this.input.on('close', () => this.close(new Error('the connection closed')));
    this.input.on('error', (error) => this.errorEmitter.fire(error));
    this.output.on('error', (error) => {
      // EPIPE after the peer died: reported, and pending requests fail below.
      this.errorEmitter.fire(error);
      this.close(error);
    });
  }

  onNotification(method: string, handler: NotificationHandler): void {
    this.notificationHandlers.set(method, handler);
  }

  onRequest(method: string, handler: RequestHandler): void {
    this.requestHandlers.set(method, handler);
  }

  sendNotification(method: string, params?: unknown): Promise<void> {
    return this.write(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
  }

  /** A request; with `token`, cancelling sends $/cancelRequest and the peer's answer settles it. */
  sendRequest<R>(method: string, params?: unknown, token?: CancellationToken): Promise<R> {
    if (this.closed) {
      return Promise.reject(new Error(`the connection is closed (${method})`));
    }
    const id = this.nextId++;
    return new Promise<R>((resolve, reject) => {
      let subscription: Disposable | undefined;
      const done = () => subscription?.dispose();
      this.pending.set(id, {
        resolve: (value) => {
          done();
          resolve(value as R);
        },
        reject: (error) => {
          done();
          reject(error);
        },
        method,
      });
      const message: Message = { jsonrpc: '2.0', id, method };
      if (params !== undefined) {
        message.params = params;
      }
      this.write(message).catch((error: Error) => this.settle(id, undefined, error));
      if (token) {
        const cancel = () => {
          if (this.pending.has(id)) {
            void this.sendNotification('$/cancelRequest', { id }).catch(() => undefined);
          }
        };
        if (token.isCancellationRequested) {
          cancel();
        } else {
          subscription = token.onCancellationRequested(cancel);
        }
      }
    });
  }

  dispose(): void {
    this.close(new Error('the connection was disposed'));
    this.errorEmitter.dispose();
    this.closeEmitter.dispose();
  }

  private close(error: Error): void {
    if (this.closed) {
      return;
    }
    this.closed = true;
    for (const [id] of this.pending) {
      this.settle(id, undefined, error);
    }
    this.closeEmitter.fire();
  }

  private settle(id: Id, result: unknown, error?: Error): void {
    const waiter = this.pending.get(id);
    if (!waiter) {
      return;
    }
    this.pending.delete(id);
    if (error) {
      waiter.reject(error);
    } else {
      waiter.resolve(result);
    }
  }

  private write(message: Message): Promise<void> {
    if (this.closed || this.output.destroyed || this.output.writableEnded) {
      return Promise.reject(new Error('the connection is closed'));
    }
    return new Promise<void>((resolve, reject) => {
      this.output.write(frame(message), (error) => (error ? reject(error) : resolve()));
    });
  }

  private receive(body: string): void {
    let message: Message;
    try {
      message = JSON.parse(body) as Message;
    } catch (error) {
      this.errorEmitter.fire(new Error(`a frame that is not JSON: ${(error as Error).message}`));
      return;
    }
    if (typeof message !== 'object' || message === null) {
      return;
    }
    if (typeof message.method === 'string') {
      if (message.id === undefined || message.id === null) {
        this.notificationHandlers.get(message.method)?.(message.params);
      } else {
        void this.answer(message.id, message.method, message.params);
      }
      return;
    }
    if (message.id !== undefined && message.id !== null) {
      const error = message.error;
      this.settle(
        message.id,
        message.result ?? null,
        error ? new ResponseError(error.code, error.message, error.data) : undefined,
      );
    }
  }

  private async answer(id: Id, method: string, params: unknown): Promise<void> {
    const handler = this.requestHandlers.get(method);
    let reply: Message;
    if (!handler) {
      reply = { jsonrpc: '2.0', id, error: { code: -32601, message: `unhandled method ${method}` } };
    } else {
      try {
        reply = { jsonrpc: '2.0', id, result: (await handler(params)) ?? null };
      } catch (error) {
        const code = error instanceof ResponseError ? error.code : -32603;
        reply = { jsonrpc: '2.0', id, error: { code, message: (error as Error).message ?? String(error) } };
      }
    }
    await this.write(reply).catch((error: Error) => this.errorEmitter.fire(error));
  }
}
