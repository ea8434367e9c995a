-- ctxd.nvim: one command, `:Ctxd {subcommand}`. Nothing else loads until it is used.
if vim.g.loaded_ctxd then return end
vim.g.loaded_ctxd = true

if vim.fn.has('nvim-0.10') == 0 then
  vim.notify('ctxd.nvim needs Neovim 0.10 or newer', vim.log.levels.WARN)
  return
end

vim.api.nvim_create_user_command('Ctxd', function(args) require('ctxd').command(args) end, {
  nargs = '*',
  desc = 'ctxd: sessions, tree, compact, preview, context, ledger, status, usage',
  complete = function(arglead, cmdline, pos) return require('ctxd').complete(arglead, cmdline, pos) end,
})
