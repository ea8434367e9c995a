--- The tree buffer: one line per entry of a session, live.
---
--- The daemon sends every row (`collapse = 0`); long linear runs are folded here with manual folds,
--- so that zo/zc/zR/zM work as everywhere and a fold the user opened stays open when the tree is
--- redrawn after a change. The cursor stays on the entry it was on.

local M = {}
local H = {}

M.filetype = 'ctxd_tree'
M.ns = vim.api.nvim_create_namespace('ctxd_tree')
M.HEADER = 2 -- lines above the first row

H.trees = {} -- buf -> tree state
H.subscribed = false
-- The tree's autocommands (setup() owns the `Ctxd` group and clears it when called again).
H.group = vim.api.nvim_create_augroup('CtxdTree', { clear = true })

local function client() return require('ctxd.client') end
local function config() return require('ctxd.config').options end

-- --- finding trees --------------------------------------------------------------------------------

--- The tree buffer of a session, if there is one.
function M.buf_for(session)
  for buf, t in pairs(H.trees) do
    if t.session == session and vim.api.nvim_buf_is_valid(buf) then return buf end
  end
end

--- The state of a tree buffer (read-only; for the API and tests).
function M.state(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  return H.trees[buf]
end

--- The session of a tree buffer (the current buffer by default), or nil.
function M.session_of(buf)
  local t = M.state(buf)
  return t and t.session or nil
end

-- --- opening --------------------------------------------------------------------------------------

--- Open (or focus) the tree of `session` (a canonical path from session/open).
---@param session string
---@param opts table|nil { win = window to show it in, on_render = fun(buf) }
---@return integer buf
function M.open(session, opts)
  opts = opts or {}
  H.subscribe()
  local buf = M.buf_for(session)
  if not buf then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, 'ctxd://tree/' .. session)
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'hide'
    vim.bo[buf].swapfile = false
    vim.bo[buf].modifiable = false
    vim.bo[buf].undolevels = -1
    H.trees[buf] = { session = session, open_folds = {}, folds = {}, line_rows = {}, id_line = {}, renders = 0 }
    vim.bo[buf].filetype = M.filetype
    H.set_mappings(buf)
    vim.api.nvim_create_autocmd('BufWinEnter', {
      group = H.group,
      buffer = buf,
      callback = function()
        local win = vim.api.nvim_get_current_win()
        H.window_options(win)
        H.apply_folds(buf, { win })
      end,
    })
    vim.api.nvim_create_autocmd('BufWipeout', {
      group = H.group,
      buffer = buf,
      callback = function() H.trees[buf] = nil end,
    })
    H.render(buf)
  end
  H.show(buf, opts.win)
  local t = H.trees[buf]
  if opts.on_render then t.waiters = t.waiters or {}; table.insert(t.waiters, opts.on_render) end
  M.refresh(buf)
  return buf
end

function H.show(buf, win)
  if win and vim.api.nvim_win_is_valid(win) then
    vim.api.nvim_win_set_buf(win, buf)
    vim.api.nvim_set_current_win(win)
    return
  end
  local tab_wins = vim.api.nvim_tabpage_list_wins(0)
  for _, w in ipairs(vim.fn.win_findbuf(buf)) do
    if vim.tbl_contains(tab_wins, w) then
      vim.api.nvim_set_current_win(w)
      return
    end
  end
  local cfg = config().tree
  local cmd = ({
    left = 'topleft vertical %dsplit',
    right = 'botright vertical %dsplit',
    top = 'topleft %dsplit',
    bottom = 'botright %dsplit',
  })[cfg.position]
  if cmd then vim.cmd(string.format(cmd, cfg.size)) end
  vim.api.nvim_win_set_buf(0, buf)
  local w = vim.api.nvim_get_current_win()
  if cfg.position == 'left' or cfg.position == 'right' then vim.wo[w].winfixwidth = true end
  if cfg.position == 'top' or cfg.position == 'bottom' then vim.wo[w].winfixheight = true end
