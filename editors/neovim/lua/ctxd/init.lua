--- ctxd.nvim: the live conversation tree, the compaction status and the actions of the ctxd daemon.
---
--- Public API (see :h ctxd-api): setup(), statusline(), sessions(), open_tree(), compact(),
--- preview(), context(), ledger(), status(), stop(), restart(), request(), current_session(), usage().

local M = {}
local H = {}

M.version = '0.1.0'

--- The configuration in force (after setup(); the defaults before).
M.config = nil

local function client() return require('ctxd.client') end
local function config() return require('ctxd.config') end

-- --- setup ----------------------------------------------------------------------------------------

--- Configure ctxd.nvim. Safe to call again: the new options replace the old ones (merged over the
--- defaults), nothing is defined twice, and a daemon started with other options is stopped (the
--- next command starts it anew).
---@param opts table|nil see |ctxd-config|
function M.setup(opts)
  local cfg = config().validate(opts) -- raises '(ctxd) option `x` must be ...'
  config().set(cfg)
  M.config = cfg
  H.define_highlights()
  H.create_autocmds()
  local key = config().daemon_key(cfg)
  if H.daemon_key ~= nil and H.daemon_key ~= key and client().state.status ~= 'stopped' then client().stop() end
  H.daemon_key = key
  H.setup_done = true
end

function H.ensure_setup()
  if not H.setup_done then M.setup() end
end

--- Highlight groups, linked to built-in groups (`default = true`: a colorscheme or the user wins).
M.highlights = {
  CtxdTitle = 'Title', -- the tree's first line (session name)
  CtxdHeader = 'Comment', -- the tree's second line (usage, entries)
  CtxdActivePath = 'Identifier', -- the mark of an entry on the active path
  CtxdLeaf = 'Search', -- the leaf's line
  CtxdOffPath = 'Comment', -- entries off the active path
  CtxdRole = 'Type', -- the role of an entry
  CtxdCompaction = 'Special', -- compaction and branch summary entries
  CtxdTokens = 'Number', -- token counts
  CtxdLabel = 'Label', -- labels
  CtxdPinned = 'Special', -- the pin of a pinned message
  CtxdFold = 'Folded', -- runs the daemon collapsed
  CtxdCompacting = 'WarningMsg', -- for statuslines: a compaction runs
  -- :Ctxd usage (the float): one group per part of the context, the threshold, the timeline
  CtxdPartSystem = 'Statement',
  CtxdPartTools = 'PreProc',
  CtxdPartSummary = 'Special',
  CtxdPartPinned = 'Label',
  CtxdPartUser = 'String',
  CtxdPartAssistant = 'Function',
  CtxdPartThinking = 'Comment',
  CtxdPartToolCalls = 'Type',
  CtxdPartToolResults = 'Constant',
  CtxdPartImages = 'Character',
  CtxdPartCustom = 'Identifier',
  CtxdPartShell = 'Keyword',
  CtxdThreshold = 'WarningMsg', -- the threshold line, and timeline points above it
  CtxdReserve = 'NonText', -- the reserve, past the threshold
  CtxdFree = 'NonText', -- free space before the threshold
  CtxdSpark = 'Number', -- the timeline's sparkline
  CtxdMarker = 'Special', -- compaction, overflow and branch marks under it
}

function H.define_highlights()
  for group, link in pairs(M.highlights) do
    vim.api.nvim_set_hl(0, group, { link = link, default = true })
  end
end

function H.create_autocmds()
  local group = vim.api.nvim_create_augroup('Ctxd', { clear = true })
  vim.api.nvim_create_autocmd('ColorScheme', {
    group = group,
    callback = H.define_highlights,
    desc = 'ctxd: link highlight groups',
  })
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = group,
    callback = function() client().stop_sync(1000) end,
    desc = 'ctxd: stop the daemon',
  })
end

-- --- helpers --------------------------------------------------------------------------------------

function H.error(what, err)
  vim.notify('ctxd: ' .. what .. ': ' .. client().message(err), vim.log.levels.ERROR)
end

