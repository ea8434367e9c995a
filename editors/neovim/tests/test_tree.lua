-- The tree buffer against a real `ctxd serve` on a real session file: lines, highlights, folds,
-- live growth from another process, the statusline, and the buffer-local actions.
local T = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h') .. '/harness.lua')
local ctxd = require('ctxd')

local root = T.tempdir('tree')
local s = T.write_session(root)
ctxd.setup({
  cmd = T.server_cmd(),
  roots = { root },
  auto_compact = false,
  compaction = { context_window = 40000 },
})
T.require_daemon()

-- Every statusline text seen at a CtxdUpdated event.
local seen = {}
vim.api.nvim_create_autocmd('User', {
  pattern = 'CtxdUpdated',
  callback = function(ev) table.insert(seen, { kind = ev.data.kind, text = ctxd.statusline() }) end,
})

local buf, win
T.show_on_failure = function() return buf and T.lines(buf) or {} end

local TOOL = "read: line 01 of the file under test, padded to be long enough line 02 of the file under test, padd…  285 tok"

T.test('the tree shows every entry: role, preview, tokens, labels', function()
  local rendered = false
  vim.cmd('Ctxd tree ' .. vim.fn.fnameescape(s.path))
  T.wait(function()
    buf = require('ctxd.tree').buf_for(s.path)
    return buf and require('ctxd.tree').state(buf).renders > 0 and require('ctxd.tree').state(buf).data ~= nil
  end, 'the first render')
  rendered = true
  win = vim.fn.win_findbuf(buf)[1]
  T.truthy(rendered)
  T.eq(vim.api.nvim_get_current_win(), win, 'the tree window has the focus')
  T.eq(vim.api.nvim_buf_get_name(buf), 'ctxd://tree/' .. s.path)
  T.eq(vim.bo[buf].filetype, 'ctxd_tree')
  T.eq(vim.bo[buf].modifiable, false)
  T.eq(vim.api.nvim_win_get_width(win), 60, 'a 60-column window')
  T.eq(vim.fn.winnr(), vim.fn.winnr('$'), 'on the right')
  T.eq(T.lines(buf), {
    'Nvim test session',
    '5.5k/40k 14% · 14 entries · g? help',
    "● session_info name = 'Nvim test session'",
    '● user       Question 1  3 tok',
    "● assistant  Reading 1 → read({'path': 'file1.txt'})  9 tok",
    '● toolResult ' .. TOOL,
    '● assistant  Answer 1  2 tok  [first answer]',
    '● user       Question 2  3 tok',
    "● assistant  Reading 2 → read({'path': 'file2.txt'})  9 tok",
    '● toolResult ' .. TOOL,
    '● assistant  Answer 2  2 tok',
    '● user       Question 3  3 tok',
    "● assistant  Reading 3 → read({'path': 'file3.txt'})  9 tok",
    '● toolResult ' .. TOOL,
    '● assistant  Answer 3  2 tok',
    "▶ label      label a0000005 = 'first answer'",
  })
  T.eq(ctxd.statusline(), 'ctxd 5.5k/40k 14%')
  T.eq(ctxd.current_session(), s.path)
end)

T.test('linear runs are folded; the labelled entry and the ends stay visible', function()
  vim.api.nvim_win_call(win, function()
    local closed = {}
    for lnum = 1, vim.api.nvim_buf_line_count(buf) do
      closed[lnum] = vim.fn.foldclosed(lnum)
    end
    T.eq(closed, { -1, -1, -1, -1, 5, 5, -1, 8, 8, 8, 8, 8, 8, 8, -1, -1 })
    T.eq(vim.fn.foldclosedend(8), 14)
    T.eq(vim.fn.foldtextresult(5), '┄ 2 entries · 294 tok')
    T.eq(vim.fn.foldtextresult(8), '┄ 7 entries · 596 tok')
  end)
end)

