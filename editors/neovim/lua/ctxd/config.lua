--- ctxd.nvim configuration: defaults, validation and the daemon's initializationOptions.
---
--- Every option is checked by `validate()`; a wrong one raises an error that names it, says what
--- was expected and shows what was given, e.g.
---   (ctxd) option `tree.size` must be a positive integer, got "wide" (string)

local M = {}
local H = {}

--- The defaults. `nil` means "leave it to the daemon".
M.defaults = {
  -- How to start the daemon: a list of strings (or one string, split on whitespace). Default: the ctxd that
  -- `ctxd setup neovim` named in lua/ctxd/installed.lua, else `ctxd` on PATH.
  cmd = (function()
    local ok, installed = pcall(require, 'ctxd.installed')
    return ok and type(installed) == 'table' and installed.cmd or { 'ctxd', 'serve' }
  end)(),
  -- Extra environment variables and working directory for the daemon.
  cmd_env = nil,
  cmd_cwd = nil,

  -- initializationOptions sent to the daemon.
  roots = nil, -- session roots (list of directories); nil = the daemon's default (~/.pi/agent/sessions)
  watch = true, -- follow the session files (live updates)
  auto_compact = true, -- let the daemon compact on its own when a context fills up
  auto_compact_external = false, -- ... also when another process (an agent) wrote the turn; off: the agent compacts
  model = nil, -- the summariser model (litellm name); nil = offline summariser
  api_base = nil,
  compaction = {}, -- compaction settings, snake_case (see |ctxd-config|)
  init_options = {}, -- extra initializationOptions, sent verbatim (camelCase)

  -- How long synchronous helpers wait for the daemon (milliseconds).
  request_timeout = 10000,
  -- Delay (milliseconds) before a tree re-reads the session after a change notification.
  debounce_ms = 30,
  -- Tell about finished or failed compactions with vim.notify().
  notify_compaction = true,

  tree = {
    position = 'right', -- 'left' | 'right' | 'top' | 'bottom' | 'current'
    size = 60, -- columns (left/right) or lines (top/bottom)
    collapse = 8, -- fold linear runs longer than this (0: never)
    keep = 2, -- entries shown at each end of a folded run
    mappings = {
      open = '<CR>',
      branch = 'b',
      branch_summary = 'B',
      label = 'L',
      pin = 'P',
      fork = 'f',
      compact = 'c',
      compact_instructions = 'C',
      preview = 'p',
      context = 'x',
      ledger = 'gl',
      refresh = 'R',
      close = 'q',
      help = 'g?',
    },
  },

  -- How scratch buffers (entry, context, preview, ledger) open.
  scratch = 'split', -- 'split' | 'vsplit' | 'tab' | 'current'

  statusline = {
    -- function(info) -> string, to replace the default text (see |ctxd-statusline|).
    format = nil,
  },
}

--- The options in force (a deep copy of the defaults until setup() runs).
M.options = vim.deepcopy(M.defaults)

-- compaction option (snake_case, for Lua) -> ctxd's camelCase key, with its check.
H.compaction_keys = {
  enabled = { 'enabled', 'boolean' },
  reserve_tokens = { 'reserveTokens', 'count' },
  keep_recent_tokens = { 'keepRecentTokens', 'count' },
  context_window = { 'contextWindow', 'positive' },
  trigger_percent = { 'triggerPercent', 'fraction' },
  target_percent = { 'targetPercent', 'fraction' },
  keep_last_turns = { 'keepLastTurns', 'count' },
  max_attempts = { 'maxAttempts', 'positive' },
  model = { 'model', 'string' },
  api_base = { 'apiBase', 'string' },
  api_key = { 'apiKey', 'string' },
  timeout_seconds = { 'timeoutSeconds', 'positive_number' },
  max_output_tokens = { 'maxOutputTokens', 'positive' },
  custom_instructions = { 'customInstructions', 'string' },
}

-- Checks: name -> { predicate, what the option must be }.
H.checks = {
  boolean = { function(v) return type(v) == 'boolean' end, 'true or false' },
  string = { function(v) return type(v) == 'string' end, 'a string' },
  nonempty = { function(v) return type(v) == 'string' and v ~= '' end, 'a non-empty string' },
  count = {
    function(v) return type(v) == 'number' and v >= 0 and v % 1 == 0 end,
    'a non-negative integer',
  },
  positive = {
    function(v) return type(v) == 'number' and v > 0 and v % 1 == 0 end,
    'a positive integer',
  },
  positive_number = { function(v) return type(v) == 'number' and v > 0 end, 'a positive number' },
  fraction = {
    function(v) return type(v) == 'number' and v > 0 and v <= 1 end,
    'a number in (0, 1]',
  },
  ['function'] = { function(v) return type(v) == 'function' end, 'a function' },
  lhs = {
    function(v) return v == false or (type(v) == 'string' and v ~= '') end,
    'a key sequence (string) or false',
  },
  string_list = {
    function(v)
      if type(v) ~= 'table' or not vim.islist(v) or #v == 0 then return false end
      for _, s in ipairs(v) do
        if type(s) ~= 'string' or s == '' then return false end
      end
      return true
    end,
    'a non-empty list of non-empty strings',
  },
  cmd = {
    function(v)
      if type(v) == 'string' then return v:match('%S') ~= nil end
      return H.checks.string_list[1](v)
    end,
    'a list of strings (the command and its arguments) or a non-empty string',
  },
  env = {
    function(v)
      if type(v) ~= 'table' then return false end
      for k, s in pairs(v) do
        if type(k) ~= 'string' or (type(s) ~= 'string' and type(s) ~= 'number') then return false end
      end
      return true
    end,
    'a table of environment variables (name = string)',
  },
  table = { function(v) return type(v) == 'table' end, 'a table' },
  position = {
    function(v) return vim.tbl_contains({ 'left', 'right', 'top', 'bottom', 'current' }, v) end,
    "one of 'left', 'right', 'top', 'bottom', 'current'",
  },
  scratch = {
    function(v) return vim.tbl_contains({ 'split', 'vsplit', 'tab', 'current' }, v) end,
    "one of 'split', 'vsplit', 'tab', 'current'",
  },
}