function H.format_session(s)
  local when = type(s.modified) == 'number' and os.date('%Y-%m-%d %H:%M', math.floor(s.modified)) or '?'
  if s.ctxd_copy then -- ctxd's copy of the transcript listed just above
    local label = s.ctxd_copy > 0 and '  ↳ earlier copy (ctxd archive)' or '  ↳ ctxd archive'
    return string.format('%s  (%s entries · %s)', label, tostring(s.entries or '?'), when)
  end
  local name = s.name
  if type(name) ~= 'string' or name == '' then name = s.title end
  if type(name) ~= 'string' or name == '' then name = vim.fn.fnamemodify(s.path, ':t') end
  if s.archived == true then
    name = name .. '  [ctxd archive]'
  elseif s.readOnly == true then -- another agent's session (Claude Code, Codex, opencode), read-only
    name = name .. '  [' .. (type(s.agent) == 'string' and s.agent or 'transcript') .. ' · read-only]'
  end
  local archived = type(s.archives) == 'table' and #s.archives > 0 and (' · ' .. #s.archives .. ' archived') or ''
  return string.format('%s  (%s entries · %s · %s%s)', name, tostring(s.entries or '?'), tostring(s.cwd or '?'), when, archived)
end

--- session/list's sessions in picker order: ctxd's archived copies of a Claude Code transcript right
--- after it (marked with `ctxd_copy`, their place in `archives`); a copy whose transcript is gone
--- stays where the listing put it.
function H.session_items(sessions)
  local by_path, nested = {}, {}
  for _, s in ipairs(sessions) do by_path[s.path] = s end
  for _, s in ipairs(sessions) do
    if s.archived == true and type(s.archiveOf) == 'string' and by_path[s.archiveOf] then nested[s.path] = true end
  end
  local items = {}
  for _, s in ipairs(sessions) do
    if not nested[s.path] then
      table.insert(items, s)
      for i, path in ipairs(type(s.archives) == 'table' and s.archives or {}) do
        local copy = by_path[path]
        if copy and nested[path] then table.insert(items, vim.tbl_extend('force', copy, { ctxd_copy = i - 1 })) end
      end
    end
  end
  return items
end

--- Open a session (session/open) and make it current; `cb(path)` gets its canonical path.
function H.open_session(ref, cb)
  client().request('session/open', { session = ref }, function(err, result)
    if err then
      H.error('session/open', err)
      return
    end
    client().set_current(result.path)
    cb(result.path)
  end)
end

--- The session to act on: opts.session, the tree under the cursor, the current one, the only one,
--- or the one the user picks.
function H.resolve(opts, cb)
  local session = opts.session or require('ctxd.tree').session_of(0) or client().state.current
  if session then
    if client().state.info[session] and client().is_running() then
      client().set_current(session)
      cb(session)
    else
      H.open_session(session, cb)
    end
    return
  end
  M.sessions({ on_choice = cb, auto = true })
end

-- --- the API --------------------------------------------------------------------------------------

--- The statusline text: `ctxd 112k/200k 56%`, `ctxd compacting…`, or '' (no I/O).
---@param opts table|nil { session = path }
function M.statusline(opts) return require('ctxd.statusline').get(opts) end

--- The current session's path, or nil.
function M.current_session() return client().state.current end

--- Send any request to the daemon; `cb(err, result)`.
function M.request(method, params, cb)
  H.ensure_setup()
  client().request(method, params, cb)
end

--- Pick a session with vim.ui.select; by default open its tree.
---@param opts table|nil { on_choice = fun(path), auto = pick the only session without asking }
function M.sessions(opts)
  H.ensure_setup()
  opts = opts or {}
  client().request('session/list', nil, function(err, result)
    if err then return H.error('session/list', err) end
    local sessions = H.session_items(result.sessions or {})
    if #sessions == 0 then
      vim.notify('ctxd: no sessions under ' .. table.concat(result.roots or {}, ', '), vim.log.levels.WARN)
      return
    end
    local function chosen(item)
      if not item then return end
      H.open_session(item.path, function(path)
        if opts.on_choice then
          opts.on_choice(path)
        else
          M.open_tree({ session = path })
        end
      end)
    end
    if opts.auto and #sessions == 1 then return chosen(sessions[1]) end
    vim.ui.select(sessions, { prompt = 'ctxd session', format_item = H.format_session, kind = 'ctxd.session' }, chosen)
  end)
end

