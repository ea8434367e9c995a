--- Scratch buffers: an entry, the built context, a compaction preview and the ledger, as Markdown.

local M = {}
local H = {}

-- --- formatting helpers ---------------------------------------------------------------------------

--- 4987 -> "4,987"
function M.thousands(n)
  if type(n) ~= 'number' then return '–' end
  local s = tostring(math.floor(n + 0.5))
  local sign, digits = s:match('^(-?)(%d+)$')
  if not digits then return s end
  digits = digits:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', '')
  return sign .. digits
end

function H.text(value)
  if value == nil or value == vim.NIL then return '–' end
  return tostring(value)
end

function H.split(text)
  return vim.split(tostring(text or ''), '\n', { plain = true })
end

-- A code fence longer than any run of backticks in the text.
function H.fenced(lines, lang)
  local longest = 2
  for _, l in ipairs(lines) do
    for run in l:gmatch('`+') do
      longest = math.max(longest, #run)
    end
  end
  local fence = string.rep('`', longest + 1)
  local out = { fence .. (lang or '') }
  vim.list_extend(out, lines)
  table.insert(out, fence)
  return out
end

--- Pretty JSON (sorted keys, two-space indent) as lines.
function M.json_lines(value)
  local out = {}
  local function emit(v, indent, prefix, suffix)
    local pad = string.rep('  ', indent)
    if type(v) == 'table' and v ~= vim.NIL then
      local is_list = vim.islist(v) and (next(v) ~= nil or getmetatable(v) ~= getmetatable(vim.empty_dict()))
      if next(v) == nil then
        table.insert(out, pad .. prefix .. (is_list and '[]' or '{}') .. suffix)
        return
      end
      table.insert(out, pad .. prefix .. (is_list and '[' or '{'))
      if is_list then
        for i, item in ipairs(v) do
          emit(item, indent + 1, '', i < #v and ',' or '')
        end
      else
        local keys = vim.tbl_keys(v)
        table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
        for i, k in ipairs(keys) do
          emit(v[k], indent + 1, vim.json.encode(tostring(k)) .. ': ', i < #keys and ',' or '')
        end
      end
      table.insert(out, pad .. (is_list and ']' or '}') .. suffix)
    else
      local ok, enc = pcall(vim.json.encode, v)
      table.insert(out, pad .. prefix .. (ok and enc or tostring(v)) .. suffix)
    end
  end
  emit(value, 0, '', '')
  return out
end

-- --- messages -------------------------------------------------------------------------------------

function H.content_lines(content)
  if type(content) == 'string' then return H.split(content) end
  local out = {}
  if type(content) ~= 'table' then return out end
  for _, block in ipairs(content) do
    if type(block) == 'table' then
      if block.type == 'text' then
        vim.list_extend(out, H.split(block.text))
      elseif block.type == 'thinking' then
        for _, l in ipairs(H.split(block.thinking or block.text)) do
          table.insert(out, '> ' .. l)
        end
      elseif block.type == 'toolCall' then
        table.insert(out, string.format('**→ %s** `%s`', H.text(block.name), H.text(block.id)))
        vim.list_extend(out, H.fenced(M.json_lines(block.arguments or vim.empty_dict()), 'json'))
      elseif block.type == 'image' then
        table.insert(out, '[image]')
      else
        vim.list_extend(out, H.fenced(M.json_lines(block), 'json'))
      end
      table.insert(out, '')
    end
  end
  if out[#out] == '' then table.remove(out) end
  return out
end

--- A pi AgentMessage as Markdown lines (without a heading).
function M.message_lines(m)
  if type(m) ~= 'table' then return {} end
  local role = m.role
  if role == 'user' or role == 'assistant' or role == 'custom' or role == 'system' then
    local out = H.content_lines(m.content)
    if m.errorMessage then table.insert(out, 1, string.format('**%s:** %s', H.text(m.stopReason), m.errorMessage)) end
    return out
  elseif role == 'toolResult' then
    local out = { string.format('**%s**%s `%s`', H.text(m.toolName), m.isError and ' (error)' or '', H.text(m.toolCallId)) }
    local body = {}
    for _, block in ipairs(type(m.content) == 'table' and m.content or { { type = 'text', text = m.content } }) do
      if type(block) == 'table' and block.type == 'text' then vim.list_extend(body, H.split(block.text)) end
    end
    vim.list_extend(out, H.fenced(body, ''))
    return out
  elseif role == 'bashExecution' then
    local body = { '$ ' .. H.text(m.command) }
    vim.list_extend(body, H.split(m.output))
    local out = H.fenced(body, 'sh')
    table.insert(out, 'exit code: ' .. H.text(m.exitCode))
    return out
  elseif role == 'compactionSummary' or role == 'branchSummary' then
    -- Quoted: the summary's own headings stay inside this message.
    return vim.tbl_map(function(l) return l == '' and '>' or ('> ' .. l) end, H.split(m.summary))
  end
  return H.fenced(M.json_lines(m), 'json')
end

-- --- scratch buffers ------------------------------------------------------------------------------

function H.find(name)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_buf_get_name(buf) == name then return buf end
  end
end

-- A window to open scratch buffers from: not a ctxd tree window if another will do.
function H.origin_window()
  local cur = vim.api.nvim_get_current_win()
  if vim.bo[vim.api.nvim_win_get_buf(cur)].filetype ~= 'ctxd-tree' then return cur end
  local prev = vim.fn.win_getid(vim.fn.winnr('#'))
  if prev ~= 0 and prev ~= cur and vim.bo[vim.api.nvim_win_get_buf(prev)].filetype ~= 'ctxd-tree' then
    return prev
  end
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local buf = vim.api.nvim_win_get_buf(win)
    if vim.bo[buf].filetype ~= 'ctxd-tree' and vim.api.nvim_win_get_config(win).relative == '' then
      return win
    end
  end
  return cur
end

--- Show `lines` in the scratch buffer called `name` (made or reused), as Markdown by default.
---@return integer buf
function M.scratch(name, lines, opts)
  opts = opts or {}
  local buf = H.find(name)
  if not buf then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'wipe'
    vim.bo[buf].swapfile = false
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  if vim.bo[buf].filetype ~= (opts.filetype or 'markdown') then vim.bo[buf].filetype = opts.filetype or 'markdown' end
  vim.keymap.set('n', 'q', '<Cmd>close<CR>', { buffer = buf, nowait = true, desc = 'ctxd: close' })
  local shown = vim.fn.win_findbuf(buf)
  local tab_wins = vim.api.nvim_tabpage_list_wins(0)
  for _, win in ipairs(shown) do
    if vim.tbl_contains(tab_wins, win) then
      vim.api.nvim_set_current_win(win)
      return buf
    end
  end
  vim.api.nvim_set_current_win(H.origin_window())
  local how = require('ctxd.config').options.scratch
  if how == 'split' then
    vim.cmd('belowright split')
  elseif how == 'vsplit' then
    vim.cmd('belowright vsplit')
  elseif how == 'tab' then
    vim.cmd('tab split')
  end
  vim.api.nvim_win_set_buf(0, buf)
  vim.wo.wrap = true
  vim.wo.conceallevel = 0
  vim.wo.foldenable = false
  return buf
end

-- --- the views ------------------------------------------------------------------------------------

function H.title(session)
  local info = require('ctxd.client').state.info[session]
  if info and info.name and info.name ~= vim.NIL then return info.name end
  return vim.fn.fnamemodify(session or '', ':t')
end

--- session/entry's result.
function M.entry_lines(session, r)
  local e = r.entry or {}
  local lines = {
    string.format('# %s · %s', H.text(r.role), H.text(r.id)),
    '',
    string.format('- type: %s · line %s · %s tokens', H.text(r.type), H.text(r.line), M.thousands(r.tokens)),
    string.format('- parent: %s · children: %s', H.text(r.parentId), #(r.children or {}) > 0 and table.concat(r.children, ', ') or 'none'),
    string.format('- active path: %s · leaf: %s', r.onActivePath and 'yes' or 'no', r.isLeaf and 'yes' or 'no'),
  }
  if r.labels and #r.labels > 0 then table.insert(lines, '- labels: ' .. table.concat(r.labels, ', ')) end
  if r.timestamp then table.insert(lines, '- time: ' .. H.text(r.timestamp)) end
  table.insert(lines, '- session: ' .. H.text(session))
  table.insert(lines, '')
  if e.type == 'message' then
    vim.list_extend(lines, M.message_lines(e.message))
  elseif e.type == 'compaction' or e.type == 'branch_summary' then
    if e.type == 'compaction' then
      table.insert(lines, string.format('Compacted %s tokens; kept from %s.', M.thousands(e.tokensBefore), H.text(e.firstKeptEntryId)))
      local ledger = type(e.details) == 'table' and e.details.ctxd or nil
      if type(ledger) == 'table' then
        table.insert(
          lines,
          string.format(
            'Trigger %s, summariser %s (%s), %s → %s tokens, %s ms.',
            H.text(ledger.trigger),
            H.text(ledger.summarizer),
            H.text(ledger.model or ledger.path),
            M.thousands(e.tokensBefore),
            M.thousands(ledger.tokensAfter),
            H.text(ledger.durationMs)
          )
        )
        if type(ledger.instructions) == 'string' and ledger.instructions ~= '' then
          table.insert(lines, 'Instructions: ' .. ledger.instructions)
        end
      end
      table.insert(lines, '')
    end
    table.insert(lines, '## Summary')
    table.insert(lines, '')
    vim.list_extend(lines, H.split(e.summary))
  elseif e.type == 'custom_message' then
    vim.list_extend(lines, H.content_lines(e.content))
  end
  table.insert(lines, '')
  table.insert(lines, '## Entry')
  table.insert(lines, '')
  vim.list_extend(lines, H.fenced(M.json_lines(e), 'json'))
  return lines
end

function M.entry(session, result)
  return M.scratch('ctxd://entry/' .. H.text(result.id), M.entry_lines(session, result))
end

--- context/build's result.
function M.context_lines(session, r)
  local usage = r.usage or {}
  local lines = {
    '# Context · ' .. H.title(session),
    '',
    string.format('- model: %s · thinking: %s', H.text(r.model), H.text(r.thinkingLevel)),
    string.format(
      '- %d messages · %s tokens of %s (%s%%) · leaf %s',
      #(r.messages or {}),
      M.thousands(r.contextTokens),
      M.thousands(usage.window),
      H.text(usage.percent),
      H.text(r.leafId)
    ),
  }
  if r.compactionId then table.insert(lines, '- opens with compaction ' .. r.compactionId) end
  for _, d in ipairs(r.diagnostics or {}) do
    table.insert(lines, '- warning: ' .. H.text(type(d) == 'table' and d.message or d))
  end
  for i, m in ipairs(r.messages or {}) do
    table.insert(lines, '')
    table.insert(lines, string.format('## %d. %s · %s · %s tokens', i, H.text(m.role), H.text(m.entryId), M.thousands(m.tokens)))
    table.insert(lines, '')
    vim.list_extend(lines, M.message_lines(m.message))
  end
  return lines
end

function M.context(session, result)
  return M.scratch('ctxd://context/' .. session, M.context_lines(session, result))
end

function H.id_range(ids)
  if type(ids) ~= 'table' or #ids == 0 then return '' end
  if #ids == 1 then return ' (' .. ids[1] .. ')' end
  return string.format(' (%s … %s)', ids[1], ids[#ids])
end

--- compact's dry-run result (a plan).
function M.preview_lines(session, plan)
  local lines = {
    '# Compaction preview · ' .. H.title(session),
    '',
    string.format('- tokens: %s now, about %s after', M.thousands(plan.tokensBefore), M.thousands(plan.estimatedTokensAfter)),
    string.format('- summarize: %s messages%s', H.text(plan.messagesToSummarize), H.id_range(plan.summarizeEntryIds)),
    string.format('- keep: %s messages from %s (line %s)', H.text(plan.keptMessages), H.text(plan.firstKeptEntryId), H.text(plan.firstKeptLine)),
  }
  if plan.isSplitTurn then
    table.insert(lines, string.format('- split turn: %s messages of the turn prefix summarized too', H.text(plan.turnPrefixMessages)))
  end
  if plan.readFiles and #plan.readFiles > 0 then table.insert(lines, '- read files: ' .. table.concat(plan.readFiles, ', ')) end
  if plan.modifiedFiles and #plan.modifiedFiles > 0 then
    table.insert(lines, '- modified files: ' .. table.concat(plan.modifiedFiles, ', '))
  end
  table.insert(lines, '- leaf: ' .. H.text(plan.leafId))
  -- What the compaction must keep: the fact sheet every summary is checked against (ctxd renders it).
  if type(plan.mustKeepText) == 'string' and plan.mustKeepText ~= '' then
    table.insert(lines, '')
    vim.list_extend(lines, vim.split(plan.mustKeepText, '\n', { plain = true }))
  end
  table.insert(lines, '')
  table.insert(lines, 'Run :Ctxd compact [instructions] (or `c` in the tree) to compact.')
  return lines
end

function M.preview(session, plan)
  return M.scratch('ctxd://preview/' .. session, M.preview_lines(session, plan))
end

function H.when(ts)
  if type(ts) ~= 'string' then return H.text(ts) end
  local d, t = ts:match('^(%d+%-%d+%-%d+)T(%d+:%d+:%d+)')
  return d and (d .. ' ' .. t) or ts
end

--- The ledger: a list of compactions (newest first), as session/ledger gives them.
function M.ledger_lines(session, rows)
  local lines = { '# Compaction ledger · ' .. H.title(session), '' }
  if #rows == 0 then
    table.insert(lines, 'No compactions yet.')
    return lines
  end
  table.insert(lines, '| when | trigger | tokens | summarizer | model | duration | cost | entry |')
  table.insert(lines, '|---|---|---|---|---|---|---|---|')
  for _, c in ipairs(rows) do
    local cost = type(c.cost) == 'number' and string.format('$%.4f', c.cost) or '–'
    local duration = type(c.durationMs) == 'number' and (M.thousands(c.durationMs) .. ' ms') or '–'
    table.insert(
      lines,
      string.format(
        '| %s | %s | %s → %s | %s | %s | %s | %s | %s%s |',
        H.when(c.timestamp),
        H.text(c.trigger),
        M.thousands(c.tokensBefore),
        M.thousands(c.tokensAfter),
        H.text(c.summarizer or c.path),
        H.text(c.model),
        duration,
        cost,
        H.text(c.entryId),
        c.onActivePath and '' or ' (off path)'
      )
    )
  end
  for _, c in ipairs(rows) do
    table.insert(lines, '')
    table.insert(lines, string.format('## %s · %s', H.text(c.entryId), H.when(c.timestamp)))
    table.insert(lines, '')
    if c.failures and #c.failures > 0 then
      table.insert(lines, '- failures: ' .. table.concat(vim.tbl_map(H.text, c.failures), '; '))
    end
    if c.firstKeptEntryId then table.insert(lines, '- kept from: ' .. H.text(c.firstKeptEntryId)) end
    if type(c.instructions) == 'string' and c.instructions ~= '' then table.insert(lines, '- instructions: ' .. c.instructions) end
    if c.summaryPreview and c.summaryPreview ~= '' then table.insert(lines, '- summary: ' .. c.summaryPreview) end
  end
  return lines
end

function M.ledger(session, rows)
  return M.scratch('ctxd://ledger/' .. session, M.ledger_lines(session, rows))
end

return M
