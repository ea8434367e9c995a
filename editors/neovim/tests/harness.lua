--- A small test harness for `nvim --headless -u NONE -l tests/<file>.lua`.
---
--- T.test(name, fn) registers a test; T.run() runs them in order, prints `ok - name` or
--- `not ok - name` with the error, then `# <file>: N ok, N not ok`, and exits non-zero on failure.
--- Helpers write real pi session files and wait on real notifications with vim.wait().

local T = {}

local source = debug.getinfo(1, 'S').source:sub(2)
T.tests_dir = vim.fn.fnamemodify(source, ':p:h')
T.plugin_dir = vim.fn.fnamemodify(T.tests_dir, ':h')
T.timeout = tonumber(os.getenv('CTXD_TEST_WAIT_MS') or '') or 10000

vim.opt.rtp:prepend(T.plugin_dir)
vim.opt.swapfile = false
vim.opt.shortmess:append('I')
vim.cmd('runtime plugin/ctxd.lua')

local function out(text)
  io.stdout:write(text .. '\n')
  io.stdout:flush()
end
T.out = out

-- --- notifications --------------------------------------------------------------------------------

T.notes = {}
vim.notify = function(msg, level)
  table.insert(T.notes, { msg = tostring(msg), level = level or vim.log.levels.INFO })
  if os.getenv('CTXD_TEST_VERBOSE') then out('  notify: ' .. tostring(msg)) end
end

--- The notifications whose text matches `pattern` (a Lua pattern), since index `since`.
function T.notes_matching(pattern, since)
  local found = {}
  for i = (since or 0) + 1, #T.notes do
    if T.notes[i].msg:find(pattern) then table.insert(found, T.notes[i]) end
  end
  return found
end

-- --- assertions -----------------------------------------------------------------------------------

function T.fail(msg) error(msg, 2) end

function T.eq(actual, expected, what)
  if not vim.deep_equal(actual, expected) then
    error(
      string.format('%s\n    expected: %s\n    actual:   %s', what or 'values differ', vim.inspect(expected), vim.inspect(actual)),
      2
    )
  end
end

function T.truthy(value, what)
  if not value then error((what or 'expected a true value') .. ', got ' .. vim.inspect(value), 2) end
  return value
end

function T.match(text, pattern, what)
  if type(text) ~= 'string' or not text:find(pattern) then
    error(string.format('%s\n    pattern: %s\n    text:    %s', what or 'no match', pattern, vim.inspect(text)), 2)
  end
end

--- Wait until `cond()` is true (processing events), or fail with `what`.
function T.wait(cond, what, timeout)
  local last_err
  local ok = vim.wait(timeout or T.timeout, function()
    local good, res = pcall(cond)
    if not good then last_err = res end
    return good and res
  end, 10)
  if not ok then
    error('timed out waiting for ' .. (what or 'a condition') .. (last_err and (' (' .. tostring(last_err) .. ')') or ''), 2)
  end
end

--- Raise the error of a call and return its message.
function T.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error('expected an error', 2) end
  return tostring(err)
end

function T.lines(buf) return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false) end

--- Find a buffer by its name (exact) or by a Lua pattern.
function T.buf_named(pattern)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if name == pattern or name:find(pattern) then return buf end
  end
end

--- The line number of the first line of `buf` containing `text` (plain), or nil.
function T.line_of(buf, text)
  for i, l in ipairs(T.lines(buf)) do
    if l:find(text, 1, true) then return i end
  end
end

--- Highlight groups of the extmarks of a line (of a tree, or of the namespace `ns`).
function T.groups_at(buf, lnum, ns)
  ns = ns or require('ctxd.tree').ns
  local marks = vim.api.nvim_buf_get_extmarks(buf, ns, { lnum - 1, 0 }, { lnum - 1, -1 }, { details = true })
  local groups = {}
  for _, m in ipairs(marks) do
    groups[m[4].hl_group] = true
  end
  return groups
end

-- --- the daemon and session files -----------------------------------------------------------------

--- The daemon command, from $CTXD_SERVER_COMMAND (space-separated).
function T.server_cmd()
  local cmd = os.getenv('CTXD_SERVER_COMMAND')
  if not cmd or cmd == '' then cmd = 'ctxd serve' end
  return vim.split(vim.trim(cmd), '%s+')
end

--- A fresh directory for session files.
function T.tempdir(name)
  local base = os.getenv('CTXD_TEST_TMP') or vim.fn.tempname()
  local dir = base .. '/' .. (name or 'root') .. '-' .. vim.fn.getpid() .. '-' .. math.random(1e6)
  vim.fn.mkdir(dir, 'p')
  return vim.uv.fs_realpath(dir)
end

local function iso(ms)
  return os.date('!%Y-%m-%dT%H:%M:%S', math.floor(ms / 1000)) .. string.format('.%03dZ', ms % 1000)
end

T.FILE_TEXT = table.concat(
  vim.tbl_map(function(i) return string.format('line %02d of the file under test, padded to be long enough', i) end, vim.fn.range(1, 20)),
  '\n'
)

