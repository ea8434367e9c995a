-- :Ctxd sessions with ctxd's archive of Claude Code transcripts: the copy follows its live
-- transcript in the picker, opens with the history from before /compact, and stays listed on its
-- own once Claude Code deletes the transcript. Against a real `ctxd serve`.
local T = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h') .. '/harness.lua')
local ctxd = require('ctxd')
local tree = require('ctxd.tree')

local base = T.tempdir('archives')
local id = '2696e685-97f7-47e2-9b90-766d279ab840'
local projects = base .. '/claude/projects'
local archive = base .. '/data/ctxd/archive'
local live = projects .. '/-home-dev-service/' .. id .. '.jsonl'
local copy = archive .. '/claude/-home-dev-service/' .. id .. '.jsonl'
local recorded = vim.fn.fnamemodify(T.plugin_dir, ':h:h') .. '/tests/data/claude/claude-2.1.330-compact.jsonl'
vim.fn.mkdir(vim.fn.fnamemodify(live, ':h'), 'p')
vim.fn.mkdir(vim.fn.fnamemodify(copy, ':h'), 'p')
assert(vim.uv.fs_copyfile(recorded, live))
assert(vim.uv.fs_copyfile(recorded, copy)) -- what `ctxd hook PreCompact` keeps (tests/claude_code run the real hooks)
vim.fn.mkdir(base .. '/pi', 'p')

ctxd.setup({
  cmd = T.server_cmd(),
  roots = { base .. '/pi' },
  init_options = { transcriptRoots = { projects }, archiveRoots = { archive } },
  auto_compact = false,
})
T.require_daemon()

local function pick(choose)
  local orig = vim.ui.select
  local offered, labels
  vim.ui.select = function(items, opts, on_choice)
    offered = items
    labels = vim.tbl_map(opts.format_item, items)
    on_choice(choose and choose(items) or nil)
  end
  vim.cmd('Ctxd sessions')
  T.wait(function() return offered end, 'the picker')
  vim.ui.select = orig
  return offered, labels
end

T.test(':Ctxd sessions lists the archived copy right after its transcript and opens it', function()
  local offered, labels = pick(function(items)
    for _, item in ipairs(items) do
      if item.ctxd_copy then return item end
    end
  end)
  T.eq(#offered, 2)
  T.eq(offered[1].path, live)
  T.eq(offered[2].path, copy)
  T.match(labels[1], '^Build a tiny HTTP service in app%.py that listens on port 8123%. .*  %(%d+ entries · /home/dev/service · .* · 1 archived%)$')
  T.match(labels[2], '^  ↳ ctxd archive  %(%d+ entries · %d%d%d%d%-%d%d%-%d%d %d%d:%d%d%)$')
  -- The copy opens like any transcript: its tree holds the compaction and what came before it.
  T.wait(function() return tree.buf_for(copy) and tree.state(tree.buf_for(copy)).data end, "the copy's tree")
  T.eq(ctxd.current_session(), copy)
  local text = table.concat(T.lines(tree.buf_for(copy)), '\n')
  T.match(text, 'compaction')
end)

T.test('once Claude Code deletes the transcript, the copy is listed on its own', function()
  assert(os.remove(live))
  local offered, labels
  T.wait(function()
    offered, labels = pick(nil)
    return #offered == 1
  end, 'the deleted transcript to leave the list')
  T.eq(offered[1].path, copy)
  T.eq(offered[1].ctxd_copy, nil)
  T.match(labels[1], '  %[ctxd archive%]  %(%d+ entries · /home/dev/service · ')
end)

T.run('test_archives')
