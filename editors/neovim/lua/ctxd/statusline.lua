--- The statusline text: built from the client's cached state only (no I/O, no request), so that it
--- can run on every redraw. `User CtxdUpdated` fires whenever that state changes.

local M = {}

--- A token count, short: 515, 4.9k, 112k, 1.2M.
---@param n number|nil
---@return string
function M.number(n)
  if type(n) ~= 'number' then return '?' end
  if n < 1000 then return tostring(math.floor(n + 0.5)) end
  if n < 9950 then return string.format('%.1fk', n / 1000) end
  if n < 999500 then return string.format('%dk', math.floor(n / 1000 + 0.5)) end
  return string.format('%.1fM', n / 1e6)
end

--- What the statusline knows about a session (the current one by default).
---@param session string|nil
---@return table info { session, status, usage, compaction, compacting, progress }
function M.info(session)
  local state = require('ctxd.client').state
  session = session or state.current
  local compaction = session and state.compaction[session] or nil
  return {
    session = session,
    status = state.status,
    usage = session and state.usage[session] or nil,
    compaction = compaction,
    compacting = compaction ~= nil and compaction.state == 'running',
    progress = session and state.progress[session] or nil,
    deleted = session ~= nil and state.deleted[session] == true,
  }
end

--- The default text: `ctxd 112k/200k 56%`, `ctxd compacting…`, or '' without a session.
---@param info table from M.info()
function M.default_format(info)
  if info.session == nil or info.status == 'stopped' then return '' end
  if info.status == 'failed' then return 'ctxd failed' end
  if info.deleted then return 'ctxd deleted' end
  if info.compacting then return 'ctxd compacting…' end
  local u = info.usage
  if u == nil then return 'ctxd' end
  return string.format('ctxd %s/%s %d%%', M.number(u.tokens), M.number(u.window), math.floor((u.percent or 0) + 0.5))
end

--- The statusline text for a session (the current one by default).
---@param opts table|nil { session = path }
---@return string
function M.get(opts)
  local info = M.info(opts and opts.session or nil)
  local format = require('ctxd.config').options.statusline.format
  if format then
    local ok, text = pcall(format, info)
    return ok and tostring(text or '') or 'ctxd: statusline.format failed'
  end
  return M.default_format(info)
end

return M
