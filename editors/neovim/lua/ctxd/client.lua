--- The connection to the ctxd daemon: spawn, handshake, requests, notifications and the state
--- that the statusline and the views read.
---
--- Why `vim.lsp.rpc.start` and not `vim.lsp.start`: ctxd speaks LSP framing and the LSP
--- lifecycle, but it is not a language server for any buffer. `vim.lsp.start` would attach a client
--- to buffers, send them textDocument/didOpen, fire the user's LspAttach autocommands (keymaps,
--- completion, ...) and list ctxd among the buffer's language servers. `vim.lsp.rpc.start` is the
--- plain JSON-RPC transport underneath: this module does the initialize/initialized/shutdown/exit
--- handshake itself and routes ctxd's notifications through `dispatchers.notification`.

local M = {}
local H = {}

--- Everything known about the daemon and the sessions, updated from results and notifications.
--- Read it, never write it from outside: the statusline reads only this (no I/O).
M.state = {
  status = 'stopped', -- 'stopped' | 'starting' | 'running' | 'failed'
  error = nil, -- why it failed, when it did
  server = nil, -- serverInfo from initialize: { name, version }
  methods = {}, -- method name -> true, from capabilities.experimental.ctxd.methods
  current = nil, -- the current session's path
  sessions = nil, -- the last session/list result's sessions
  info = {}, -- path -> session/open result
  usage = {}, -- path -> context/usage payload
  compaction = {}, -- path -> last compaction/status payload
  progress = {}, -- path -> last $/progress value of a compaction we started
  deleted = {}, -- path -> true once session/didDelete said so
}

H.rpc = nil -- the vim.lsp.rpc client
H.generation = 0 -- bumps on every start, so that a dead daemon's callbacks are ignored
H.queue = {} -- requests waiting for the handshake
H.pending = {} -- our id -> callback, for requests sent and not answered
H.next_id = 0
H.listeners = {}
H.tokens = {} -- workDoneToken -> session path
H.stopping = false

-- --- events ---------------------------------------------------------------------------------------

--- Subscribe to every notification (after the state is updated). Returns an unsubscribe function.
---@param fn fun(method: string, params: table)
function M.subscribe(fn)
  H.listeners[fn] = true
  return function() H.listeners[fn] = nil end
end

--- Fire `User CtxdUpdated` (the statusline may have changed).
---@param kind string what changed
---@param session string|nil
function M.changed(kind, session)
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'CtxdUpdated',
    modeline = false,
    data = { kind = kind, session = session },
  })
end

function H.notify(msg, level) vim.notify('ctxd: ' .. msg, level or vim.log.levels.INFO) end

-- --- lifecycle ------------------------------------------------------------------------------------

local function config() return require('ctxd.config').options end

--- Start the daemon unless it runs or starts already. Requests queue until the handshake is done.
function M.start()
  if H.rpc ~= nil and (M.state.status == 'running' or M.state.status == 'starting') then return true end
  local cfg = config()
  local cmd = cfg.cmd
  if vim.fn.executable(cmd[1]) ~= 1 then
    H.failed(
      string.format("`%s` is not executable; set `cmd` in require('ctxd').setup() (see :h ctxd-config)", cmd[1])
    )
    return false
  end
  H.generation = H.generation + 1
  local generation = H.generation
  H.stopping = false
  M.state.status = 'starting'
  M.state.error = nil
  -- What an earlier daemon said may no longer hold (another window, other options).
  M.state.usage, M.state.info, M.state.compaction, M.state.progress = {}, {}, {}, {}
  local dispatchers = {
    notification = function(method, params)
      if generation == H.generation then H.on_notification(method, params) end
    end,
    server_request = function(method, params) return H.on_server_request(method, params) end,
    on_exit = function(code, signal)
      vim.schedule(function()
        if generation == H.generation then H.on_exit(code, signal) end
      end)
    end,
    on_error = function(code, err)
      if generation == H.generation then
        H.notify(string.format('connection error %s: %s', tostring(code), vim.inspect(err)), vim.log.levels.WARN)
      end
    end,
  }
  local env = nil
  if cfg.cmd_env then env = vim.tbl_map(tostring, cfg.cmd_env) end
  local ok, rpc = pcall(vim.lsp.rpc.start, cmd, dispatchers, { cwd = cfg.cmd_cwd, env = env })
  if not ok then
    H.failed('could not start ' .. table.concat(cmd, ' ') .. ': ' .. tostring(rpc))
    return false
  end
  H.rpc = rpc
  local params = {
    processId = vim.fn.getpid(),
    clientInfo = { name = 'ctxd.nvim', version = require('ctxd').version },
    rootUri = vim.NIL,
    capabilities = { window = { workDoneProgress = true } },
    initializationOptions = require('ctxd.config').init_options(cfg),
  }
  rpc.request('initialize', params, function(err, result)
    if generation ~= H.generation then return end
    if err then
      H.failed('initialize failed: ' .. H.message(err))
      return
    end
    local caps = (result or {}).capabilities or {}
    local ctxd = (caps.experimental or {}).ctxd or {}
    M.state.server = result.serverInfo or { name = 'ctxd', version = ctxd.version }
    M.state.methods = {}
    for _, m in ipairs(ctxd.methods or {}) do
      M.state.methods[m] = true
    end
    M.state.status = 'running'
    rpc.notify('initialized', vim.empty_dict())
    local queue = H.queue
    H.queue = {}
    for _, item in ipairs(queue) do
      H.send(item.method, item.params, item.callback)
    end
    M.changed('started')
  end)
  M.changed('starting')
  return true
