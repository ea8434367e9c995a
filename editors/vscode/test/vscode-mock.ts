/**
 * A small stand-in for the `vscode` module, bundled in place of it for the unit tests (see
 * scripts/build.mjs). It covers what the view adapters and the status bar touch; it records status
 * bar items, messages and executed commands so tests can look at them.
 */

type Listener<T> = (e: T) => unknown;

export class Disposable {
  constructor(private readonly fn: () => void = () => undefined) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.add(listener);
    return new Disposable(() => this.listeners.delete(listener));
  };
  fire(value: T): void {
    for (const l of [...this.listeners]) {
      l(value);
    }
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class ThemeIcon {
  constructor(
    readonly id: string,
    readonly color?: ThemeColor,
  ) {}
}

export interface TreeItemLabel {
  label: string;
  highlights?: [number, number][];
}

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: unknown;
  iconPath?: unknown;
  contextValue?: string;
  resourceUri?: Uri;
  command?: { command: string; title: string; arguments?: unknown[] };
  constructor(
    public label: string | TreeItemLabel,
    public collapsibleState: TreeItemCollapsibleState = TreeItemCollapsibleState.None,
  ) {}
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly authority: string,
    readonly path: string,
    readonly query: string,
    readonly fragment: string,
  ) {}
  static from(c: { scheme: string; authority?: string; path?: string; query?: string; fragment?: string }): Uri {
    return new Uri(c.scheme, c.authority ?? '', c.path ?? '', c.query ?? '', c.fragment ?? '');
  }
  static parse(text: string): Uri {
    const m = /^([a-z][\w+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/i.exec(text);
    if (!m) {
      throw new Error(`bad uri ${text}`);
    }
    return new Uri(m[1]!, m[2] ?? '', decodeURIComponent(m[3] ?? ''), m[4] ?? '', m[5] ?? '');
  }
  static file(path: string): Uri {
    return new Uri('file', '', path, '', '');
  }
  get fsPath(): string {
    return this.path;
  }
  toString(): string {
    return `${this.scheme}:${this.authority ? `//${this.authority}` : ''}${this.path}${this.query ? `?${this.query}` : ''}`;
  }
}

export class FileDecoration {
  propagate?: boolean;
  constructor(
    public badge?: string,
    public tooltip?: string,
    public color?: ThemeColor,
  ) {}
}

export interface StatusBarItem {
  id: string;
  name?: string;
  text: string;
  tooltip?: string;
  command?: string;
  backgroundColor?: ThemeColor;
  visible: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

/** What the mock recorded. */
export const recorded = {
  statusBarItems: [] as StatusBarItem[],
  messages: [] as { level: 'info' | 'warning' | 'error'; text: string }[],
  commands: [] as { id: string; args: unknown[] }[],
  config: new Map<string, unknown>(),
};

const registered = new Map<string, (...args: unknown[]) => unknown>();

export const window = {
  createStatusBarItem(id: string, _alignment?: StatusBarAlignment, _priority?: number): StatusBarItem {
    const item: StatusBarItem = {
      id,
      text: '',
      visible: false,
      show() {
        this.visible = true;
      },
      hide() {
        this.visible = false;
      },
      dispose() {
        this.visible = false;
      },
    };
    recorded.statusBarItems.push(item);
    return item;
  },
  showInformationMessage(text: string): Promise<undefined> {
    recorded.messages.push({ level: 'info', text });
    return Promise.resolve(undefined);
  },
  showWarningMessage(text: string): Promise<undefined> {
    recorded.messages.push({ level: 'warning', text });
    return Promise.resolve(undefined);
  },
  showErrorMessage(text: string): Promise<undefined> {
    recorded.messages.push({ level: 'error', text });
    return Promise.resolve(undefined);
  },
  setStatusBarMessage(text: string): Disposable {
    recorded.messages.push({ level: 'info', text });
    return new Disposable();
  },
};

export const commands = {
  registerCommand(id: string, fn: (...args: unknown[]) => unknown): Disposable {
    registered.set(id, fn);
    return new Disposable(() => registered.delete(id));
  },
  async executeCommand(id: string, ...args: unknown[]): Promise<unknown> {
    recorded.commands.push({ id, args });
    return registered.get(id)?.(...args);
  },
};

export interface WorkspaceConfiguration {
  get<T>(key: string, defaultValue?: T): T | undefined;
}

export const workspace = {
  getConfiguration(section?: string): WorkspaceConfiguration {
    return {
      get<T>(key: string, defaultValue?: T): T | undefined {
        const full = section ? `${section}.${key}` : key;
        return recorded.config.has(full) ? (recorded.config.get(full) as T) : defaultValue;
      },
    };
  },
  onDidChangeConfiguration(_listener: Listener<unknown>): Disposable {
    return new Disposable();
  },
  onDidCloseTextDocument(_listener: Listener<unknown>): Disposable {
    return new Disposable();
  },
  workspaceFolders: undefined as undefined | { uri: Uri }[],
};

export const languages = {
  async setTextDocumentLanguage<T>(doc: T, _language: string): Promise<T> {
    return doc;
  },
};

export const env = {
  clipboard: {
    text: '',
    async writeText(text: string) {
      this.text = text;
    },
  },
};