-- The schema: key -> check name (may be nil: option optional) or nested schema (a table).
H.schema = {
  cmd = 'cmd',
  cmd_env = '?env',
  cmd_cwd = '?nonempty',
  roots = '?string_list',
  watch = 'boolean',
  auto_compact = 'boolean',
  auto_compact_external = 'boolean',
  model = '?nonempty',
  api_base = '?nonempty',
  compaction = 'compaction', -- special
  init_options = 'table',
  request_timeout = 'positive',
  debounce_ms = 'count',
  notify_compaction = 'boolean',
  tree = {
    position = 'position',
    size = 'positive',
    collapse = 'count',
    keep = 'positive',
    mappings = 'mappings', -- special
  },
  scratch = 'scratch',
  statusline = {
    format = '?function',
  },
}

function H.describe(value)
  if type(value) == 'string' then return string.format('%q (string)', value) end
  if type(value) == 'table' then
    local text = vim.inspect(value, { newline = ' ', indent = '' })
    if #text > 60 then text = text:sub(1, 57) .. '...' end
    return text .. ' (table)'
  end
  return string.format('%s (%s)', tostring(value), type(value))
end

function H.fail(path, expected, value)
  error(string.format('(ctxd) option `%s` must be %s, got %s', path, expected, H.describe(value)), 0)
end

function H.unknown(path, known)
  local names = vim.tbl_keys(known)
  table.sort(names)
  error(
    string.format('(ctxd) unknown option `%s` (known here: %s)', path, table.concat(names, ', ')),
    0
  )
end

function H.check(path, value, check)
  local optional = check:sub(1, 1) == '?'
  if optional then
    check = check:sub(2)
    if value == nil then return end
  end
  local spec = H.checks[check]
  if value == nil or not spec[1](value) then H.fail(path, spec[2], value) end
end

function H.validate_table(prefix, value, schema)
  for key in pairs(value) do
    if schema[key] == nil then H.unknown(prefix .. tostring(key), schema) end
  end
  for key, check in pairs(schema) do
    local path = prefix .. key
    local v = value[key]
    if type(check) == 'table' then
      if type(v) ~= 'table' then H.fail(path, 'a table', v) end
      H.validate_table(path .. '.', v, check)
    elseif check == 'compaction' then
      if type(v) ~= 'table' then H.fail(path, 'a table', v) end
      for k, item in pairs(v) do
        local known = H.compaction_keys[k]
        if known == nil then H.unknown(path .. '.' .. tostring(k), H.compaction_keys) end
        H.check(path .. '.' .. k, item, known[2])
      end
    elseif check == 'mappings' then
      if type(v) ~= 'table' then H.fail(path, 'a table', v) end
      for k, lhs in pairs(v) do
        if M.defaults.tree.mappings[k] == nil then
          H.unknown(path .. '.' .. tostring(k), M.defaults.tree.mappings)
        end
        H.check(path .. '.' .. k, lhs, 'lhs')
      end
    else
      H.check(path, v, check)
    end
  end
end

--- Validate options merged over the defaults; raise an error naming the first bad option.
---@param opts table|nil
---@return table config the merged, validated configuration
function M.validate(opts)
  if opts ~= nil and type(opts) ~= 'table' then
    error(string.format('(ctxd) setup() expects a table or nil, got %s', H.describe(opts)), 0)
  end
  opts = opts or {}
  -- Check the user's shape before merging, so that e.g. `tree = 5` is reported as such.
  for key, value in pairs(opts) do
    if H.schema[key] == nil then H.unknown(tostring(key), H.schema) end
    if type(H.schema[key]) == 'table' and type(value) ~= 'table' then H.fail(key, 'a table', value) end
  end
  local config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  -- Lists replace, they do not merge index by index.
  if opts.cmd ~= nil then config.cmd = opts.cmd end
  if opts.roots ~= nil then config.roots = opts.roots end
  H.validate_table('', config, H.schema)
  if type(config.cmd) == 'string' then config.cmd = vim.split(vim.trim(config.cmd), '%s+') end
  if config.roots then
    config.roots = vim.tbl_map(function(r) return vim.fs.normalize(vim.fn.fnamemodify(r, ':p')) end, config.roots)
    config.roots = vim.tbl_map(function(r) return (r:gsub('(.)/$', '%1')) end, config.roots)
  end
  return config
end

--- Replace the options in force.
function M.set(config) M.options = config end

--- The daemon's initializationOptions for a configuration.
---@param config table
---@return table
function M.init_options(config)
  local out = {
    watch = config.watch,
    autoCompact = config.auto_compact,
  }
  if config.auto_compact_external then out.autoCompactExternal = true end
  if config.roots then out.roots = config.roots end
  if config.model then out.model = config.model end
  if config.api_base then out.apiBase = config.api_base end
  local compaction = {}
  for key, value in pairs(config.compaction or {}) do
    compaction[H.compaction_keys[key][1]] = value
  end
  if next(compaction) then out.compaction = compaction end
  return vim.tbl_deep_extend('force', out, config.init_options or {})
end

--- The parts of a configuration that the daemon depends on (a change means a restart).
function M.daemon_key(config)
  return vim.inspect({ config.cmd, config.cmd_env, config.cmd_cwd, M.init_options(config) })
end

return M
