"""Daemon memory under a slow reader and under large request bodies.

    python bench/backpressure.py [--runs 3] [--mb 300] [--body-mb 100] [--bodies 5]

Starts a real daemon (subprocess, private state directory), samples its RSS
from /proc at 50 Hz and reports, per scenario, the median over runs of the
peak RSS above the idle baseline:

- slow reader: ``commands.run`` of a command writing ``--mb`` MB to stdout,
  read by a client at about 40 MB/s (64 KiB, then a 1.5 ms pause);
- large bodies: ``--bodies`` parallel requests each declaring and sending a
  ``--body-mb`` MB body (refused at the body cap while it is read).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HEAD = (
    "POST /v1/op/{op} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    'X-Tenantry-Principal: {{"agent": "human"}}\r\nContent-Length: {n}\r\n\r\n'
)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_kb(self.pid))
            time.sleep(0.02)


def connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def start_daemon(state: str) -> tuple[subprocess.Popen[bytes], str]:
    sock = str(Path(state) / "sock")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTRY_")}
    env.update(TENANTRY_STATE_DIR=state, TENANTRY_SOCKET=sock)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connect(sock).close()
            return proc, sock
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the daemon did not start")


def slow_reader(sock: str, mb: int, workdir: str) -> tuple[float, float]:
    code = f"import sys\nb=b'x'*1048576\nfor _ in range({mb}): sys.stdout.buffer.write(b)"
    body = json.dumps(
        {"argv": [sys.executable, "-c", code], "cwd": workdir, "where": "local", "timeout_s": 600}
    ).encode()
    s = connect(sock)
    s.sendall(HEAD.format(op="commands.run", n=len(body)).encode() + body)
    got = 0
    t0 = time.monotonic()
    while chunk := s.recv(65536):
        got += len(chunk)
        if b'"result"' in chunk[-4096:]:
            break
        time.sleep(0.0015)
    s.close()
    return got / 1e6, got / 1e6 / (time.monotonic() - t0)


def big_body(sock: str, mb: int) -> str:
    s = connect(sock)
    s.settimeout(120)
    s.sendall(HEAD.format(op="jobs.list", n=mb * 1048576).encode())
    block = b"a" * 1048576
    try:
        for _ in range(mb):
            s.sendall(block)
    except OSError:
        pass  # the daemon answered and closed: the cap held
    try:
        answer = s.recv(4096).split(b"\r\n")[0].decode()
    except OSError:
        answer = "closed"
    s.close()
    return answer


def measure(args: argparse.Namespace, scenario: str) -> tuple[int, int]:
    state = tempfile.mkdtemp(prefix="tnt-bench-")
    work = tempfile.mkdtemp(prefix="tnt-bench-w-")
    proc, sock = start_daemon(state)
    try:
        time.sleep(0.5)
        base = rss_kb(proc.pid)
        sampler = Sampler(proc.pid)
        sampler.start()
        if scenario == "slow":
            got, rate = slow_reader(sock, args.mb, work)
            print(f"  read {got:.0f} MB of stream at {rate:.0f} MB/s", flush=True)
        else:
            answers: list[str] = []
            threads = [
                threading.Thread(
                    target=lambda: answers.append(big_body(sock, args.body_mb)), daemon=True
                )
                for _ in range(args.bodies)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(f"  answers: {sorted(set(answers))}", flush=True)
        sampler.stop.set()
        sampler.join()
        return base, sampler.peak
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--body-mb", type=int, default=100)
    ap.add_argument("--bodies", type=int, default=5)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    for scenario, label in (
        ("slow", f"slow reader of a {args.mb} MB output"),
        ("bodies", f"{args.bodies} parallel {args.body_mb} MB bodies"),
    ):
        rows = [measure(args, scenario) for _ in range(args.runs)]
        base = statistics.median(b for b, _ in rows) / 1024
        peak = statistics.median(p for _, p in rows) / 1024
        grow = statistics.median((p - b) for b, p in rows) / 1024
        print(
            f"{label}: idle RSS {base:.0f} MB, peak {peak:.0f} MB, growth {grow:.0f} MB "
            f"(median of {args.runs}; runs: {[round((p - b) / 1024) for b, p in rows]})"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
