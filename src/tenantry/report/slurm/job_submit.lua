--[[
Tenantry's controller-side attribution tag (a Slurm job_submit/lua plugin).

Runs inside slurmctld at submission and writes one line into the job's
AdminComment, which users cannot set or change:

    tenantry-ctld:v1;via=tenantry;markers=CLAUDECODE,CODEX_THREAD_ID

  via      "tenantry" when the job carries Tenantry's attribution tag in its
           Comment (it came through the Tenantry daemon), else "direct"
  markers  agent environment markers present in the submitting environment
           (empty when none, or when the client sent no environment, as
           salloc and srun allocations do)

`tenantry report` reads it from `sacct --format=...,AdminComment`. The plugin
never rejects a job: on any error it logs and lets the job through untagged
(with "error" in the tag), so measurement can not take a cluster down.

Install: copy to the directory of slurm.conf as job_submit.lua and set
JobSubmitPlugins=lua (scripts/dev-slurm does this), then `scontrol reconfigure`.
Tested with Slurm 22.05 (Lua 5.1).
]]

local MARKERS = {
	"CLAUDECODE",
	"CLAUDE_CODE_ENTRYPOINT",
	"CLAUDE_CODE_SESSION_ID",
	"CODEX_THREAD_ID",
	"CODEX_SANDBOX",
	"CODEX_MANAGED_BY_NPM",
	"GEMINI_CLI",
	"OPENCODE",
	"CURSOR_AGENT",
	"OPENHANDS",
}
local PREFIX = "tenantry-ctld:v1"
local TENANTRY_TAG = "tenantry:v1"

local function env_value(env, name)
	if env == nil then
		return nil
	end
	local ok, value = pcall(function()
		return env[name]
	end)
	if ok then
		return value
	end
	return nil
end

local function build_tag(job_desc)
	local found = {}
	local env = job_desc.environment
	for _, name in ipairs(MARKERS) do
		local value = env_value(env, name)
		if value ~= nil and value ~= "" and value ~= "0" then
			table.insert(found, name)
		end
	end
	local via = "direct"
	local comment = job_desc.comment
	if comment ~= nil and string.find(comment, TENANTRY_TAG, 1, true) ~= nil then
		via = "tenantry"
	end
	return PREFIX .. ";via=" .. via .. ";markers=" .. table.concat(found, ",")
end

local function with_tag(previous, tag)
	if previous == nil or previous == "" then
		return tag
	end
	-- keep what an administrator already wrote; replace an older tag of ours
	local start = string.find(previous, PREFIX, 1, true)
	if start ~= nil then
		previous = string.gsub(string.sub(previous, 1, start - 1), "%s+$", "")
		if previous == "" then
			return tag
		end
	end
	return previous .. " " .. tag
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local ok, result = pcall(build_tag, job_desc)
	if not ok then
		slurm.log_info("tenantry job_submit: %s", tostring(result))
		result = PREFIX .. ";via=unknown;markers=;error=1"
	end
	local set_ok, err = pcall(function()
		job_desc.admin_comment = with_tag(job_desc.admin_comment, result)
	end)
	if not set_ok then
		slurm.log_info("tenantry job_submit: cannot set AdminComment: %s", tostring(err))
	end
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

return slurm.SUCCESS
