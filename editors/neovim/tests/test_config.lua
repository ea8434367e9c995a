-- setup(), validation, the command and its completion, highlights, the statusline text, the docs.
-- No daemon is needed here.
local T = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h') .. '/harness.lua')
local ctxd = require('ctxd')
local config = require('ctxd.config')

T.test('defaults work with no options at all', function()
  ctxd.setup()
  T.eq(ctxd.config.cmd, { 'ctxd', 'serve' }, 'default command')
  T.eq(ctxd.config.tree.position, 'right')
  T.eq(ctxd.config.tree.collapse, 8)
  T.eq(config.init_options(ctxd.config), { watch = true, autoCompact = true }, 'no roots, no compaction by default')
  ctxd.setup({})
  T.eq(ctxd.config.tree.mappings.open, '<CR>')
end)

T.test('setup errors name the option, the expectation and the value', function()
  local cases = {
    { 5, '(ctxd) setup() expects a table or nil, got 5 (number)' },
    { { nope = 1 }, '(ctxd) unknown option `nope` (known here: ' },
    { { tree = 5 }, '(ctxd) option `tree` must be a table, got 5 (number)' },
    { { tree = { size = 'wide' } }, '(ctxd) option `tree.size` must be a positive integer, got "wide" (string)' },
    { { tree = { size = 0 } }, '(ctxd) option `tree.size` must be a positive integer, got 0 (number)' },
    { { tree = { position = 'middle' } }, "(ctxd) option `tree.position` must be one of 'left', 'right', 'top', 'bottom', 'current', got \"middle\" (string)" },
    { { tree = { collapse = -1 } }, '(ctxd) option `tree.collapse` must be a non-negative integer, got -1 (number)' },
    { { tree = { keep = 1.5 } }, '(ctxd) option `tree.keep` must be a positive integer, got 1.5 (number)' },
    { { tree = { widht = 3 } }, '(ctxd) unknown option `tree.widht` (known here: collapse, keep, mappings, position, size)' },
    { { tree = { mappings = { open = 5 } } }, '(ctxd) option `tree.mappings.open` must be a key sequence (string) or false, got 5 (number)' },
    { { tree = { mappings = { jump = 'j' } } }, '(ctxd) unknown option `tree.mappings.jump`' },
    { { cmd = {} }, '(ctxd) option `cmd` must be a list of strings (the command and its arguments) or a non-empty string, got {} (table)' },
    { { cmd = { 'ctxd', 3 } }, '(ctxd) option `cmd` must be a list of strings' },
    { { cmd_env = { PATH = true } }, '(ctxd) option `cmd_env` must be a table of environment variables (name = string)' },
    { { roots = '/tmp' }, '(ctxd) option `roots` must be a non-empty list of non-empty strings, got "/tmp" (string)' },
    { { watch = 'yes' }, '(ctxd) option `watch` must be true or false, got "yes" (string)' },
    { { auto_compact = 1 }, '(ctxd) option `auto_compact` must be true or false, got 1 (number)' },
    { { auto_compact_external = 'yes' }, '(ctxd) option `auto_compact_external` must be true or false, got "yes" (string)' },
    { { model = '' }, '(ctxd) option `model` must be a non-empty string, got "" (string)' },
    { { compaction = 3 }, '(ctxd) option `compaction` must be a table, got 3 (number)' },
    { { compaction = { keep_recent_tokens = -5 } }, '(ctxd) option `compaction.keep_recent_tokens` must be a non-negative integer, got -5 (number)' },
    { { compaction = { trigger_percent = 75 } }, '(ctxd) option `compaction.trigger_percent` must be a number in (0, 1], got 75 (number)' },
    { { compaction = { keepRecentTokens = 5 } }, '(ctxd) unknown option `compaction.keepRecentTokens` (known here: ' },
    { { request_timeout = 0 }, '(ctxd) option `request_timeout` must be a positive integer, got 0 (number)' },
    { { debounce_ms = 'x' }, '(ctxd) option `debounce_ms` must be a non-negative integer' },
    { { notify_compaction = 'no' }, '(ctxd) option `notify_compaction` must be true or false' },
    { { scratch = 'float' }, "(ctxd) option `scratch` must be one of 'split', 'vsplit', 'tab', 'current', got \"float\" (string)" },
    { { statusline = { format = 'x' } }, '(ctxd) option `statusline.format` must be a function, got "x" (string)' },
    { { statusline = { icon = 'x' } }, '(ctxd) unknown option `statusline.icon` (known here: format)' },
    { { init_options = 'x' }, '(ctxd) option `init_options` must be a table, got "x" (string)' },
  }
  for _, case in ipairs(cases) do
    local msg = T.error_of(ctxd.setup, case[1])
    if msg:sub(1, #case[2]) ~= case[2] then
      T.fail(string.format('setup(%s)\n    expected: %s\n    actual:   %s', vim.inspect(case[1]), case[2], msg))
    end
  end
end)

T.test('a failed setup leaves the previous configuration in force', function()
  ctxd.setup({ tree = { size = 42 } })
  T.error_of(ctxd.setup, { tree = { size = 'x' } })
  T.eq(ctxd.config.tree.size, 42)
  T.eq(config.options.tree.size, 42)
end)

T.test('options merge over the defaults and become initializationOptions', function()
  ctxd.setup({
    cmd = 'python3 -m ctxd  serve',
    roots = { '/tmp/a/', '/tmp/b' },
    watch = false,
    auto_compact = false,
    model = 'openai/gpt-4o-mini',
    api_base = 'http://localhost:4000',
    compaction = { keep_recent_tokens = 500, context_window = 30000, trigger_percent = 0.5, enabled = true },
    init_options = { durability = 'fsync' },
    tree = { mappings = { fork = false } },
  })
  T.eq(ctxd.config.cmd, { 'python3', '-m', 'ctxd', 'serve' }, 'a string command is split')
  T.eq(ctxd.config.tree.mappings.fork, false)
  T.eq(ctxd.config.tree.mappings.open, '<CR>', 'other mappings keep their defaults')
  T.eq(config.init_options(ctxd.config), {
    roots = { '/tmp/a', '/tmp/b' },
    watch = false,
    autoCompact = false,
    model = 'openai/gpt-4o-mini',
    apiBase = 'http://localhost:4000',
    compaction = { keepRecentTokens = 500, contextWindow = 30000, triggerPercent = 0.5, enabled = true },
    durability = 'fsync',
  })
  ctxd.setup({ cmd = { 'x' } })
  T.eq(ctxd.config.cmd, { 'x' }, 'a list command replaces the default, it is not merged')
  ctxd.setup({ auto_compact_external = true })
  T.eq(config.init_options(ctxd.config), { watch = true, autoCompact = true, autoCompactExternal = true })
end)

T.test('setup is idempotent: one augroup, highlight links with default = true', function()
  vim.api.nvim_set_hl(0, 'CtxdLeaf', { bold = true }) -- the user's own choice wins
  ctxd.setup()
  local first = #vim.api.nvim_get_autocmds({ group = 'Ctxd' })
  ctxd.setup()
  ctxd.setup({ tree = { size = 30 } })
  T.eq(#vim.api.nvim_get_autocmds({ group = 'Ctxd' }), first, 'autocommands are not duplicated')
  T.truthy(first >= 2, 'ColorScheme and VimLeavePre autocommands')
  T.eq(vim.api.nvim_get_hl(0, { name = 'CtxdLeaf' }).bold, true, "the user's CtxdLeaf is kept")
  for group, link in pairs(ctxd.highlights) do
    if group ~= 'CtxdLeaf' then
      T.eq(vim.api.nvim_get_hl(0, { name = group }).link, link, group .. ' links to ' .. link)
    end
    T.truthy(group:match('^Ctxd'), 'group names start with Ctxd')
  end
  vim.cmd('hi clear')
  vim.api.nvim_exec_autocmds('ColorScheme', {})
  T.eq(vim.api.nvim_get_hl(0, { name = 'CtxdOffPath' }).link, 'Comment', 'links come back after a colorscheme')
end)

T.test(':Ctxd exists once, with subcommand completion', function()
  vim.cmd('runtime plugin/ctxd.lua') -- the load guard makes a second load harmless
  T.eq(vim.g.loaded_ctxd, true)
  local cmds = vim.api.nvim_get_commands({})
  T.truthy(cmds.Ctxd, ':Ctxd is defined')
  T.eq(cmds.Ctxd.nargs, '*')
  local all = vim.fn.getcompletion('Ctxd ', 'cmdline')
  T.eq(all, { 'compact', 'context', 'ledger', 'preview', 'restart', 'sessions', 'status', 'stop', 'tree', 'usage' })
  T.eq(vim.fn.getcompletion('Ctxd co', 'cmdline'), { 'compact', 'context' })
  T.eq(vim.fn.getcompletion('Ctxd compact ', 'cmdline'), {})
end)

T.test('an unknown subcommand is an error that lists the valid ones', function()
  local before = #T.notes
  vim.cmd('Ctxd frobnicate')
  local note = T.notes[before + 1]
  T.truthy(note, 'a notification')
  T.eq(note.level, vim.log.levels.ERROR)
  T.match(note.msg, "unknown subcommand 'frobnicate' %(expected one of: compact, context,")
end)

T.test('statusline: numbers, usage, compacting, nothing without a session', function()
  ctxd.setup()
  local sl = require('ctxd.statusline')
  T.eq({ sl.number(515), sl.number(4987), sl.number(112000), sl.number(200000), sl.number(1500000) }, { '515', '5.0k', '112k', '200k', '1.5M' })
  local state = require('ctxd.client').state
  T.eq(ctxd.statusline(), '', 'empty without a session')
  state.status = 'running'
  state.current = '/s.jsonl'
  T.eq(ctxd.statusline(), 'ctxd', 'a session without usage yet')
  state.usage['/s.jsonl'] = { session = '/s.jsonl', tokens = 112000, window = 200000, percent = 56.0, threshold = 180000 }
  T.eq(ctxd.statusline(), 'ctxd 112k/200k 56%')
  state.compaction['/s.jsonl'] = { session = '/s.jsonl', state = 'running', trigger = 'manual' }
  T.eq(ctxd.statusline(), 'ctxd compacting…')
  state.compaction['/s.jsonl'].state = 'succeeded'
  T.eq(ctxd.statusline(), 'ctxd 112k/200k 56%')
  ctxd.setup({ statusline = { format = function(info) return 'custom ' .. info.usage.tokens end } })
  T.eq(ctxd.statusline(), 'custom 112000')
  ctxd.setup({ statusline = { format = function() error('boom') end } })
  T.eq(ctxd.statusline(), 'ctxd: statusline.format failed', 'a failing format does not break the statusline')
  ctxd.setup()
  state.status, state.current = 'stopped', nil
  state.usage['/s.jsonl'], state.compaction['/s.jsonl'] = nil, nil
end)

T.test('statusline() is cheap: no request, no process', function()
  local client = require('ctxd.client')
  local calls = 0
  local orig = client.request
  client.request = function(...)
    calls = calls + 1
    return orig(...)
  end
  local t0 = vim.uv.hrtime()
  for _ = 1, 10000 do
    ctxd.statusline()
  end
  local per_call_us = (vim.uv.hrtime() - t0) / 1e3 / 10000
  client.request = orig
  T.eq(calls, 0, 'no request')
  T.eq(client.state.status, 'stopped', 'the daemon was not started')
  T.truthy(per_call_us < 50, string.format('under 50 µs a call (%.1f µs)', per_call_us))
end)

T.test('the tree folds linear runs longer than `collapse`, keeping labels, compactions and the leaf', function()
  local tree = require('ctxd.tree')
  local rows = {}
  for i = 1, 12 do
    rows[i] = { id = 'r' .. i, depth = 0, childCount = 1, type = 'message', labels = {} }
  end
  rows[12].childCount = 0
  rows[12].isLeaf = true
  local folds = tree.compute_folds(rows, 8, 2)
  T.eq(vim.tbl_map(function(f) return { f.first, f.last, f.key } end, folds), { { 3, 10, 'r3' } })
  rows[6].labels = { 'x' }
  rows[8].type = 'compaction'
  folds = tree.compute_folds(rows, 8, 2)
  T.eq(vim.tbl_map(function(f) return { f.first, f.last } end, folds), { { 3, 5 }, { 9, 10 } }, 'shown rows split the fold; single rows are not folded')
  T.eq(tree.compute_folds(rows, 0, 2), {}, 'collapse = 0 never folds')
  -- A branch point: the runs below it are separate.
  local branched = {
    { id = 'a', depth = 0, childCount = 2 },
    { id = 'b', depth = 1, childCount = 0 },
    { id = 'c', depth = 1, childCount = 0 },
  }
  T.eq(tree.compute_folds(branched, 1, 1), {})
end)

T.test('doc/ctxd.txt has valid, unique tags', function()
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir .. '/doc', 'p')
  vim.fn.writefile(vim.fn.readfile(T.plugin_dir .. '/doc/ctxd.txt'), dir .. '/doc/ctxd.txt')
  vim.cmd('helptags ' .. vim.fn.fnameescape(dir .. '/doc'))
  local tags = {}
  for _, line in ipairs(vim.fn.readfile(dir .. '/doc/tags')) do
    tags[line:match('^(%S+)')] = true
  end
  for _, tag in ipairs({ 'ctxd.txt', 'ctxd', ':Ctxd', 'ctxd-setup', 'ctxd-config', 'ctxd-tree', 'ctxd-mappings', 'ctxd-statusline', 'CtxdUpdated', 'ctxd-highlights', 'ctxd-health', 'ctxd-api' }) do
    T.truthy(tags[tag], 'tag *' .. tag .. '*')
  end
  -- Every |link| points at a tag of this file or of Neovim's help.
  local text = table.concat(vim.fn.readfile(T.plugin_dir .. '/doc/ctxd.txt'), '\n')
  for link in text:gmatch('|([^|%s]+)|') do
    if not tags[link] then
      local ok = pcall(vim.cmd, 'help ' .. link)
      T.truthy(ok, 'the help link |' .. link .. '| resolves')
      pcall(vim.cmd, 'helpclose')
    end
  end
end)

T.run('test_config')