end

function H.window_options(win)
  local function set(name, value) vim.api.nvim_set_option_value(name, value, { scope = 'local', win = win }) end
  set('number', false)
  set('relativenumber', false)
  set('signcolumn', 'no')
  set('foldcolumn', '0')
  set('wrap', false)
  set('list', false)
  set('spell', false)
  set('cursorline', true)
  set('foldmethod', 'manual')
  set('foldenable', true)
  set('foldminlines', 1)
  set('foldtext', "v:lua.require'ctxd.tree'.foldtext()")
  set('fillchars', 'fold: ')
end

-- --- live updates ---------------------------------------------------------------------------------

function H.subscribe()
  if H.subscribed then return end
  H.subscribed = true
  client().subscribe(function(method, params)
    local buf = method == 'session/didChange' and params and params.session and M.buf_for(params.session)
    if buf then H.schedule_refresh(buf) end
  end)
  -- The header shows what the statusline shows: redraw it whenever that changes.
  vim.api.nvim_create_autocmd('User', {
    group = H.group,
    pattern = 'CtxdUpdated',
    callback = function(ev)
      local session = ev.data and ev.data.session
      local buf = session and M.buf_for(session)
      if buf and ev.data.kind ~= 'change' then H.render_header(buf) end
    end,
  })
end

function H.schedule_refresh(buf)
  local t = H.trees[buf]
  if not t or t.timer then return end
  t.timer = true
  vim.defer_fn(function()
    t.timer = nil
    if vim.api.nvim_buf_is_valid(buf) then H.refresh(buf, nil, false) end
  end, config().debounce_ms)
end

--- Read the session's tree again and redraw (starting the daemon if needed). `done(buf)` runs
--- after the redraw.
function M.refresh(buf, done)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  H.refresh(buf, done, true)
end

