"""The OpenCode plugin Tenantry writes, run in Node against the real hook.

OpenCode runs plugins under Bun; Node has no ``Bun.spawn``, so the harness
provides a small stand-in with the same shape (stdin from a Blob, ``stdout``
as a web stream, ``exited`` as a promise). The plugin file itself is the one
``tenantry install --agent opencode`` writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.agents.harness import reap

from tenantry.agents import files, installer
from tenantry.agents.products.common import Target

SRC = Path(__file__).resolve().parents[2] / "src"

HARNESS = r"""
import { spawn } from "node:child_process";
import { Readable } from "node:stream";
globalThis.Bun = {
  spawn(argv, opts) {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
    opts.stdin.arrayBuffer().then((buf) => { child.stdin.end(Buffer.from(buf)); });
    return {
      stdout: Readable.toWeb(child.stdout),
      exited: new Promise((resolve) => child.on("close", resolve)),
    };
  },
};
const mod = await import(process.argv[2]);
const hooks = await mod.Tenantry({});
const out = {};
for (const command of ["squeue -u alice", "make -j4"]) {
  try {
    await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1" }, { args: { command } });
    out[command] = "allowed";
  } catch (err) {
    out[command] = "blocked: " + err.message;
  }
}
const readCall = { tool: "read", sessionID: "ses_1" };
await hooks["tool.execute.before"](readCall, { args: { filePath: "x" } });
await hooks.event({ event: { type: "session.created", properties: { info: { id: "ses_1" } } } });
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_plugin_blocks_what_the_hook_denies(tmp_path: Path, state_dir: str) -> None:
    t = Target(
        "project",
        tmp_path / "home",
        tmp_path,
        tmp_path / "root",
        (sys.executable, "-m", "tenantry"),
    )
    files.apply(
        installer.plan("opencode", t).pending, files.Records(tmp_path / "rec"), install=True
    )
    plugin = tmp_path / ".opencode" / "plugins" / "tenantry.js"
    (tmp_path / "package.json").write_text(json.dumps({"type": "module"}))
    harness = tmp_path / "harness.mjs"
    harness.write_text(HARNESS)
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "TENANTRY_STATE_DIR": state_dir,
        "TENANTRY_SOCKET": f"{state_dir}/sock",
    }
    try:
        proc = subprocess.run(
            ["node", str(harness), plugin.as_uri()],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        reap(state_dir)  # the plugin's session.created event started a daemon
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (
        out["squeue -u alice"].startswith("blocked: Tenantry:")
        and "tenantry jobs" in out["squeue -u alice"]
    )
    assert out["make -j4"] == "allowed"
    assert (Path(state_dir) / "daemon.lock").exists()  # session.created started the daemon
