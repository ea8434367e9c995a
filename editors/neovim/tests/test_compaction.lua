-- Preview, compact (manual and automatic), the ledger and the built context, against a real
-- `ctxd serve` (offline summariser: no model, no network).
local T = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h') .. '/harness.lua')
local ctxd = require('ctxd')
local tree = require('ctxd.tree')

local root = T.tempdir('compaction')
local s = T.write_session(root)
ctxd.setup({
  cmd = T.server_cmd(),
  roots = { root },
  auto_compact = false,
  compaction = { context_window = 40000, keep_recent_tokens = 200 },
})
T.require_daemon()

local seen = {}
vim.api.nvim_create_autocmd('User', {
  pattern = 'CtxdUpdated',
  callback = function(ev) table.insert(seen, { kind = ev.data.kind, text = ctxd.statusline() }) end,
})
local function texts_since(n)
  return vim.tbl_map(function(e) return e.text end, vim.list_slice(seen, n + 1))
end

local buf
T.show_on_failure = function()
  local cur = vim.api.nvim_get_current_buf()
  return vim.list_extend({ '-- ' .. vim.api.nvim_buf_get_name(cur) }, T.lines(cur))
end

T.test(':Ctxd preview shows the plan of a compaction (dry run)', function()
  vim.cmd('Ctxd tree ' .. vim.fn.fnameescape(s.path))
  T.wait(function()
    buf = tree.buf_for(s.path)
    return buf and tree.state(buf).data
  end, 'the tree')
  vim.cmd('Ctxd preview')
  local name = 'ctxd://preview/' .. s.path
  T.wait(function() return T.buf_named(name) end, 'the preview buffer')
  local pb = T.buf_named(name)
  local lines = T.lines(pb)
  T.eq(lines[1], '# Compaction preview · Nvim test session')
  T.match(lines[3], '^%- tokens: 5,500 now, about [%d,]+ after$')
  T.match(lines[4], '^%- summarize: %d+ messages %(a0000002 … a[0-9a-f]+%)$')
  T.match(lines[5], '^%- keep: %d+ messages from a[0-9a-f]+ %(line %d+%)$')
  T.truthy(vim.tbl_contains(lines, '- read files: file1.txt, file2.txt') or vim.tbl_contains(lines, '- read files: file1.txt, file2.txt, file3.txt'), 'the files read')
  -- What the compaction must keep: the fact sheet every summary is checked against.
  local keep = T.line_of(pb, '## What this compaction must keep')
  T.truthy(keep, 'the fact sheet heading')
  T.match(lines[keep + 1], '^%- Goal: ')
  local facts = vim.tbl_filter(function(l) return l:find('^%- Files read: ') end, lines)[1]
  T.truthy(facts and facts:find('file1.txt', 1, true), 'the files read, as facts')
  T.eq(vim.bo[pb].filetype, 'markdown')
  T.eq(vim.bo[pb].buftype, 'nofile')
  T.truthy(T.line_of(buf, 'Answer 3'), 'the tree is unchanged')
  T.eq(#vim.tbl_filter(function(l) return l:find('compaction', 1, true) end, T.lines(buf)), 0, 'a preview writes nothing')
  vim.cmd('close')
end)

T.test(':Ctxd compact compacts; the statusline says compacting… then the new size', function()
  vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1])
  local before = #seen
  local notes = #T.notes
  vim.cmd('Ctxd compact keep the file names')
  T.wait(function()
    local c = require('ctxd.client').state.compaction[s.path]
    return c and c.state == 'succeeded'
  end, 'compaction/status succeeded')
  T.wait(function() return T.line_of(buf, 'compaction') end, 'the compaction in the tree')
  local texts = texts_since(before)
  T.truthy(vim.tbl_contains(texts, 'ctxd compacting…'), 'the statusline said compacting…: ' .. vim.inspect(texts))
  T.wait(function() return ctxd.statusline():find('^ctxd [%d.]+k?/40k %d+%%$') and ctxd.statusline() ~= 'ctxd 5.5k/40k 14%' end, 'the smaller context in the statusline')
  local usage = require('ctxd.client').state.usage[s.path]
  T.truthy(usage.tokens < 5500, 'fewer tokens: ' .. usage.tokens)
  local line = T.lines(buf)[T.line_of(buf, 'compaction')]
  T.match(line, '^▶ compaction compacted 5,500 tokens: ', 'the compaction is the new leaf')
  T.truthy(T.groups_at(buf, T.line_of(buf, 'compaction')).CtxdLeaf)
  T.truthy(#T.notes_matching('^ctxd: compacted .* %(manual%): 5%.5k → ', notes) == 1, 'one notification of the result')
end)

