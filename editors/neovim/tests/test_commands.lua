-- :Ctxd sessions, status, stop/restart, files created and deleted outside, :checkhealth ctxd, and
-- what happens when the daemon is missing or dies, against a real `ctxd serve`.
local T = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h') .. '/harness.lua')
local ctxd = require('ctxd')
local client = require('ctxd.client')
local tree = require('ctxd.tree')

local root = T.tempdir('commands')
local a = T.write_session(root, { name = 'First session', prefix = 'a' })
local b = T.write_session(root, { name = 'Second session', prefix = 'b', turns = 2, start_ms = 1735736400000 })
local good = {
  cmd = T.server_cmd(),
  roots = { root },
  auto_compact = false,
  compaction = { context_window = 40000 },
}
ctxd.setup(good)
T.require_daemon()

local seen = {}
vim.api.nvim_create_autocmd('User', {
  pattern = 'CtxdUpdated',
  callback = function(ev) table.insert(seen, { kind = ev.data.kind, session = ev.data.session, text = ctxd.statusline() }) end,
})

local function daemon_pids()
  return vim.tbl_filter(function(pid)
    local ok, info = pcall(vim.api.nvim_get_proc, pid)
    return ok and info ~= nil and not (info.name or ''):find('timeout')
  end, vim.api.nvim_get_proc_children(vim.fn.getpid()))
end

local function checkhealth()
  vim.cmd('silent checkhealth ctxd')
  local lines = T.lines(0)
  vim.cmd('tabclose')
  return table.concat(lines, '\n')
end