--- Entry builders (pi's format). Each returns a table without id/parentId.
function T.user(text, ms)
  return { type = 'message', message = { role = 'user', content = text, timestamp = ms } }
end

function T.assistant(text, total, ms, call)
  local content = {}
  if text and text ~= '' then table.insert(content, { type = 'text', text = text }) end
  if call then table.insert(content, { type = 'toolCall', id = call.id, name = call.name, arguments = call.arguments }) end
  return {
    type = 'message',
    message = {
      role = 'assistant',
      content = content,
      provider = 'test',
      model = 'test-model',
      usage = { input = total - 100, output = 100, cacheRead = 0, cacheWrite = 0, totalTokens = total },
      stopReason = call and 'toolUse' or 'stop',
      timestamp = ms,
    },
  }
end

function T.tool_result(id, name, text, ms)
  return {
    type = 'message',
    message = {
      role = 'toolResult',
      toolCallId = id,
      toolName = name,
      content = { { type = 'text', text = text } },
      isError = false,
      timestamp = ms,
    },
  }
end

local Session = {}
Session.__index = Session

--- Write a session file: a header, a name, `turns` tool-loop turns and a label on the first answer.
--- Entry ids are 8 hex digits: the n-th entry is `prefix` followed by n (e.g. a0000001).
---@return table session { path, ids, leaf, by_text = text -> id }
function T.write_session(root, opts)
  opts = opts or {}
  local turns = opts.turns or 3
  local prefix = opts.prefix or 'a'
  local dir = root .. '/--tmp-project--'
  vim.fn.mkdir(dir, 'p')
  local ms = opts.start_ms or 1735732800000 -- 2025-01-01T12:00:00Z
  local uuid = string.format('%s1234567-0000-7000-8000-%012d', prefix, math.random(1e9))
  local path = string.format('%s/%s_%s.jsonl', dir, (iso(ms):gsub('[:.]', '-')), uuid)
  local self = setmetatable({ path = path, ids = {}, by_text = {}, n = 0, prefix = prefix, ms = ms, leaf = nil }, Session)
  local f = assert(io.open(path, 'w'))
  f:write(vim.json.encode({ type = 'session', version = 3, id = uuid, timestamp = iso(ms), cwd = '/tmp/project' }) .. '\n')
  f:close()
  local entries = { { type = 'session_info', name = opts.name or 'Nvim test session' } }
  for k = 1, turns do
    local t = ms + k * 1000
    table.insert(entries, T.user('Question ' .. k, t))
    table.insert(entries, T.assistant('Reading ' .. k, 2000 + 1000 * k, t + 1, { id = 'call' .. k, name = 'read', arguments = { path = 'file' .. k .. '.txt' } }))
    table.insert(entries, T.tool_result('call' .. k, 'read', T.FILE_TEXT, t + 2))
    table.insert(entries, T.assistant('Answer ' .. k, 2500 + 1000 * k, t + 3))
  end
  self:append(entries)
  if turns >= 1 then self:append({ { type = 'label', targetId = self.by_text['Answer 1'], label = 'first answer' } }) end
  return self
end

--- Append entries to the file from outside (as another process would), one JSON line each.
--- Each entry's parent is the previous one (the first's: `parent`, default the last written).
function Session:append(entries, parent)
  local f = assert(io.open(self.path, 'a'))
  local prev = parent or self.leaf
  for _, e in ipairs(entries) do
    self.n = self.n + 1
    local id = string.format('%s%07x', self.prefix, self.n)
    e.id = id
    e.parentId = prev or vim.NIL
    e.timestamp = e.timestamp or iso(self.ms + self.n * 10)
    f:write(vim.json.encode(e) .. '\n')
    table.insert(self.ids, id)
    local m = e.message
    local text = m and (type(m.content) == 'string' and m.content or (m.content[1] and m.content[1].text)) or e.name
    if text then self.by_text[text] = id end
    prev = id
  end
  f:close()
  self.leaf = prev
  return prev
end

-- --- running --------------------------------------------------------------------------------------

T.tests = {}

--- Make sure the daemon answers before the tests run; if it does not, every test of the suite is
--- reported failed at once with the reason (instead of each waiting for its timeout).
function T.require_daemon()
  local result, err = require('ctxd.client').request_sync('session/list', nil, 30000)
  if not result then
    T.abort = 'the daemon did not answer: ' .. (err and tostring(err.message) or 'no answer')
  end
end

function T.test(name, fn) table.insert(T.tests, { name = name, fn = fn }) end

function T.run(file)
  local passed, failed = 0, 0
  for _, t in ipairs(T.tests) do
    if T.abort then
      failed = failed + 1
      out(string.format('not ok - %s (%s)', t.name, T.abort))
      goto continue
    end
    local started = vim.uv.hrtime()
    local ok, err = xpcall(t.fn, debug.traceback)
    local ms = math.floor((vim.uv.hrtime() - started) / 1e6)
    if ok then
      passed = passed + 1
      out(string.format('ok - %s (%d ms)', t.name, ms))
    else
      failed = failed + 1
      out(string.format('not ok - %s (%d ms)', t.name, ms))
      for line in tostring(err):gmatch('[^\n]+') do
        out('    ' .. line)
      end
      if T.show_on_failure then
        local ok_show, shown = pcall(T.show_on_failure)
        for _, line in ipairs(ok_show and shown or { tostring(shown) }) do
          out('    | ' .. line)
        end
      end
    end
    ::continue::
  end
  pcall(function() require('ctxd.client').stop_sync(3000) end)
  out(string.format('# %s: %d ok, %d not ok', file or 'tests', passed, failed))
  os.exit(failed == 0 and 0 or 1)
end

return T
