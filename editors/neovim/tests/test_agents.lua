-- Other agents' sessions in :Ctxd sessions and the tree, against a real `ctxd serve`: a Codex 0.169
-- rollout and an opencode database (copies of the real ones in tests/data) are listed beside a pi
-- session and a Claude Code transcript, each with its folder, its name and its agent marked
-- read-only; opened, their tree shows the conversation and grows live as Codex appends to its
-- rollout and opencode writes rows to its database.
local T = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h') .. '/harness.lua')
local ctxd = require('ctxd')
local tree = require('ctxd.tree')

local repo = vim.fn.fnamemodify(T.plugin_dir, ':h:h')
local base = T.tempdir('agents')
local claude = base .. '/claude/projects'
local codex = base .. '/codex/sessions'
local transcript = claude .. '/-home-dev-service/2696e685-97f7-47e2-9b90-766d279ab840.jsonl'
local rollout = codex .. '/2026/11/25/rollout-2026-11-25T21-29-59-01a2149d-8f0f-74c1-8dfa-7129af1db7c5.jsonl'
local db = base .. '/opencode/opencode.db'
local opencode = db .. '#ses_deb60502affel00BqeWtCJeQt7'

vim.fn.mkdir(vim.fn.fnamemodify(transcript, ':h'), 'p')
assert(vim.uv.fs_copyfile(repo .. '/tests/data/claude/claude-2.1.330-compact.jsonl', transcript))
local lines = vim.fn.readfile(repo .. '/tests/data/codex/rollout-0.169-compactions.jsonl')
vim.fn.mkdir(vim.fn.fnamemodify(rollout, ':h'), 'p')
vim.fn.writefile(vim.list_slice(lines, 1, 40), rollout) -- Codex is still writing it: two compactions so far
vim.fn.mkdir(vim.fn.fnamemodify(db, ':h'), 'p')
assert(vim.uv.fs_copyfile(repo .. '/tests/data/opencode/opencode.db', db))
local pi = T.write_session(base .. '/pi', { name = 'The pi session', turns = 1 })

ctxd.setup({
  cmd = T.server_cmd(),
  roots = { base .. '/pi' },
  init_options = { transcriptRoots = { claude, codex }, opencodeDatabases = { db } },
  auto_compact = false,
})
T.require_daemon()

--- Add one turn to the opencode database copy as opencode writes it (tests/opencode/rows.py).
local function opencode_turn(text, answer, stamp)
  local python = repo .. '/.venv/bin/python'
  if vim.fn.executable(python) == 0 then python = 'python3' end
  local r = vim.system({ python, repo .. '/tests/opencode/rows.py', db, text, answer, tostring(stamp) }, { text = true }):wait()
  assert(r.code == 0, r.stderr)
  return vim.split(vim.trim(r.stdout), '%s+')
end

local function pick()
  local orig = vim.ui.select
  local offered, labels
  vim.ui.select = function(items, opts, _)
    offered = items
    labels = vim.tbl_map(opts.format_item, items)
  end
  vim.cmd('Ctxd sessions')
  T.wait(function() return offered end, 'the picker')
  vim.ui.select = orig
  local by_path = {}
  for i, item in ipairs(offered) do by_path[item.path] = labels[i] end
  return by_path, #offered
end

--- Open a session's tree and wait for its rows; the tree buffer.
local function open_tree(path)
  ctxd.open_tree({ session = path })
  T.wait(function() return tree.buf_for(path) and tree.state(tree.buf_for(path)).data end, 'the tree of ' .. path)
  return tree.buf_for(path)
end

T.test(':Ctxd sessions lists Codex and opencode beside pi and Claude Code, with folder, name and agent', function()
  local labels, n = pick()
  T.eq(n, 4, 'four sessions')
  T.match(
    labels[rollout],
    '^Create notes%.txt with a greeting%. Constraint: never edit README%.md%.  %[codex · read%-only%]  %(%d+ entries · /tmp/cx/rec/project · '
  )
  T.match(labels[opencode], '^Hello with bash  %[opencode · read%-only%]  %(%d+ entries · /tmp/oc1/work · ')
  T.match(labels[transcript], '  %[claude · read%-only%]  %(%d+ entries · /home/dev/service · ')
  T.match(labels[pi.path], '^The pi session  %(%d+ entries · /tmp/project · ')
end)

T.test('a Codex rollout opens as a tree that grows as Codex appends to it', function()
  local buf = open_tree(rollout)
  local t = tree.state(buf)
  local before = t.data.entries
  T.match(T.lines(buf)[2], 'codex · read%-only')
  T.truthy(T.line_of(buf, 'compaction'), 'a compaction row')
  local f = assert(io.open(rollout, 'a'))
  f:write(table.concat(vim.list_slice(lines, 41), '\n') .. '\n') -- the third compaction and the second turn
  f:close()
  T.wait(function() return tree.state(buf).data.entries > before end, 'the appended lines in the tree')
  T.truthy(T.line_of(buf, 'Appended a second line.'), 'the new answer in the tree')
end)

T.test('an opencode session opens by <db>#<id> as a tree that grows as opencode writes rows', function()
  local buf = open_tree(opencode)
  T.eq(ctxd.current_session(), opencode)
  local before = tree.state(buf).data.entries
  T.match(T.lines(buf)[1], '^Hello with bash')
  T.match(T.lines(buf)[2], 'opencode · read%-only')
  local ids = opencode_turn('one more thing', 'done, live', 1795642500000)
  T.wait(function() return tree.state(buf).data.leafId == ids[2] end, 'the new opencode turn in the tree')
  T.eq(tree.state(buf).data.entries, before + 2)
  T.truthy(T.line_of(buf, 'done, live'), 'the answer in the tree')
end)

T.run('test_agents')