local function ledger_lines()
  local result
  ctxd.ledger({}, function(err, rows, lb) result = { err = err, rows = rows, buf = lb } end)
  T.wait(function() return result end, 'the ledger')
  T.eq(result.err, nil)
  return T.lines(result.buf), result.rows, result.buf
end

T.test(':Ctxd ledger lists the compaction: trigger, tokens, summariser, instructions', function()
  vim.cmd('Ctxd ledger')
  local name = 'ctxd://ledger/' .. s.path
  T.wait(function() return T.buf_named(name) end, 'the ledger buffer')
  local lines = T.lines(T.buf_named(name))
  T.eq(lines[1], '# Compaction ledger · Nvim test session')
  T.eq(lines[3], '| when | trigger | tokens | summarizer | model | duration | cost | entry |')
  T.match(lines[5], '^| %d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d | manual | 5,500 → [%d,]+ | offline | – | [%d,]+ ms | – | [0-9a-f]+ |$')
  T.eq(#vim.tbl_filter(function(l) return l:find('^| %d') end, lines), 1, 'one compaction')
  vim.cmd('close')
  -- The same from the tree when the daemon has no session/ledger (older daemons).
  local methods = require('ctxd.client').state.methods
  local had = methods['session/ledger']
  methods['session/ledger'] = nil
  local fallback, rows = ledger_lines()
  methods['session/ledger'] = had
  T.eq(fallback[5], lines[5], 'the fallback gives the same row')
  T.eq(rows[1].instructions, 'keep the file names', 'the instructions are in the entry')
  T.truthy(vim.tbl_contains(fallback, '- instructions: keep the file names'))
  vim.cmd('close')
end)

T.test(':Ctxd context shows the built context as Markdown, opening with the summary', function()
  vim.cmd('Ctxd context')
  local name = 'ctxd://context/' .. s.path
  T.wait(function() return T.buf_named(name) end, 'the context buffer')
  local cb = T.buf_named(name)
  local lines = T.lines(cb)
  T.eq(lines[1], '# Context · Nvim test session')
  T.eq(lines[3], '- model: test/test-model · thinking: off')
  T.match(lines[5], '^%- opens with compaction [0-9a-f]+$')
  T.match(lines[7], '^## 1%. compactionSummary · [0-9a-f]+ · [%d,]+ tokens$')
  T.truthy(T.line_of(cb, '## Goal'), 'the summary text')
  T.truthy(T.line_of(cb, 'assistant · ' .. s.by_text['Answer 3']), 'the kept messages')
  T.eq(vim.bo[cb].filetype, 'markdown')
  vim.cmd('close')
end)

T.test('<CR> on the compaction shows its summary and ledger', function()
  local win = vim.fn.win_findbuf(buf)[1]
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_cursor(win, { T.line_of(buf, 'compaction'), 0 })
  vim.api.nvim_feedkeys(vim.keycode('<CR>'), 'mx', false)
  T.wait(function() return T.buf_named('^ctxd://entry/') end, 'the entry buffer')
  local eb = T.buf_named('^ctxd://entry/')
  T.match(T.lines(eb)[1], '^# compaction · [0-9a-f]+$')
  T.truthy(T.line_of(eb, 'Trigger manual, summariser offline'), 'the ledger line')
  T.truthy(T.line_of(eb, 'Instructions: keep the file names'), 'the instructions')
  T.truthy(T.line_of(eb, '## Summary'), 'the summary')
  vim.cmd('close')
end)

T.test('p, c and gl in the tree: preview, compact again, two rows in the ledger', function()
  s:append({ T.user('Question 5', 1735733100000), T.assistant('Answer 5', 9000, 1735733100001) })
  T.wait(function() return T.line_of(buf, 'Answer 5') end, 'the appended turn')
  local win = vim.fn.win_findbuf(buf)[1]
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_feedkeys('p', 'mx', false)
  T.wait(function() return T.buf_named('ctxd://preview/' .. s.path) end, 'the preview')
  T.match(T.lines(T.buf_named('ctxd://preview/' .. s.path))[3], '^%- tokens: 9,%d+ now')
  vim.cmd('close')
  vim.api.nvim_set_current_win(win)
  local count = #vim.tbl_filter(function(l) return l:find(' compaction ', 1, true) end, T.lines(buf))
  vim.api.nvim_feedkeys('c', 'mx', false)
  T.wait(function()
    return #vim.tbl_filter(function(l) return l:find(' compaction ', 1, true) end, T.lines(buf)) == count + 1
  end, 'a second compaction in the tree')
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_feedkeys('gl', 'mx', false)
  T.wait(function()
    local lb = T.buf_named('ctxd://ledger/' .. s.path)
    return lb and #vim.tbl_filter(function(l) return l:find('^| %d') end, T.lines(lb)) == 2
  end, 'two compactions in the ledger')
  local lines = T.lines(T.buf_named('ctxd://ledger/' .. s.path))
  T.match(lines[5], '| manual | 9,%d+ → ', 'newest first')
  T.match(lines[6], '| manual | 5,500 → ')
  vim.cmd('close')
end)

T.test('the daemon compacts by itself when an external append crosses the threshold', function()
  -- auto_compact is a daemon option: setup() with a new value restarts the daemon on next use.
  -- The turn is written by another process (as an agent would): auto_compact_external asks for it.
  ctxd.setup({
    cmd = T.server_cmd(),
    roots = { root },
    auto_compact = true,
    auto_compact_external = true,
    compaction = { context_window = 40000, keep_recent_tokens = 200 },
  })
  local s2 = T.write_session(root, { name = 'Auto session', prefix = 'b' })
  local rendered = false
  ctxd.open_tree({ session = s2.path, on_render = function() rendered = true end })
  T.wait(function() return rendered end, 'the second tree')
  local b2 = tree.buf_for(s2.path)
  T.wait(function() return ctxd.statusline() == 'ctxd 5.5k/40k 14%' end, 'the usage before')
  local before = #seen
  -- Above the threshold (40000 - 16384 reserved = 23616 tokens).
  s2:append({ T.user('Big question', 1735733200000), T.assistant('Big answer', 30000, 1735733200001) })
  T.wait(function()
    local c = require('ctxd.client').state.compaction[s2.path]
    return c and c.state == 'succeeded' and c.trigger == 'threshold'
  end, 'an automatic compaction')
  T.wait(function() return T.line_of(b2, 'compaction') end, 'the compaction in the tree')
  local texts = texts_since(before)
  T.truthy(vim.tbl_contains(texts, 'ctxd 30k/40k 75%'), 'the statusline showed the full context: ' .. vim.inspect(texts))
  T.truthy(vim.tbl_contains(texts, 'ctxd compacting…'), 'then compacting…: ' .. vim.inspect(texts))
  T.wait(function() return ctxd.statusline():find('^ctxd [%d.]+k?/40k %d%%$') end, 'a small context after: ' .. ctxd.statusline())
  local lines = ledger_lines()
  T.match(lines[5], '| threshold | 30,%d+ → [%d,]+ | offline |', 'the ledger says why')
  vim.cmd('close')
end)

T.run('test_compaction')