--- Open the tree of a session (see H.resolve for which).
---@param opts table|nil { session = path or id, win = window, on_render = fun(buf) }
function M.open_tree(opts)
  H.ensure_setup()
  opts = opts or {}
  H.resolve(opts, function(path)
    require('ctxd.tree').open(path, { win = opts.win, on_render = opts.on_render })
  end)
end

--- Compact a session now.
---@param opts table|nil { session, instructions, leaf_id }
---@param cb fun(err, result)|nil
function M.compact(opts, cb)
  H.ensure_setup()
  opts = opts or {}
  H.resolve(opts, function(path)
    local params = { session = path, workDoneToken = client().progress_token(path) }
    if opts.instructions and opts.instructions ~= '' then params.instructions = opts.instructions end
    if opts.leaf_id then params.leafId = opts.leaf_id end
    client().request('compact', params, function(err, result)
      if err then H.error('compact', err) end
      if cb then cb(err, result) end
    end)
  end)
end

--- Preview a compaction (a dry run) in a scratch buffer.
function M.preview(opts, cb)
  H.ensure_setup()
  opts = opts or {}
  H.resolve(opts, function(path)
    local params = { session = path, dryRun = true }
    if opts.leaf_id then params.leafId = opts.leaf_id end
    client().request('compact', params, function(err, plan)
      local buf
      if err then
        vim.notify('ctxd: ' .. client().message(err), err.code == -31020 and vim.log.levels.WARN or vim.log.levels.ERROR)
      else
        buf = require('ctxd.views').preview(path, plan)
      end
      if cb then cb(err, plan, buf) end
    end)
  end)
end

--- The built context (what the model gets next) in a Markdown scratch buffer.
function M.context(opts, cb)
  H.ensure_setup()
  opts = opts or {}
  H.resolve(opts, function(path)
    local params = { session = path }
    if opts.leaf_id then params.leafId = opts.leaf_id end
    client().request('context/build', params, function(err, result)
      local buf
      if err then
        H.error('context/build', err)
      else
        buf = require('ctxd.views').context(path, result)
      end
      if cb then cb(err, result, buf) end
    end)
  end)
end

-- The ledger without session/ledger: compaction rows of the tree, then each entry.
function H.ledger_from_tree(path, cb)
  client().request('session/tree', { session = path, collapse = 0 }, function(err, tree)
    if err then return cb(err) end
    local rows = vim.tbl_filter(function(r) return r.type == 'compaction' end, tree.rows or {})
    local out, left = {}, #rows
    if left == 0 then return cb(nil, out) end
    for i, row in ipairs(rows) do
      client().request('session/entry', { session = path, entryId = row.id }, function(e, info)
        local entry = (info or {}).entry or {}
        local ledger = type(entry.details) == 'table' and type(entry.details.ctxd) == 'table' and entry.details.ctxd or {}
        out[#rows - i + 1] = {
          entryId = row.id,
          line = row.line,
          timestamp = entry.timestamp or row.timestamp,
          trigger = ledger.trigger,
          tokensBefore = entry.tokensBefore,
          tokensAfter = ledger.tokensAfter,
          summarizer = ledger.summarizer,
          instructions = ledger.instructions,
          model = ledger.model,
          path = ledger.path,
          cost = ledger.cost,
          durationMs = ledger.durationMs,
          failures = ledger.failures or {},
          firstKeptEntryId = entry.firstKeptEntryId,
          onActivePath = row.onActivePath,
          summaryPreview = type(entry.summary) == 'string' and vim.trim(entry.summary:gsub('%s+', ' ')):sub(1, 200) or nil,
          error = e,
        }
        left = left - 1
        if left == 0 then cb(nil, out) end
      end)
    end
  end)
end

--- What fills the context, in a float that follows the session (context/composition).
---@param opts table|nil { session }
---@param cb fun(err, composition, buf)|nil
function M.usage(opts, cb)
  H.ensure_setup()
  opts = opts or {}
  H.resolve(opts, function(path) require('ctxd.usage').open(path, cb) end)
end