T.test('the active path and the leaf are highlighted with Ctxd* groups', function()
  local leaf = T.groups_at(buf, 16)
  T.truthy(leaf.CtxdLeaf, 'the leaf line has CtxdLeaf')
  local active = T.groups_at(buf, 4)
  T.truthy(active.CtxdActivePath and active.CtxdRole and active.CtxdTokens, 'mark, role and tokens of an active entry')
  T.truthy(not active.CtxdOffPath and not active.CtxdLeaf, 'an active entry is neither off the path nor the leaf')
  T.truthy(T.groups_at(buf, 7).CtxdLabel, 'labels')
  T.truthy(T.groups_at(buf, 1).CtxdTitle and T.groups_at(buf, 2).CtxdHeader, 'the header')
  T.eq(vim.api.nvim_get_hl(0, { name = 'CtxdLeaf' }).link, 'Search')
  T.eq(vim.api.nvim_get_hl(0, { name = 'CtxdActivePath' }).link, 'Identifier')
end)

T.test('it grows live when another process appends; statusline, CtxdUpdated and cursor follow', function()
  vim.api.nvim_set_current_win(win)
  vim.cmd('8foldopen') -- the user opens a fold: it must stay open
  vim.api.nvim_win_set_cursor(win, { 11, 3 }) -- on "Answer 2"
  local before = #seen
  s:append({ T.user('Question 4', 1735732900000), T.assistant('Answer 4', 12000, 1735732900001) })
  T.wait(function() return T.line_of(buf, 'Answer 4') end, 'the appended entries in the tree')
  T.wait(function() return T.lines(buf)[2]:find('^12k/40k 30%%') end, 'the usage in the header')
  local lines = T.lines(buf)
  T.eq(#lines, 18)
  T.eq(lines[2], '12k/40k 30% · 16 entries · g? help')
  T.eq(lines[16], "● label      label a0000005 = 'first answer'", 'the old leaf is an active entry now')
  T.eq(lines[17], '● user       Question 4  3 tok')
  T.eq(lines[18], '▶ assistant  Answer 4  2 tok', 'the new leaf')
  T.truthy(T.groups_at(buf, 18).CtxdLeaf and not T.groups_at(buf, 16).CtxdLeaf, 'the leaf highlight moved')
  T.eq(ctxd.statusline(), 'ctxd 12k/40k 30%')
  local texts = vim.tbl_map(function(e) return e.text end, vim.list_slice(seen, before + 1))
  T.truthy(vim.tbl_contains(texts, 'ctxd 12k/40k 30%'), 'CtxdUpdated fired with the new statusline: ' .. vim.inspect(texts))
  T.eq(vim.api.nvim_win_get_cursor(win), { 11, 3 }, 'the cursor stays on its entry')
  T.eq(require('ctxd.tree').state(buf).line_rows[11].id, s.by_text['Answer 2'])
  vim.api.nvim_win_call(win, function()
    T.eq(vim.fn.foldclosed(8), -1, 'the fold the user opened stays open')
    T.eq(vim.fn.foldclosed(5), 5, 'the other fold stays closed')
  end)
end)

T.test('the cursor stays on its entry when the tree is re-shaped', function()
  vim.api.nvim_set_current_win(win)
  local target = T.line_of(buf, 'Answer 4')
  vim.api.nvim_win_set_cursor(win, { target, 0 })
  local t = require('ctxd.tree').state(buf)
  local renders = t.renders
  -- Another tool branches below "Question 1": everything after it is indented one level.
  s:append({ T.user('Side question', 1735733000000) }, s.by_text['Question 1'])
  T.wait(function() return T.line_of(buf, 'Side question') and t.renders > renders end, 'the side branch')
  local now = T.line_of(buf, 'Answer 4')
  T.eq(vim.api.nvim_win_get_cursor(win)[1], now, 'the cursor follows "Answer 4"')
  -- The file's last entry is pi's leaf: the side branch is the active one now.
  T.eq(T.lines(buf)[now], '  ○ assistant  Answer 4  2 tok', 'indented below the new branch point, off the path')
  T.truthy(T.groups_at(buf, now).CtxdOffPath, 'off-path entries are CtxdOffPath')
  local side = T.line_of(buf, 'Side question')
  T.eq(T.lines(buf)[side], '  ▶ user       Side question  4 tok', 'the side branch has the leaf')
  T.eq(T.lines(buf)[T.line_of(buf, 'Question 1')], '● user       Question 1  3 tok', 'the branch point')
  -- Rows inserted above the cursor (the daemon lists children in file order, so this is made up):
  local rows = t.data.rows
  table.insert(rows, 1, vim.tbl_extend('force', rows[1], { id = 'fake0001', preview = 'made up' }))
  table.insert(rows, 1, vim.tbl_extend('force', rows[1], { id = 'fake0002', preview = 'made up' }))
  require('ctxd.tree')._render(buf)
  T.eq(vim.api.nvim_win_get_cursor(win)[1], now + 2, 'two rows above: the cursor moved down with its entry')
  T.eq(T.line_of(buf, 'Answer 4'), now + 2)
  require('ctxd.tree').refresh(buf)
  T.wait(function() return not T.line_of(buf, 'made up') end, 'the real tree again')
  T.eq(vim.api.nvim_win_get_cursor(win)[1], now)
end)

local function on(text)
  vim.api.nvim_set_current_win(win)
  local lnum = T.truthy(T.line_of(buf, text), 'a line with ' .. text)
  vim.api.nvim_win_call(win, function() vim.cmd('silent! ' .. lnum .. 'foldopen!') end)
  vim.api.nvim_win_set_cursor(win, { lnum, 0 })
  return lnum
end

local function press(keys) vim.api.nvim_feedkeys(vim.keycode(keys), 'mx', false) end

T.test('L labels the entry under the cursor', function()
  local orig = vim.ui.input
  local prompt
  vim.ui.input = function(opts, cb)
    prompt = opts.prompt
    cb('pinned')
  end
  on('Question 2')
  press('L')
  vim.ui.input = orig
  T.eq(prompt, 'Label (empty clears): ')
  T.wait(function() return T.lines(buf)[T.line_of(buf, 'Question 2')]:find('%[pinned%]$') end, 'the label in the tree')
end)

T.test('P pins the message under the cursor (a mark in the tree), P again unpins it', function()
  on('Question 1')
  press('P')
  T.wait(function() return T.lines(buf)[T.line_of(buf, 'Question 1')]:find('📌$') end, 'the pin in the tree')
  T.truthy(T.groups_at(buf, T.line_of(buf, 'Question 1')).CtxdPinned, 'its highlight')
  local pin = vim.fn.json_decode(vim.fn.readfile(s.path)[#vim.fn.readfile(s.path)])
  T.eq(pin.customType, 'ctxd.pin')
  T.eq(pin.data, { targetId = s.by_text['Question 1'], pinned = true })
  on('Question 1')
  press('P')
  T.wait(function() return not T.lines(buf)[T.line_of(buf, 'Question 1')]:find('📌', 1, true) end, 'the pin gone')
end)

T.test('<CR> opens the entry in a Markdown scratch buffer', function()
  on('Answer 1')
  press('<CR>')
  T.wait(function() return T.buf_named('ctxd://entry/' .. s.by_text['Answer 1']) end, 'the entry buffer')
  local eb = T.buf_named('ctxd://entry/' .. s.by_text['Answer 1'])
  local lines = T.lines(eb)
  T.eq(lines[1], '# assistant · ' .. s.by_text['Answer 1'])
  T.truthy(vim.tbl_contains(lines, '- labels: first answer'), 'its labels')
  T.truthy(vim.tbl_contains(lines, 'Answer 1'), 'its text')
  T.eq(vim.bo[eb].filetype, 'markdown')
  T.eq(vim.api.nvim_get_current_buf(), eb)
  vim.cmd('close')
end)

T.test('b branches here: the leaf moves, the rest leaves the active path', function()
  on('Answer 2')
  press('b')
  T.wait(function() return T.lines(buf)[T.line_of(buf, 'Answer 2')]:find('^%s*▶') end, 'Answer 2 as the leaf')
  local q3 = T.line_of(buf, 'Question 3')
  T.match(T.lines(buf)[q3], '^%s*○ user       Question 3', 'entries after the leaf are off the path')
  T.truthy(T.groups_at(buf, q3).CtxdOffPath)
  T.truthy(T.groups_at(buf, T.line_of(buf, 'Answer 2')).CtxdLeaf)
  T.wait(function() return ctxd.statusline() == 'ctxd 4.5k/40k 11%' end, 'the statusline of the shorter context')
  T.wait(function() return T.lines(buf)[2]:find('^4.5k/40k 11%%') end, 'the header of the shorter context')
  T.truthy(#T.notes_matching('leaf moved to ' .. s.by_text['Answer 2']) > 0, 'a notification')
end)

T.test('B branches with a summary of the branch left behind', function()
  local orig = vim.ui.input
  vim.ui.input = function(_, cb) cb('what was tried') end
  on('Answer 1')
  press('B')
  vim.ui.input = orig
  T.wait(function() return T.line_of(buf, 'branchSummary') end, 'a branch summary entry')
  local line = T.lines(buf)[T.line_of(buf, 'branchSummary')]
  T.match(line, '▶ branchSummary branch summary: ', 'the summary is the new leaf')
  T.truthy(T.groups_at(buf, T.line_of(buf, 'branchSummary')).CtxdCompaction, 'summaries have their own group')
end)

T.test('f forks at the entry and shows the new session', function()
  on('Question 2')
  press('f')
  T.wait(function()
    local sess = require('ctxd.tree').session_of(vim.api.nvim_get_current_buf())
    return sess and sess ~= s.path
  end, 'the fork in the tree window')
  local forked = require('ctxd.tree').session_of(vim.api.nvim_get_current_buf())
  T.eq(vim.fn.filereadable(forked), 1, 'the fork is a file')
  T.eq(vim.api.nvim_get_current_win(), win, 'in the same window')
  local fb = vim.api.nvim_get_current_buf()
  T.wait(function() return T.line_of(fb, 'Question 2') end, 'the fork rendered')
  T.eq(T.lines(fb)[1], 'Nvim test session')
  T.match(T.lines(fb)[T.line_of(fb, 'Question 2')], '^▶ user       Question 2', 'the fork ends at the entry')
  T.eq(#vim.tbl_filter(function(l) return l:find('Question 3', 1, true) end, T.lines(fb)), 0, 'and has nothing after it')
  T.eq(ctxd.current_session(), forked)
  vim.api.nvim_win_set_buf(win, buf) -- back to the first session
end)

T.test('g? lists the keys', function()
  vim.api.nvim_set_current_win(win)
  local before = #T.notes
  press('g?')
  local msg = T.notes[before + 1] and T.notes[before + 1].msg or ''
  T.match(msg, 'branch here: move the leaf to this entry')
  T.match(msg, 'gl +the compaction ledger')
end)

T.test('q closes the tree; :Ctxd tree shows it again, folded, at tree.position', function()
  ctxd.setup({ cmd = T.server_cmd(), roots = { root }, auto_compact = false, compaction = { context_window = 40000 }, tree = { position = 'bottom', size = 12 } })
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_buf(win, buf)
  press('q')
  T.eq(#vim.fn.win_findbuf(buf), 0, 'no window shows the tree')
  T.truthy(vim.api.nvim_buf_is_valid(buf), 'the buffer is kept (bufhidden=hide)')
  vim.cmd('Ctxd tree ' .. vim.fn.fnameescape(s.path))
  T.wait(function() return #vim.fn.win_findbuf(buf) == 1 end, 'the tree in a window')
  local w = vim.fn.win_findbuf(buf)[1]
  T.eq(vim.api.nvim_win_get_height(w), 12, 'a 12-line window')
  T.eq(vim.fn.winnr('$'), vim.api.nvim_win_call(w, vim.fn.winnr), 'at the bottom')
  T.eq(vim.wo[w].foldmethod, 'manual')
  T.eq(vim.wo[w].wrap, false)
  local folded = vim.api.nvim_win_call(w, function()
    for lnum = 1, vim.api.nvim_buf_line_count(buf) do
      if vim.fn.foldclosed(lnum) ~= -1 then return true end
    end
  end)
  T.truthy(folded, 'the runs are folded in the new window')
end)

T.run('test_tree')