T.test(':Ctxd sessions picks a session with vim.ui.select and opens its tree', function()
  local orig = vim.ui.select
  local offered, labels, prompt
  vim.ui.select = function(items, opts, on_choice)
    offered, prompt = items, opts.prompt
    labels = vim.tbl_map(opts.format_item, items)
    for _, item in ipairs(items) do
      if item.name == 'Second session' then return on_choice(item) end
    end
    on_choice(nil)
  end
  vim.cmd('Ctxd sessions')
  T.wait(function() return offered end, 'the picker')
  vim.ui.select = orig
  T.eq(prompt, 'ctxd session')
  T.eq(#offered, 2)
  table.sort(labels)
  T.match(labels[1], '^First session  %(14 entries · /tmp/project · %d%d%d%d%-%d%d%-%d%d %d%d:%d%d%)$')
  T.match(labels[2], '^Second session  %(10 entries · /tmp/project · ')
  T.wait(function() return tree.buf_for(b.path) and tree.state(tree.buf_for(b.path)).data end, "the chosen session's tree")
  T.eq(T.lines(tree.buf_for(b.path))[1], 'Second session')
  T.eq(ctxd.current_session(), b.path)
  T.wait(function() return ctxd.statusline() == 'ctxd 4.5k/40k 11%' end, 'its usage in the statusline')
  T.eq(vim.fn.getcompletion('Ctxd tree ' .. root, 'cmdline'), { a.path, b.path }, 'session paths complete after a listing')
end)

T.test(':Ctxd status tells the daemon, the session and its usage', function()
  local n = #T.notes
  vim.cmd('Ctxd status')
  local msg = T.notes[n + 1].msg
  T.match(msg, '^ctxd: daemon running %(ctxd 0%.1%.0%)\n')
  T.match(msg, '\nsession: ' .. vim.pesc(b.path) .. '\n')
  T.match(msg, '\ncontext: 4,500 of 40,000 tokens %(11%.2%%%), compaction due at 23,616')
end)

T.test('files created and deleted outside: CtxdUpdated, the tree and the statusline know', function()
  local n = #seen
  local c = T.write_session(root, { name = 'Third session', prefix = 'c', turns = 1 })
  T.wait(function()
    for i = n + 1, #seen do
      if seen[i].kind == 'create' and seen[i].session == c.path then return true end
    end
  end, 'CtxdUpdated for the new file')
  os.remove(b.path)
  local bb = tree.buf_for(b.path)
  T.wait(function() return T.lines(bb)[2]:find('^deleted · ') end, 'the tree marked deleted')
  T.eq(ctxd.statusline(), 'ctxd deleted')
end)

T.test(':Ctxd tree uses the current session; :Ctxd tree {path} another', function()
  vim.cmd('Ctxd tree ' .. vim.fn.fnameescape(a.path))
  T.wait(function() return tree.buf_for(a.path) and tree.state(tree.buf_for(a.path)).data end, 'the first tree')
  T.eq(ctxd.current_session(), a.path)
  vim.cmd('wincmd p')
  vim.cmd('enew')
  vim.cmd('Ctxd tree')
  T.eq(vim.api.nvim_get_current_buf(), tree.buf_for(a.path), 'the current session, focused')
  T.wait(function() return ctxd.statusline() == 'ctxd 5.5k/40k 14%' end, 'its usage')
end)

T.test(':checkhealth ctxd: executable, version, a server that starts', function()
  local report = checkhealth()
  T.match(report, 'OK Neovim 0%.1%d')
  T.match(report, 'OK found /')
  T.match(report, 'OK ctxd 0%.1%.0 %(at least 0%.1%.0%)')
  T.match(report, 'OK ctxd 0%.1%.0 started and answered in %d+ ms')
  T.match(report, 'OK all the methods the plugin uses are there')
  T.match(report, 'OK 2 session%(s%) under ' .. vim.pesc(root))
  T.truthy(not report:find('ERROR'), 'no error:\n' .. report)
end)

T.test('a daemon that dies is reported; the next command starts a new one', function()
  local pids = daemon_pids()
  T.eq(#pids, 1, 'one daemon process')
  local n = #T.notes
  vim.uv.kill(pids[1], 'sigkill')
  T.wait(function() return client.state.status == 'failed' end, 'the failure')
  T.match(T.notes[n + 1].msg, '^ctxd: the daemon exited %(code %d+, signal 9%)')
  T.eq(ctxd.statusline(), 'ctxd failed')
  local abuf = tree.buf_for(a.path)
  tree.refresh(abuf)
  T.wait(function() return client.state.status == 'running' end, 'a new daemon')
  T.wait(function() return ctxd.statusline() == 'ctxd 5.5k/40k 14%' end, 'the usage again')
  a:append({ T.user('After the restart', 1735740000000) })
  T.wait(function() return T.line_of(abuf, 'After the restart') end, 'live updates from the new daemon')
end)

T.test(':Ctxd stop, :Ctxd restart, and VimLeavePre stop the daemon', function()
  vim.cmd('Ctxd stop')
  T.wait(function() return #daemon_pids() == 0 end, 'no daemon process')
  T.eq(client.state.status, 'stopped')
  T.eq(ctxd.statusline(), '', 'nothing in the statusline without a daemon')
  vim.cmd('Ctxd restart')
  T.wait(function() return client.state.status == 'running' and #daemon_pids() == 1 end, 'a daemon again')
  vim.api.nvim_exec_autocmds('VimLeavePre', {})
  T.eq(client.state.status, 'stopped')
  T.wait(function() return #daemon_pids() == 0 end, 'no daemon process after VimLeavePre')
end)

T.test('setup() with other daemon options stops the running daemon', function()
  ctxd.open_tree({ session = a.path })
  T.wait(function() return client.state.status == 'running' end, 'a daemon')
  ctxd.setup(good) -- the same options: it keeps running
  T.eq(client.state.status, 'running')
  ctxd.setup(vim.tbl_extend('force', good, { compaction = { context_window = 80000 } }))
  T.wait(function() return #daemon_pids() == 0 end, 'the old daemon gone')
  tree.refresh(tree.buf_for(a.path))
  T.wait(function() return ctxd.statusline():find('/80k ') end, 'the new window in use')
end)

T.test('a missing executable: a clear error, and :checkhealth says how to fix it', function()
  ctxd.setup({ cmd = { '/nonexistent/ctxd', 'serve' }, roots = { root } })
  T.wait(function() return #daemon_pids() == 0 end, 'the old daemon gone')
  local n = #T.notes
  local got
  ctxd.request('session/list', nil, function(err) got = err end)
  T.wait(function() return got end, 'the request to fail')
  T.match(got.message, '`/nonexistent/ctxd` is not executable')
  local notes = T.notes_matching("^ctxd: `/nonexistent/ctxd` is not executable; set `cmd` in require%('ctxd'%)%.setup%(%)", n)
  T.eq(#notes, 1, 'one notification: ' .. vim.inspect(vim.list_slice(T.notes, n + 1)))
  T.eq(notes[1].level, vim.log.levels.ERROR)
  local report = checkhealth()
  T.match(report, 'ERROR `/nonexistent/ctxd` is not executable or not on %$PATH')
end)

T.test('a command that is not a ctxd daemon: initialize fails with a message', function()
  ctxd.setup({ cmd = { 'sh', '-c', 'echo not a daemon >&2; exit 3' }, roots = { root } })
  local got
  ctxd.request('session/list', nil, function(err) got = err end)
  T.wait(function() return got end, 'the request to fail')
  T.match(got.message, 'exited %(code 3')
  T.eq(client.state.status, 'failed')
  local report = checkhealth()
  T.match(report, 'ERROR the server did not start')
  ctxd.setup(good)
  local list
  ctxd.request('session/list', nil, function(err, res) list = { err = err, res = res } end)
  T.wait(function() return list end, 'a working daemon again')
  T.eq(list.err, nil)
end)

T.run('test_commands')
