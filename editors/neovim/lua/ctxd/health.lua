--- :checkhealth ctxd — the executable, its version, and a daemon that starts and answers.

local M = {}
local H = {}

M.min_version = { 0, 1, 0 }

--- Methods the plugin needs, and those it uses when they are there.
M.required = {
  'session/list',
  'session/open',
  'session/tree',
  'session/entry',
  'session/label',
  'session/fork',
  'context/build',
  'compact',
  'branch',
}
M.optional = { 'session/ledger' }

--- The command that prints the version: the daemon command with `serve ...` replaced by --version.
function M.version_cmd(cmd)
  local out = {}
  for _, arg in ipairs(cmd) do
    if arg == 'serve' then break end
    table.insert(out, arg)
  end
  table.insert(out, '--version')
  return out
end

--- "ctxd 0.1.0" -> { 0, 1, 0 }
function M.parse_version(text)
  local a, b, c = tostring(text or ''):match('ctxd%s+v?(%d+)%.(%d+)%.(%d+)')
  if not a then return nil end
  return { tonumber(a), tonumber(b), tonumber(c) }
end

function H.at_least(v, min)
  for i = 1, 3 do
    if v[i] ~= min[i] then return v[i] > min[i] end
  end
  return true
end

function H.env(cfg)
  if not cfg.cmd_env then return nil end
  return vim.tbl_map(tostring, cfg.cmd_env)
end

--- Start a separate daemon with the configured command, initialize it, list the sessions, stop it.
---@return table { ok, server, methods, sessions, roots, error, ms }
function M.probe(cfg, timeout)
  timeout = timeout or 15000
  local start = vim.uv.hrtime()
  local exited, exit_code = false, nil
  local ok, rpc = pcall(vim.lsp.rpc.start, cfg.cmd, {
    on_exit = function(code) exited, exit_code = true, code end,
  }, { cwd = cfg.cmd_cwd, env = H.env(cfg) })
  if not ok then return { ok = false, error = tostring(rpc) } end
  local function call(method, params)
    local done, res, err = false, nil, nil
    rpc.request(method, params, function(e, r) done, res, err = true, r, e end)
    vim.wait(timeout, function() return done or exited end, 10)
    if not done then
      return nil, { message = exited and ('the daemon exited with code ' .. tostring(exit_code)) or (method .. ' timed out') }
    end
    return res, err
  end
  local options = require('ctxd.config').init_options(cfg)
  options.watch = false
  local init, err = call('initialize', {
    processId = vim.fn.getpid(),
    rootUri = vim.NIL,
    capabilities = vim.empty_dict(),
    initializationOptions = options,
  })
  local out = { ok = init ~= nil and err == nil }
  if not out.ok then
    out.error = err and tostring(err.message or vim.inspect(err)) or 'no answer'
  else
    rpc.notify('initialized', vim.empty_dict())
    local ctxd = ((init.capabilities or {}).experimental or {}).ctxd or {}
    out.server = init.serverInfo
    out.methods = ctxd.methods or {}
    local list, lerr = call('session/list', vim.empty_dict())
    if list then
      out.sessions = #(list.sessions or {})
      out.roots = list.roots
    else
      out.list_error = lerr and tostring(lerr.message) or 'no answer'
    end
    call('shutdown', vim.NIL)
    pcall(rpc.notify, 'exit', vim.NIL)
  end
  vim.wait(2000, function() return exited end, 10)
  if not exited then pcall(rpc.terminate) end
  out.ms = math.floor((vim.uv.hrtime() - start) / 1e6)
  return out
end

function M.check()
  local health = vim.health
  health.start('ctxd.nvim')
  local v = vim.version()
  local nvim = string.format('%d.%d.%d', v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. nvim)
  else
    health.error('Neovim ' .. nvim .. ': ctxd.nvim needs 0.10 or newer')
  end
  local ctxd = require('ctxd')
  if ctxd.config == nil then
    health.info("require('ctxd').setup() has not run: the defaults are in force")
  else
    health.ok('setup() done')
  end
  local cfg = require('ctxd.config').options
  health.info('command: ' .. table.concat(cfg.cmd, ' '))
  if cfg.roots then
    for _, root in ipairs(cfg.roots) do
      if vim.fn.isdirectory(root) == 1 then
        health.ok('session root ' .. root)
      else
        health.warn('session root ' .. root .. ' does not exist (yet)')
      end
    end
  end

  health.start('ctxd executable')
  local exe = vim.fn.exepath(cfg.cmd[1])
  if exe == '' then
    health.error(string.format('`%s` is not executable or not on $PATH', cfg.cmd[1]), {
      'Install ctxd (pip install ctxd, or `make` in its repository) and put `ctxd` on $PATH',
      "or set the command: require('ctxd').setup({ cmd = { '/path/to/ctxd', 'serve' } })",
    })
    return
  end
  health.ok('found ' .. exe)
  local vcmd = M.version_cmd(cfg.cmd)
  local ok, res = pcall(function()
    return vim.system(vcmd, { text = true, cwd = cfg.cmd_cwd, env = H.env(cfg) }):wait(15000)
  end)
  local version = ok and M.parse_version((res.stdout or '') .. (res.stderr or '')) or nil
  if not version then
    health.error(
      string.format('`%s` did not print a ctxd version', table.concat(vcmd, ' ')),
      { ok and vim.trim((res.stderr or '') .. (res.stdout or '')) or tostring(res) }
    )
  elseif H.at_least(version, M.min_version) then
    health.ok(string.format('ctxd %s (at least %s)', table.concat(version, '.'), table.concat(M.min_version, '.')))
  else
    health.error(
      string.format('ctxd %s is too old: ctxd.nvim needs %s', table.concat(version, '.'), table.concat(M.min_version, '.'))
    )
  end

  health.start('ctxd server')
  local probe = M.probe(cfg)
  if not probe.ok then
    health.error('the server did not start: ' .. tostring(probe.error), {
      'Run `' .. table.concat(cfg.cmd, ' ') .. '` in a terminal to see its errors',
      'The daemon log of the plugin is in ' .. vim.lsp.get_log_path(),
    })
    return
  end
  health.ok(
    string.format('%s %s started and answered in %d ms', probe.server and probe.server.name or 'ctxd', probe.server and probe.server.version or '?', probe.ms)
  )
  local have = {}
  for _, m in ipairs(probe.methods or {}) do
    have[m] = true
  end
  local missing = vim.tbl_filter(function(m) return not have[m] end, M.required)
  if #missing == 0 then
    health.ok('all the methods the plugin uses are there')
  else
    health.error('the server lacks methods: ' .. table.concat(missing, ', '), { 'Upgrade ctxd' })
  end
  for _, m in ipairs(M.optional) do
    if not have[m] then health.info(m .. ' is missing: the ledger is read from the tree instead') end
  end
  if probe.sessions then
    health.ok(string.format('%d session(s) under %s', probe.sessions, table.concat(probe.roots or {}, ', ')))
  else
    health.warn('session/list failed: ' .. tostring(probe.list_error))
  end

  local state = require('ctxd.client').state
  health.info('the plugin\'s daemon: ' .. state.status .. (state.error and (' (' .. state.error .. ')') or ''))
end

return M