-- `start`: may start the daemon (a user's action) or not (background updates).
function H.refresh(buf, done, start)
  local t = H.trees[buf]
  if not t then return end
  if done then t.waiters = t.waiters or {}; table.insert(t.waiters, done) end
  if t.inflight then
    t.dirty = true
    return
  end
  t.inflight = true
  t.dirty = false
  client().request('session/tree', { session = t.session, collapse = 0 }, function(err, result)
    t.inflight = false
    if not vim.api.nvim_buf_is_valid(buf) or H.trees[buf] ~= t then return end
    if err then
      t.error = client().message(err)
    else
      t.error = nil
      t.data = result
      H.check_usage(t.session, result.leafId)
    end
    H.render(buf)
    if t.dirty then
      H.refresh(buf, nil, false)
      return
    end
    local waiters = t.waiters or {}
    t.waiters = nil
    for _, fn in ipairs(waiters) do
      pcall(fn, buf)
    end
  end, { start = start })
end

-- The daemon sends no context/usage after a branch (nor for a session it has just opened for a
-- tree after a restart): when the usage is unknown or of another leaf than the tree's, ask for it (session/open answers with the usage; the client keeps it).
function H.check_usage(session, leaf)
  local usage = client().state.usage[session]
  if leaf and (usage == nil or usage.leafId ~= leaf) then
    client().request('session/open', { session = session }, function() end, { start = false })
  end
end

-- --- rendering ------------------------------------------------------------------------------------

function H.marks(row)
  if row.isLeaf then return '▶' end
  return row.onActivePath and '●' or '○'
end

function H.hl_group(row)
  if row.type == 'compaction' or row.type == 'branch_summary' then return 'CtxdCompaction' end
  return 'CtxdRole'
end

--- One row as text and its highlights ({ col_start, col_end, group } in bytes).
function M.format_row(row)
  local indent = string.rep('  ', row.depth or 0)
  if row.type == 'collapsed' then
    local text = string.format('%s┄ %d entries', indent, row.count or 0)
    if type(row.tokens) == 'number' then text = text .. '  ' .. require('ctxd.statusline').number(row.tokens) .. ' tok' end
    return text, { { #indent, #text, 'CtxdFold' } }
  end
  local hls = {}
  local mark = H.marks(row)
  local text = indent .. mark
  local mark_group = row.isLeaf and 'CtxdLeaf' or (row.onActivePath and 'CtxdActivePath' or 'CtxdOffPath')
  table.insert(hls, { #indent, #text, mark_group })
  local role = string.format(' %-10s', tostring(row.role or row.type or '?'))
  table.insert(hls, { #text + 1, #text + #role, H.hl_group(row) })
  text = text .. role .. ' ' .. tostring(row.preview or '')
  if type(row.tokens) == 'number' and row.tokens > 0 then
    local tok = require('ctxd.statusline').number(row.tokens) .. ' tok'
    table.insert(hls, { #text + 2, #text + 2 + #tok, 'CtxdTokens' })
    text = text .. '  ' .. tok
  end
  if type(row.labels) == 'table' and #row.labels > 0 then
    local labels = '[' .. table.concat(row.labels, ', ') .. ']'
    table.insert(hls, { #text + 2, #text + 2 + #labels, 'CtxdLabel' })
    text = text .. '  ' .. labels
  end
  if row.pinned then
    -- Pinned: compactions carry it verbatim after their summary.
    local pin = '📌'
    table.insert(hls, { #text + 2, #text + 2 + #pin, 'CtxdPinned' })
    text = text .. '  ' .. pin
  end
  if row.isLeaf then
    table.insert(hls, 1, { 0, #text, 'CtxdLeaf' })
  elseif not row.onActivePath then
    table.insert(hls, 1, { 0, #text, 'CtxdOffPath' })
  end
  return text, hls
end

--- The name session/list gave a session (opencode names a session in its database, not by an entry).
function H.listed_name(session)
  for _, s in ipairs(client().state.sessions or {}) do
    if s.path == session and type(s.name) == 'string' and s.name ~= '' then return s.name end
  end
end

function H.header(t)
  local data = t.data or {}
  local info = client().state.info[t.session] or {}
  local name = data.name or info.name
  if name == nil or name == vim.NIL then name = H.listed_name(t.session) or vim.fn.fnamemodify(t.session, ':t') end
  local sl = require('ctxd.statusline')
  local i = sl.info(t.session)
  local parts = {}
  if i.deleted then
    table.insert(parts, 'deleted')
  elseif i.compacting then
    local stage = i.progress and i.progress.message
    table.insert(parts, 'compacting…' .. (stage and (' ' .. stage) or ''))
  elseif i.usage then
    table.insert(
      parts,
      string.format('%s/%s %d%%', sl.number(i.usage.tokens), sl.number(i.usage.window), math.floor((i.usage.percent or 0) + 0.5))
    )
  end
  if data.entries then table.insert(parts, data.entries .. ' entries') end
  if info.readOnly == true then table.insert(parts, (type(info.agent) == 'string' and info.agent or 'transcript') .. ' · read-only') end
  if t.error then table.insert(parts, 'error: ' .. t.error) end
  if t.data == nil and t.error == nil then table.insert(parts, 'loading…') end
  table.insert(parts, 'g? help')
  return { tostring(name), table.concat(parts, ' · ') }
end

-- Folds over linear runs: { first = row index, last = row index, key = first id }.
function M.compute_folds(rows, collapse, keep)
  local folds = {}
  if collapse <= 0 then return folds end
  local function close_run(run)
    if #run <= collapse then return end
    local hidden = {}
    local function flush()
      if #hidden >= 2 then
        table.insert(folds, { first = hidden[1], last = hidden[#hidden], key = rows[hidden[1]].id })
      end
      hidden = {}
    end
    for k, idx in ipairs(run) do
      local row = rows[idx]
      local shown = k <= keep
        or k > #run - keep
        or row.isLeaf
        or (type(row.labels) == 'table' and #row.labels > 0)
        or row.type == 'compaction'
        or row.type == 'branch_summary'
      if shown then
        flush()
      else
        table.insert(hidden, idx)
      end
    end
    flush()
  end
  local run = {}
  for i, row in ipairs(rows) do
    local prev = rows[i - 1]
    local continues = prev ~= nil
      and row.type ~= 'collapsed'
      and prev.type ~= 'collapsed'
      and prev.childCount == 1
      and prev.depth == row.depth
    if not continues then
      close_run(run)
      run = {}
    end
    if row.type ~= 'collapsed' then table.insert(run, i) end
  end
  close_run(run)
  return folds
end

function H.windows(buf)
  local out = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if vim.api.nvim_win_is_valid(win) then table.insert(out, win) end
  end
  return out
end

-- Remember which folds the user opened, where each window's cursor is (by entry), and its view.
function H.save(buf, t)
  local saved = {}
  for _, win in ipairs(H.windows(buf)) do
    vim.api.nvim_win_call(win, function()
      for _, f in ipairs(t.folds) do
        local lnum = M.HEADER + f.first
        if lnum <= vim.api.nvim_buf_line_count(buf) then
          t.open_folds[f.key] = vim.fn.foldclosed(lnum) == -1 or nil
        end
      end
      local view = vim.fn.winsaveview()
      local row = t.line_rows[view.lnum]
      saved[win] = { view = view, key = row and (row.id or ('collapsed:' .. tostring(row.firstId))) }
    end)
  end
  return saved
end

function H.restore(buf, t, saved)
  for win, s in pairs(saved) do
    if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_win_call(win, function()
        local lnum = s.view.lnum
        if s.key and t.id_line[s.key] then lnum = t.id_line[s.key] end
        lnum = math.max(1, math.min(lnum, vim.api.nvim_buf_line_count(buf)))
        local view = vim.deepcopy(s.view)
        view.topline = math.max(1, view.topline + (lnum - s.view.lnum))
        view.lnum = lnum
        vim.fn.winrestview(view)
      end)
    end
  end
end

function H.apply_folds(buf, wins)
  local t = H.trees[buf]
  if not t then return end
  for _, win in ipairs(wins or H.windows(buf)) do
    vim.api.nvim_win_call(win, function()
      if vim.wo.foldmethod ~= 'manual' then return end
      vim.cmd('silent! normal! zE')
      for _, f in ipairs(t.folds) do
        local first, last = M.HEADER + f.first, M.HEADER + f.last
        vim.cmd(string.format('silent! %d,%dfold', first, last))
        if t.open_folds[f.key] then vim.cmd(string.format('silent! %dfoldopen', first)) end
      end
    end)
  end
end

function H.render_header(buf)
  local t = H.trees[buf]
  if not t or not vim.api.nvim_buf_is_valid(buf) then return end
  local header = H.header(t)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, M.HEADER, false, header)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, M.HEADER)
  vim.api.nvim_buf_set_extmark(buf, M.ns, 0, 0, { end_col = #header[1], hl_group = 'CtxdTitle' })
  vim.api.nvim_buf_set_extmark(buf, M.ns, 1, 0, { end_col = #header[2], hl_group = 'CtxdHeader' })
end

function H.render(buf)
  local t = H.trees[buf]
  if not t then return end
  local saved = H.save(buf, t)
  local rows = (t.data and t.data.rows) or {}
  local lines, highlights = {}, {}
  t.line_rows, t.id_line = {}, {}
  for i, row in ipairs(rows) do
    local text, hls = M.format_row(row)
    lines[i] = text
    highlights[i] = hls
    local lnum = M.HEADER + i
    t.line_rows[lnum] = row
    t.id_line[row.id or ('collapsed:' .. tostring(row.firstId))] = lnum
  end
  local all = H.header(t)
  vim.list_extend(all, lines)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, all)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  vim.api.nvim_buf_set_extmark(buf, M.ns, 0, 0, { end_col = #all[1], hl_group = 'CtxdTitle' })
  vim.api.nvim_buf_set_extmark(buf, M.ns, 1, 0, { end_col = #all[2], hl_group = 'CtxdHeader' })
  for i, hls in ipairs(highlights) do
    for n, hl in ipairs(hls) do
      if hl[2] > hl[1] then
        vim.api.nvim_buf_set_extmark(buf, M.ns, M.HEADER + i - 1, hl[1], {
          end_col = hl[2],
          hl_group = hl[3],
          priority = n == 1 and (hl[3] == 'CtxdLeaf' or hl[3] == 'CtxdOffPath') and 150 or 200,
        })
      end
    end
  end
  local cfg = config().tree
  t.folds = M.compute_folds(rows, cfg.collapse, cfg.keep)
  H.apply_folds(buf)
  H.restore(buf, t, saved)
  t.renders = t.renders + 1
end

M._render = H.render -- for tests: redraw from the data in hand

--- The fold line: `┄ 7 entries · 862 tok`.
function M.foldtext()
  local buf = vim.api.nvim_get_current_buf()
  local t = H.trees[buf]
  local first, last = vim.v.foldstart, vim.v.foldend
  local tokens, indent = 0, ''
  if t then
    for lnum = first, last do
      local row = t.line_rows[lnum]
      if row and type(row.tokens) == 'number' then tokens = tokens + row.tokens end
    end
    local row = t.line_rows[first]
    indent = string.rep('  ', row and row.depth or 0)
  end
  return string.format('%s┄ %d entries · %s tok', indent, last - first + 1, require('ctxd.statusline').number(tokens))
end

-- --- actions --------------------------------------------------------------------------------------

--- The row under the cursor of the current (tree) window, and its session.
function M.current_row()
  local buf = vim.api.nvim_get_current_buf()
  local t = H.trees[buf]
  if not t then return nil end
  local lnum = vim.api.nvim_win_get_cursor(0)[1]
  return t.line_rows[lnum], t.session, lnum
end

function H.entry_or_warn()
  local row, session = M.current_row()
  if not row or not row.id then
    vim.notify('ctxd: put the cursor on an entry', vim.log.levels.WARN)
    return nil
  end
  return row, session
end

function H.fail(what)
  return function(err)
    if err then vim.notify('ctxd: ' .. what .. ': ' .. client().message(err), vim.log.levels.ERROR) end
    return err ~= nil
  end
end

M.actions = {}

function M.actions.open()
  local lnum = vim.api.nvim_win_get_cursor(0)[1]
  if vim.fn.foldclosed(lnum) ~= -1 then
    vim.cmd('normal! zo')
    return
  end
  local row, session = H.entry_or_warn()
  if not row then return end
  client().request('session/entry', { session = session, entryId = row.id }, function(err, result)
    if H.fail('session/entry')(err) then return end
    require('ctxd.views').entry(session, result)
  end)
end

function H.branch(summarize, instructions)
  local row, session = H.entry_or_warn()
  if not row then return end
  local params = { session = session, entryId = row.id, summarize = summarize }
  if instructions and instructions ~= '' then params.instructions = instructions end
  client().request('branch', params, function(err, result)
    if H.fail('branch')(err) then return end
    local msg = 'leaf moved to ' .. tostring(result.leafId)
    if result.summaryEntryId then msg = msg .. string.format(' (summary of %d entries)', result.summarizedEntries or 0) end
    vim.notify('ctxd: ' .. msg)
  end)
end

function M.actions.branch() H.branch(false) end

function M.actions.branch_summary()
  if not H.entry_or_warn() then return end
  vim.ui.input({ prompt = 'Branch summary instructions (optional): ' }, function(input)
    if input == nil then return end
    H.branch(true, input)
  end)
end

function M.actions.label()
  local row, session = H.entry_or_warn()
  if not row then return end
  vim.ui.input({ prompt = 'Label (empty clears): ', default = (row.labels or {})[1] or '' }, function(input)
    if input == nil then return end
    local params = { session = session, entryId = row.id }
    if input ~= '' then params.label = input end
    client().request('session/label', params, H.fail('session/label'))
  end)
end

--- Pin the message under the cursor, or unpin it if it is pinned (session/pin).
function M.actions.pin()
  local row, session = H.entry_or_warn()
  if not row then return end
  local pinned = not row.pinned
  client().request('session/pin', { session = session, entryId = row.id, pinned = pinned }, function(err)
    if H.fail('session/pin')(err) then return end
    vim.notify(string.format('ctxd: %s %s', pinned and 'pinned' or 'unpinned', row.id))
  end)
end

function M.actions.fork()
  local row, session = H.entry_or_warn()
  if not row then return end
  local win = vim.api.nvim_get_current_win()
  client().request('session/fork', { session = session, entryId = row.id }, function(err, result)
    if H.fail('session/fork')(err) then return end
    vim.notify('ctxd: forked to ' .. result.path)
    require('ctxd').open_tree({ session = result.path, win = vim.api.nvim_win_is_valid(win) and win or nil })
  end)
end

function M.actions.compact()
  local _, session = M.current_row()
  require('ctxd').compact({ session = session })
end

function M.actions.compact_instructions()
  local _, session = M.current_row()
  vim.ui.input({ prompt = 'Compaction instructions: ' }, function(input)
    if input == nil then return end
    require('ctxd').compact({ session = session, instructions = input ~= '' and input or nil })
  end)
end

function M.actions.preview()
  local _, session = M.current_row()
  require('ctxd').preview({ session = session })
end

function M.actions.context()
  local row, session = M.current_row()
  require('ctxd').context({ session = session, leaf_id = row and not row.isLeaf and row.id or nil })
end

function M.actions.ledger()
  local _, session = M.current_row()
  require('ctxd').ledger({ session = session })
end

function M.actions.refresh() M.refresh(0) end

function M.actions.close()
  if #vim.api.nvim_tabpage_list_wins(0) > 1 then
    vim.cmd('close')
  else
    local alt = vim.fn.bufnr('#')
    if alt > 0 and alt ~= vim.api.nvim_get_current_buf() and vim.api.nvim_buf_is_valid(alt) then
      vim.api.nvim_set_current_buf(alt)
    else
      vim.cmd('enew')
    end
  end
end

M.descriptions = {
  open = 'open the entry (or the fold) under the cursor',
  branch = 'branch here: move the leaf to this entry',
  branch_summary = 'branch here, summarizing the branch left behind',
  label = 'label the entry (empty clears)',
  pin = 'pin the message (or unpin it): compactions carry it verbatim',
  fork = 'fork: copy the path to this entry into a new session',
  compact = 'compact the session',
  compact_instructions = 'compact with instructions',
  preview = 'preview the compaction (dry run)',
  context = 'the context built up to this entry',
  ledger = 'the compaction ledger',
  refresh = 'read the tree again',
  close = 'close the tree window',
  help = 'this help',
}

function M.actions.help()
  local lines = { 'ctxd tree keys:' }
  local maps = config().tree.mappings
  local names = vim.tbl_keys(M.descriptions)
  table.sort(names)
  for _, name in ipairs(names) do
    if maps[name] then table.insert(lines, string.format('  %-6s %s', maps[name], M.descriptions[name])) end
  end
  table.insert(lines, '  zo/zc  open/close a folded run')
  vim.notify(table.concat(lines, '\n'))
end

function H.set_mappings(buf)
  for name, lhs in pairs(config().tree.mappings) do
    if lhs then
      vim.keymap.set('n', lhs, M.actions[name], { buffer = buf, nowait = true, silent = true, desc = 'ctxd: ' .. M.descriptions[name] })
    end
  end
end

return M
