--- `:Ctxd usage`: what fills a session's context, in a float: the window as a bar by part with the
--- threshold and the reserve, a bar per part, the heaviest entries and the timeline as a sparkline
--- with its compactions. It follows the session: each `context/compositionChanged` redraws it.
---
--- `M.lines(composition, width)` is pure (lines and highlights); `M.open(path)` shows them.

local M = {}
local H = {}

M.ns = vim.api.nvim_create_namespace('ctxd.usage')

--- The parts in bar order, with their label and highlight group (linked in init.lua).
M.parts = {
  { 'system', 'system prompt', 'CtxdPartSystem' },
  { 'tools', 'tools', 'CtxdPartTools' },
  { 'summary', 'summary', 'CtxdPartSummary' },
  { 'branchSummary', 'branch summaries', 'CtxdPartSummary' },
  { 'pinned', 'pinned', 'CtxdPartPinned' },
  { 'user', 'user', 'CtxdPartUser' },
  { 'assistant', 'assistant text', 'CtxdPartAssistant' },
  { 'thinking', 'thinking', 'CtxdPartThinking' },
  { 'toolCalls', 'tool calls', 'CtxdPartToolCalls' },
  { 'toolResults', 'tool results', 'CtxdPartToolResults' },
  { 'images', 'images', 'CtxdPartImages' },
  { 'custom', 'custom messages', 'CtxdPartCustom' },
  { 'bashExecution', 'shell runs', 'CtxdPartShell' },
}

M.sparks = { '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█' }

local function thousands(n) return require('ctxd.views').thousands(n) end

--- A line under construction: text pieces with their highlight groups (byte columns).
local Line = {}
Line.__index = Line

function H.line() return setmetatable({ text = '', marks = {} }, Line) end

