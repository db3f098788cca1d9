"""The Cedar schema every policy file is validated against when it is loaded.

Principals are ``User`` (a human acting directly) and ``Agent`` (one agent
session, a member of its ``User``). Resources are what the normalizers
produce: a ``Command`` that would run, a ``Job`` shape or a job acted on, a
``Path`` after resolution, and a ``Target`` for everything else (memory,
index, leases, administration). The context is the same record for every
action so facility rules can use it anywhere.
"""

from __future__ import annotations

ACTIONS: dict[str, str] = {
    "run_command": "Command",
    "submit_job": "Job",
    "cancel_job": "Job",
    "modify_job": "Job",
    "read_job_output": "Job",
    "read_path": "Path",
    "write_path": "Path",
    "query_jobs": "Target",
    "remember": "Target",
    "recall": "Target",
    "forget": "Target",
    "index_query": "Target",
    "index_build": "Target",
    "acquire_lease": "Target",
    "release_lease": "Target",
    "report": "Target",
    "read_report": "Target",
    "audit_read": "Target",
    "admin": "Target",
    "approve": "Target",
    # the memory concept's ops (tenantry.memory.ops)
    "memory.read": "Target",
    "memory.write": "Target",
    "memory.verify": "Target",
    "memory.approve": "Target",
}

SCHEMA = """
type Limits = {
  agent_max_gpus: Long, agent_max_nodes: Long, agent_max_time_s: Long,
  agent_max_array: Long, agent_max_cpus: Long,
};
type Ctx = {
  source: String, uncertain: Bool, uncertain_kind: String, reason: String,
  limits: Limits, hour: Long, where: String,
};
entity User = { name: String, groups: Set<String>, accounts: Set<String>, admin: Bool };
entity Agent in [User] = {
  user: User, product: String, session: String, project: String, tier: String,
};
entity Command = {
  program: String, path: String, args: Set<String>, line: String, via: Set<String>,
  env: Set<String>, tags: Set<String>, subcommand: String,
};
entity Job = {
  id: String, owner: String, tool: String, partitions: Set<String>, account: String,
  qos: String, reservation: String, nodes: Long, ntasks: Long, cpus: Long, gpus: Long,
  mem_mb: Long, time_s: Long, unlimited_time: Bool, array_size: Long, exclusive: Bool,
  nice_negative: Bool, info_only: Bool, options: Set<String>, unknown_options: Set<String>,
  privileged_options: Set<String>, bad_values: Set<String>, env: Set<String>,
  unknown_partitions: Set<String>, over_partition_time: Bool, account_member: Bool,
  qos_admin: Bool, qos_not_allowed: Bool, restricted_options: Set<String>, mail_foreign: Bool,
  unsafe_text: Set<String>, qos_not_associated: Bool, over_qos_time: Bool,
  off_list_options: Set<String>,
};
entity Path = {
  path: String, raw: String, credential: Bool, system: Bool, protected: Bool,
  other_home: Bool, lookalike: Bool, dynamic: Bool, startup: Bool, secret_tree: Bool,
  control: Bool, outside_write: Bool,
};
entity Target = { kind: String, name: String };
"""


def schema_text() -> str:
    lines = [SCHEMA]
    for action, resource in ACTIONS.items():
        lines.append(
            f'action "{action}" appliesTo {{ principal: [User, Agent], '
            f"resource: [{resource}], context: Ctx }};"
        )
    return "\n".join(lines)
