-- :Ctxd usage: the float shows what fills the context (the window bar with the threshold, a bar per
-- part, the heaviest entries, the timeline's sparkline) and follows the session while another
-- process writes it and the daemon compacts it, against a real `ctxd serve`.
local T = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h') .. '/harness.lua')
local ctxd = require('ctxd')
local usage = require('ctxd.usage')

local root = T.tempdir('usage')
local s = T.write_session(root, { name = 'Usage session', turns = 2 })
ctxd.setup({
  cmd = T.server_cmd(),
  roots = { root },
  auto_compact = true,
  auto_compact_external = true,
  compaction = { context_window = 8000, reserve_tokens = 1000, keep_recent_tokens = 300 },
})
T.require_daemon()

local buf, win

local function float_lines()
  T.truthy(buf and vim.api.nvim_buf_is_valid(buf), 'the float buffer')
  return T.lines(buf)
end

local function groups_on(lnum) return T.groups_at(buf, lnum, usage.ns) end

T.test(':Ctxd usage opens a float with the window bar, the parts, the heaviest entries and the timeline', function()
  ctxd.open_tree({ session = s.path })
  T.wait(function() return require('ctxd.client').state.current == s.path end, 'the current session')
  vim.cmd('Ctxd usage')
  T.wait(function()
    for _, w in ipairs(vim.api.nvim_list_wins()) do
      local b = vim.api.nvim_win_get_buf(w)
      if vim.bo[b].filetype == 'ctxd-usage' and vim.api.nvim_win_get_config(w).relative ~= '' then
        buf, win = b, w
        return true
      end
    end
  end, 'the float')
  local lines = float_lines()
  T.match(lines[1], '%.jsonl$')
  T.eq(lines[2], 'context 4,500 of 8,000 tokens (56.2%)')
  T.eq(lines[3], 'threshold 7,000 · reserve 1,000')
  local bar = lines[5]
  T.truthy(vim.fn.match(bar, [[\v^▕█+·+│░+▏$]]) == 0, 'the window bar: ' .. bar)
  T.eq(vim.fn.strchars(bar), math.max(20, math.min(72, vim.o.columns - 16)) + 2, 'the bar: the window, edge to edge')
  T.truthy(groups_on(5).CtxdPartToolResults and groups_on(5).CtxdThreshold and groups_on(5).CtxdReserve, 'coloured')
  T.truthy(T.line_of(buf, 'tool results'), 'a bar for tool results')
  T.match(lines[T.line_of(buf, '  read ')], '^  read%s+[%d,]+$', 'tool results by tool')
  T.truthy(groups_on(T.line_of(buf, 'tool results')).CtxdPartToolResults)
  local top = T.line_of(buf, 'heaviest entries')
  T.match(lines[top + 1], '^ 1%. [0-9a-f]+%s+toolResult read%s+[%d,]+$', 'the heaviest entry is a tool result')
  local timeline = T.line_of(buf, 'timeline: ')
  T.eq(lines[timeline], 'timeline: 2 turns, 0 compactions')
  T.truthy(vim.fn.match(lines[timeline + 1], [[\v^[▁▂▃▄▅▆▇█]+$]]) == 0, 'the sparkline: ' .. lines[timeline + 1])
  T.eq(vim.fn.strchars(lines[timeline + 1]), 2)
  T.truthy(groups_on(timeline + 1).CtxdSpark)
  -- Highlight groups are linked to built-ins, never hard colours.
  T.eq(vim.api.nvim_get_hl(0, { name = 'CtxdPartToolResults' }).link, 'Constant')
  T.eq(vim.api.nvim_get_hl(0, { name = 'CtxdThreshold' }).link, 'WarningMsg')
end)

T.test('the float follows the session: a turn written outside, then the compaction it starts', function()
  local before = float_lines()[2]
  s:append({ T.user('Question 3 ' .. string.rep('more words ', 40), 1735732900000) })
  T.wait(function() return float_lines()[2] ~= before end, 'the float redrawn after the append')
  T.eq(float_lines()[T.line_of(buf, 'timeline: ')], 'timeline: 3 turns, 0 compactions')
  -- An answer past the threshold: the daemon compacts; the float shows the compaction.
  s:append({ T.assistant('Answer 3', 7600, 1735732900001) })
  T.wait(function()
    local i = T.line_of(buf, 'timeline: ')
    return i and float_lines()[i]:find('1 compactions', 1, true)
  end, 'the compaction in the timeline', 30000)
  local lines = float_lines()
  local timeline = T.line_of(buf, 'timeline: ')
  T.match(lines[timeline + 2], 'C', 'a compaction mark under the sparkline')
  T.match(lines[timeline + 3], '^turn 3: 7,600 → [%d,]+ %(threshold, offline%)$', 'its tokens before → after')
  T.truthy(T.line_of(buf, 'summary'), 'the summary is a part now')
  T.truthy(groups_on(timeline + 2).CtxdMarker)
  vim.api.nvim_win_close(win, true)
end)

T.run('test_usage.lua')