end

function H.failed(reason)
  if H.rpc ~= nil then
    local rpc = H.rpc
    H.rpc = nil
    H.generation = H.generation + 1 -- whatever the old daemon still says is ignored
    pcall(rpc.terminate)
  end
  H.flush_pending(reason)
  M.state.status = 'failed'
  M.state.error = reason
  local queue = H.queue
  H.queue = {}
  for _, item in ipairs(queue) do
    item.callback({ code = -32099, message = reason }, nil)
  end
  H.notify(reason, vim.log.levels.ERROR)
  M.changed('failed')
end

function H.flush_pending(reason)
  local pending = H.pending
  H.pending = {}
  for _, cb in pairs(pending) do
    pcall(cb, { code = -32099, message = reason }, nil)
  end
end

function H.on_exit(code, signal)
  H.rpc = nil
  local reason = string.format('the daemon exited (code %s, signal %s)', tostring(code), tostring(signal))
  H.flush_pending(reason)
  if H.stopping or (M.state.status == 'stopped') then
    M.state.status = 'stopped'
    M.changed('stopped')
    return
  end
  H.failed(reason .. '; its stderr is in ' .. vim.lsp.get_log_path())
end

--- Stop the daemon politely (shutdown, exit), then for sure. `done` runs when it is gone.
---@param done fun()|nil
function M.stop(done)
  local rpc = H.rpc
  if rpc == nil then
    M.state.status = 'stopped'
    if done then done() end
    return
  end
  H.stopping = true
  M.state.status = 'stopped'
  local generation = H.generation
  local finished = false
  local function finish()
    if finished then return end
    finished = true
    if not rpc.is_closing() then rpc.terminate() end
    -- A new daemon may have started meanwhile: leave its requests alone.
    if H.generation == generation then
      H.rpc = nil
      H.flush_pending('the daemon was stopped')
      local queue = H.queue
      H.queue = {}
      for _, item in ipairs(queue) do
        item.callback({ code = -32099, message = 'the daemon was stopped' }, nil)
      end
      M.changed('stopped')
    end
    if done then done() end
  end
  local ok = pcall(rpc.request, 'shutdown', vim.NIL, function()
    pcall(rpc.notify, 'exit', vim.NIL)
    vim.defer_fn(finish, 200)
  end)
  if not ok then finish() end
  vim.defer_fn(finish, 2000) -- a daemon that does not answer is terminated anyway
end

--- Stop and wait (for VimLeavePre and tests).
function M.stop_sync(timeout)
  local done = false
  M.stop(function() done = true end)
  vim.wait(timeout or 3000, function() return done end, 10)
end

function M.is_running() return M.state.status == 'running' end

--- Does the daemon implement `method`? (Known only once it runs.)
function M.supports(method) return M.state.methods[method] == true end

-- --- requests -------------------------------------------------------------------------------------

function H.message(err)
  if type(err) == 'table' then return tostring(err.message or vim.inspect(err)) end
  return tostring(err)
end
M.message = H.message

function H.send(method, params, callback)
  H.next_id = H.next_id + 1
  local id = H.next_id
  H.pending[id] = callback
  local ok, sent = pcall(H.rpc.request, method, params, function(err, result)
    local cb = H.pending[id]
    H.pending[id] = nil
    if cb then cb(err, result) end
  end)
  if not ok or not sent then
    H.pending[id] = nil
    callback({ code = -32099, message = 'could not send ' .. method .. ' to the daemon' }, nil)
  end
end

--- Send a request; `callback(err, result)` runs on the main loop. Starts the daemon if needed,
--- unless `opts.start` is false (background work must not bring a stopped daemon back).
---@param method string
---@param params table|nil
---@param callback fun(err: table|nil, result: any)|nil
---@param opts table|nil { start = boolean }
function M.request(method, params, callback, opts)
  callback = callback or function(err)
    if err then H.notify(method .. ': ' .. H.message(err), vim.log.levels.ERROR) end
  end
  if params == nil or (type(params) == 'table' and next(params) == nil) then params = vim.empty_dict() end
  local wrapped = function(err, result)
    if err == nil and type(result) == 'table' then H.on_result(method, params, result) end
    callback(err, result)
  end
  if M.state.status == 'starting' and H.rpc ~= nil then
    table.insert(H.queue, { method = method, params = params, callback = wrapped })
    return
  end
  if M.state.status ~= 'running' then
    if opts and opts.start == false then
      wrapped({ code = -32099, message = 'the daemon is ' .. M.state.status }, nil)
      return
    end
    if not M.start() then
      wrapped({ code = -32099, message = M.state.error or 'the daemon is not running' }, nil)
      return
    end
    if M.state.status ~= 'running' then
      table.insert(H.queue, { method = method, params = params, callback = wrapped })
      return
    end
  end
  H.send(method, params, wrapped)