function Line:add(text, group)
  if group and text ~= '' then table.insert(self.marks, { #self.text, #self.text + #text, group }) end
  self.text = self.text .. text
  return self
end

--- The float's lines and highlights for a `context/composition` result.
---@param c table the composition
---@param width integer columns of the bars and the sparkline
---@return string[] lines, table[] highlights { line (0-based), col_start, col_end, group }
function M.lines(c, width)
  width = math.max(20, width or 60)
  local out = {}
  local window = math.max(1, c.window or 1)
  local function push(line) table.insert(out, line) end

  push(H.line():add(vim.fn.fnamemodify(c.session or '', ':t'), 'CtxdTitle'))
  push(
    H.line()
      :add(string.format('context %s of %s tokens (%s%%)', thousands(c.contextTokens), thousands(window), tostring(c.percent)), 'CtxdHeader')
  )
  push(
    H.line():add(string.format('threshold %s · reserve %s', thousands(c.threshold), thousands(c.reserve)), 'CtxdHeader')
  )
  push(H.line())

  -- The window: each part's share, free space, the threshold as a line, the reserve shaded.
  local bar = H.line():add('▕')
  local cells, running = 0, 0
  for _, p in ipairs(M.parts) do
    running = running + (c.parts[p[1]] or 0)
    local stop = math.min(width, math.floor(running * width / window + 0.5))
    if stop > cells then
      bar:add(string.rep('█', stop - cells), p[3])
      cells = stop
    end
  end
  local at = math.min(width - 1, math.floor((c.threshold or window) * width / window + 0.5))
  for i = cells, width - 1 do
    if i == at then
      bar:add('│', 'CtxdThreshold')
    elseif i > at then
      bar:add('░', 'CtxdReserve')
    else
      bar:add('·', 'CtxdFree')
    end
  end
  push(bar:add('▏'))
  push(H.line():add(string.rep(' ', at + 1) .. '^ threshold', 'CtxdThreshold'))
  push(H.line())

  -- A bar per part, as a share of the window.
  for _, p in ipairs(M.parts) do
    local value = c.parts[p[1]] or 0
    if value > 0 then
      local n = math.max(1, math.floor(value * (width - 30) / window + 0.5))
      push(H.line():add(string.format('%-17s', p[2])):add(string.format('%9s ', thousands(value)), 'CtxdTokens'):add(string.rep('█', n), p[3]))
      if p[1] == 'toolResults' then
        local by = {}
        for name, tokens in pairs(c.toolResultsByTool or {}) do table.insert(by, { name, tokens }) end
        table.sort(by, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)
        for i = 1, math.min(5, #by) do
          push(H.line():add(string.format('  %-15s', by[i][1])):add(string.format('%9s', thousands(by[i][2])), 'CtxdTokens'))
        end
      end
    end
  end
  push(H.line():add(string.format('(parts add up to %s, the messages\' estimates)', thousands(c.estimatedTokens)), 'Comment'))

  if #(c.top or {}) > 0 then
    push(H.line())
    push(H.line():add('heaviest entries', 'CtxdTitle'))
    for i, e in ipairs(c.top) do
      local what = e.role .. ((e.tool and e.tool ~= vim.NIL) and (' ' .. e.tool) or '') .. (e.pinned and ' (pinned)' or '')
      push(
        H.line()
          :add(string.format('%2d. %-9s ', i, e.entryId))
          :add(string.format('%-26s', what), 'CtxdRole')
          :add(string.format('%9s', thousands(e.tokens)), 'CtxdTokens')
      )
    end
  end

  vim.list_extend(out, H.timeline(c, width))
  local lines, highlights = {}, {}
  for i, line in ipairs(out) do
    lines[i] = line.text
    for _, m in ipairs(line.marks) do
      table.insert(highlights, { i - 1, m[1], m[2], m[3] })
    end
  end
  return lines, highlights
end

--- The timeline: a sparkline (height: share of the window; more points than columns: each column
--- shows its largest), a line of markers under it, and the latest compactions.
function H.timeline(c, width)
  local points = c.timeline or {}
  if #points == 0 then return {} end
  local window = math.max(1, c.window or 1)
  local kinds = {}
  for _, m in ipairs(c.markers or {}) do
    local at = m.at + 1
    if m.kind == 'compaction' or not kinds[at] or kinds[at] == 'branch' then kinds[at] = m.kind end
  end
  local columns = math.min(width, #points)
  local spark, marks = H.line(), H.line()
  for col = 0, columns - 1 do
    local first = math.floor(col * #points / columns) + 1
    local last = math.floor((col + 1) * #points / columns)
    local top, kind = 0, nil
    for i = first, last do
      top = math.max(top, points[i].tokens)
      local k = kinds[i]
      if k == 'compaction' or (k and kind ~= 'compaction' and (kind == nil or kind == 'branch')) then kind = k end
    end
    local level = math.min(#M.sparks, math.floor(top * #M.sparks / window) + 1)
    spark:add(M.sparks[level], top > (c.threshold or window) and 'CtxdThreshold' or 'CtxdSpark')
    local mark = ({ compaction = 'C', overflow = '!', branch = 'b' })[kind] or ' '
    marks:add(mark, kind and 'CtxdMarker' or nil)
  end
  local turns, compactions = 0, {}
  for _, p in ipairs(points) do turns = math.max(turns, p.turn) end
  for _, m in ipairs(c.markers or {}) do
    if m.kind == 'compaction' then table.insert(compactions, m) end
  end
  local out = {
    H.line(),
    H.line():add(string.format('timeline: %d turns, %d compactions', turns, #compactions), 'CtxdTitle'),
    spark,
    marks:add('  C compaction  ! overflow  b branch', 'Comment'),
  }
  for i = math.max(1, #compactions - 4), #compactions do
    local m = compactions[i]
    local how = {}
    for _, v in ipairs({ m.trigger, m.summarizer }) do
      if type(v) == 'string' then table.insert(how, v) end
    end
    table.insert(
      out,
      H.line()
        :add(string.format('turn %d: ', points[m.at + 1].turn))
        :add(string.format('%s → %s', thousands(m.tokensBefore), thousands(m.tokensAfter)), 'CtxdTokens')
        :add(#how > 0 and (' (' .. table.concat(how, ', ') .. ')') or '', 'Comment')
    )
  end
  return out
end

-- --- the float ------------------------------------------------------------------------------------

H.open = {} -- session path -> { buf, win, unsubscribe }

--- Fill `buf` with the composition `c`.
function M.render(buf, c)
  if not vim.api.nvim_buf_is_valid(buf) then return end
  local lines, highlights = M.lines(c, H.width())
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  for _, h in ipairs(highlights) do
    vim.api.nvim_buf_set_extmark(buf, M.ns, h[1], h[2], { end_col = h[3], hl_group = h[4] })
  end
  vim.b[buf].ctxd_composition = { leafId = c.leafId, contextTokens = c.contextTokens, revision = c.revision }
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if vim.api.nvim_win_get_config(win).relative ~= '' then
      vim.api.nvim_win_set_height(win, math.min(#lines, vim.o.lines - 4))
    end
  end
end

function H.width() return math.max(20, math.min(72, vim.o.columns - 16)) end

--- Open the float for session `path` (its composition asked for; the daemon then follows it).
---@param cb fun(err, composition, buf)|nil
function M.open(path, cb)
  local client = require('ctxd.client')
  client.request('context/composition', { session = path }, function(err, c)
    if err then
      vim.notify('ctxd: context/composition: ' .. client.message(err), vim.log.levels.ERROR)
      if cb then cb(err) end
      return
    end
    local shown = H.open[path]
    local buf = shown and vim.api.nvim_buf_is_valid(shown.buf) and shown.buf or nil
    if not buf then
      buf = vim.api.nvim_create_buf(false, true)
      vim.bo[buf].bufhidden = 'wipe'
      vim.bo[buf].filetype = 'ctxd-usage'
      vim.keymap.set('n', 'q', '<Cmd>close<CR>', { buffer = buf, nowait = true, desc = 'ctxd: close' })
      local unsubscribe = client.subscribe(function(method, params)
        if method == 'context/compositionChanged' and params.session == path then M.render(buf, params) end
      end)
      H.open[path] = { buf = buf, unsubscribe = unsubscribe }
      vim.api.nvim_create_autocmd('BufWipeout', {
        buffer = buf,
        once = true,
        callback = function()
          unsubscribe()
          H.open[path] = nil
        end,
      })
    end
    M.render(buf, c)
    if #vim.fn.win_findbuf(buf) == 0 then
      local width = H.width() + 4
      vim.api.nvim_open_win(buf, true, {
        relative = 'editor',
        width = width,
        height = math.min(vim.api.nvim_buf_line_count(buf), vim.o.lines - 4),
        row = 1,
        col = math.max(0, math.floor((vim.o.columns - width) / 2)),
        border = 'rounded',
        style = 'minimal',
        title = ' ctxd usage ',
        title_pos = 'center',
      })
    end
    if cb then cb(nil, c, buf) end
  end)
end

return M