--- The compaction ledger (newest first) in a Markdown scratch buffer.
function M.ledger(opts, cb)
  H.ensure_setup()
  opts = opts or {}
  H.resolve(opts, function(path)
    local function show(err, rows)
      local buf
      if err then
        H.error('ledger', err)
      else
        buf = require('ctxd.views').ledger(path, rows)
      end
      if cb then cb(err, rows, buf) end
    end
    if client().supports('session/ledger') then
      client().request('session/ledger', { session = path }, function(err, result)
        show(err, result and result.compactions or nil)
      end)
    else
      H.ledger_from_tree(path, show)
    end
  end)
end

--- The daemon's and the current session's state, as lines (also shown with vim.notify).
---@param opts table|nil { silent = true: do not notify }
---@return string[]
function M.status(opts)
  H.ensure_setup()
  opts = opts or {}
  local state = client().state
  local sl = require('ctxd.statusline')
  local lines = {}
  local server = state.server and string.format(' (%s %s)', state.server.name or 'ctxd', state.server.version or '?') or ''
  table.insert(lines, 'ctxd: daemon ' .. state.status .. server)
  if state.error then table.insert(lines, 'error: ' .. state.error) end
  table.insert(lines, 'command: ' .. table.concat(M.config.cmd, ' '))
  local session = state.current
  if session then
    local info = sl.info(session)
    table.insert(lines, 'session: ' .. session)
    local u = info.usage
    if u then
      table.insert(
        lines,
        string.format(
          'context: %s of %s tokens (%s%%), compaction due at %s',
          require('ctxd.views').thousands(u.tokens),
          require('ctxd.views').thousands(u.window),
          tostring(u.percent),
          require('ctxd.views').thousands(u.threshold)
        )
      )
    end
    local c = info.compaction
    if c then
      table.insert(
        lines,
        string.format(
          'last compaction: %s (%s) %s → %s tokens%s',
          c.state,
          tostring(c.trigger),
          sl.number(c.tokensBefore),
          sl.number(c.tokensAfter),
          c.error and (': ' .. c.error) or ''
        )
      )
    end
  else
    table.insert(lines, 'session: none (:Ctxd sessions)')
  end
  if not opts.silent then vim.notify(table.concat(lines, '\n')) end
  return lines
end

--- Stop the daemon (the next command starts it again).
function M.stop(done) client().stop(done) end

--- Stop the daemon and start it again; open trees are read again.
function M.restart()
  H.ensure_setup()
  client().stop(function()
    client().start()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if require('ctxd.tree').state(buf) then require('ctxd.tree').refresh(buf) end
    end
  end)
end

-- --- :Ctxd ----------------------------------------------------------------------------------------

M.subcommands = {
  sessions = function() M.sessions() end,
  tree = function(rest) M.open_tree({ session = rest ~= '' and vim.fn.expand(rest) or nil }) end,
  compact = function(rest) M.compact({ instructions = rest ~= '' and rest or nil }) end,
  preview = function() M.preview() end,
  context = function() M.context() end,
  ledger = function() M.ledger() end,
  status = function() M.status() end,
  stop = function() M.stop() end,
  restart = function() M.restart() end,
  usage = function() M.usage() end,
}

--- Run `:Ctxd {args}` (args as the user command gives them).
function M.command(args)
  H.ensure_setup()
  local text = type(args) == 'table' and args.args or tostring(args or '')
  local sub, rest = text:match('^%s*(%S+)%s*(.-)%s*$')
  sub = sub or 'tree'
  local fn = M.subcommands[sub]
  if not fn then
    local names = vim.tbl_keys(M.subcommands)
    table.sort(names)
    vim.notify(
      string.format("ctxd: unknown subcommand '%s' (expected one of: %s)", sub, table.concat(names, ', ')),
      vim.log.levels.ERROR
    )
    return
  end
  fn(rest or '')
end

--- Completion for `:Ctxd`.
function M.complete(arglead, cmdline, _)
  local words = vim.split(vim.trim(cmdline), '%s+')
  local completing_sub = #words == 1 or (#words == 2 and arglead ~= '')
  if completing_sub then
    local names = vim.tbl_keys(M.subcommands)
    table.sort(names)
    return vim.tbl_filter(function(n) return vim.startswith(n, arglead) end, names)
  end
  if words[2] == 'tree' then
    local out = {}
    for _, s in ipairs(client().state.sessions or {}) do
      if vim.startswith(s.path, arglead) then table.insert(out, s.path) end
    end
    table.sort(out)
    return out
  end
  return {}
end

return M