end

--- Send a request and wait for its answer. Returns result, err.
function M.request_sync(method, params, timeout)
  local done, res, e = false, nil, nil
  M.request(method, params, function(err, result)
    done, res, e = true, result, err
  end)
  if not vim.wait(timeout or config().request_timeout, function() return done end, 10) then
    return nil, { code = -32098, message = method .. ' timed out' }
  end
  return res, e
end

--- A fresh progress token for a compaction of `session`.
function M.progress_token(session)
  H.next_id = H.next_id + 1
  local token = 'ctxd.nvim-' .. H.next_id
  H.tokens[token] = session
  return token
end

-- Results that carry state worth keeping.
function H.on_result(method, params, result)
  if method == 'session/list' then
    M.state.sessions = result.sessions
  elseif method == 'session/open' then
    M.state.info[result.path] = result
    M.state.deleted[result.path] = nil
    if result.usage then H.set_usage(result.usage) end
  elseif method == 'session/stats' and result.usage then
    H.set_usage(result.usage)
  end
end

function H.set_usage(usage)
  if type(usage) ~= 'table' or not usage.session then return end
  local old = M.state.usage[usage.session]
  M.state.usage[usage.session] = usage
  if old == nil or old.tokens ~= usage.tokens or old.window ~= usage.window or old.leafId ~= usage.leafId then
    M.changed('usage', usage.session)
  end
end

--- Make `path` the current session.
function M.set_current(path)
  if M.state.current == path then return end
  M.state.current = path
  M.changed('session', path)
end

-- --- from the daemon ------------------------------------------------------------------------------

H.log_levels = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }

function H.on_notification(method, params)
  params = params or {}
  local session = params.session
  if method == 'context/usage' then
    H.set_usage(params)
  elseif method == 'compaction/status' then
    M.state.compaction[session] = params
    if params.state ~= 'running' then M.state.progress[session] = nil end
    H.report_compaction(params)
    M.changed('compaction', session)
  elseif method == 'session/didChange' then
    M.state.deleted[session] = nil
    if params.leafId and M.state.info[session] then M.state.info[session].leafId = params.leafId end
    M.changed('change', session)
  elseif method == 'session/didCreate' then
    M.state.deleted[session] = nil
    H.forget_list()
    M.changed('create', session)
  elseif method == 'session/didDelete' then
    M.state.deleted[session] = true
    M.state.usage[session] = nil
    H.forget_list()
    M.changed('delete', session)
  elseif method == '$/progress' then
    local path = H.tokens[params.token]
    if path then
      local value = params.value or {}
      if value.kind == 'end' then
        H.tokens[params.token] = nil
        M.state.progress[path] = nil
      else
        M.state.progress[path] = value
      end
      M.changed('progress', path)
    end
  elseif method == 'window/logMessage' or method == 'window/showMessage' then
    local level = H.log_levels[params.type] or vim.log.levels.INFO
    if level <= vim.log.levels.WARN or method == 'window/showMessage' then H.notify(tostring(params.message), level) end
  end
  for fn in pairs(H.listeners) do
    local ok, err = pcall(fn, method, params)
    if not ok then H.notify('listener failed on ' .. method .. ': ' .. tostring(err), vim.log.levels.ERROR) end
  end
end

function H.forget_list()
  -- The cached list is stale; keep it for completion but mark it.
  if M.state.sessions then M.state.sessions.stale = true end
end

function H.report_compaction(s)
  if not config().notify_compaction or s.state == 'running' then return end
  local name = vim.fn.fnamemodify(s.session or '', ':t')
  if s.state == 'succeeded' then
    H.notify(
      string.format(
        'compacted %s (%s): %s → %s tokens%s',
        name,
        tostring(s.trigger),
        require('ctxd.statusline').number(s.tokensBefore),
        require('ctxd.statusline').number(s.tokensAfter),
        s.path and (' via ' .. s.path) or ''
      )
    )
  elseif s.state == 'failed' then
    H.notify(string.format('compaction of %s failed: %s', name, tostring(s.error)), vim.log.levels.WARN)
  else
    H.notify(string.format('compaction of %s %s', name, s.state))
  end
end

function H.on_server_request(method, _)
  if method == 'window/workDoneProgress/create' then return vim.NIL end
  if method == 'compact/willRun' then return vim.NIL end -- not declared; answer "no opinion"
  return nil, { code = -32601, message = 'ctxd.nvim does not handle ' .. method }
end

return M
