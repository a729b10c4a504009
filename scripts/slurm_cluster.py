"""A real two-node Slurm cluster on this machine: the slurm engine's tests and benchmark run on it, and a developer
can try ``run_grpo``'s slurm engine against it (``python scripts/slurm_cluster.py``, then ``export SLURM_CONF=...``
as it prints).

Debian's slurm-wlm and munge (``make test`` installs them): a munged of its own (as user munge, its socket and key
in a private directory), one slurmctld and two slurmd (``-N n1``, ``-N n2``) on free 127.0.0.1 ports, one CPU each,
state and logs in the same directory. ``SLURM_CONF`` points the clients (sbatch, scontrol, srun inside jobs) at it.
Everything it started is stopped on exit, also when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

NODES = ("n1", "n2")
MISSING = [tool for tool in ("munged", "slurmctld", "slurmd", "sbatch") if shutil.which(tool) is None]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _config(root: Path, munge_socket: Path) -> str:
    host = socket.gethostname()
    nodes = [
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} CPUs=1 RealMemory=8000 "
        "State=UNKNOWN"
        for name in NODES
    ]
    return "\n".join(
        [
            "ClusterName=grpo-test",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool/%n",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd-%n.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "KillWait=5",
            "MinJobAge=600",
            *nodes,
            f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _start_munge(root: Path) -> tuple[Path, Path]:
    """munged as user munge with a private key and socket; returns (socket, pid file)."""
    munge = root / "munge"
    munge.mkdir()
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    shutil.chown(munge, "munge", "munge")
    shutil.chown(key, "munge", "munge")
    key.chmod(0o600)
    sock, pid = munge / "munge.socket", munge / "munged.pid"
    subprocess.run(
        [
            "runuser",
            "-u",
            "munge",
            "--",
            "munged",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={pid}",
            f"--log-file={munge / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        ],
        check=True,
        timeout=30,
    )
    return sock, pid


def _kill_pid_file(path: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(path.read_text().strip()), signal.SIGTERM)


def wait_idle(env: dict[str, str], timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=env, capture_output=True, text=True)
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
        if done.returncode == 0 and all(states.get(name) == "idle" for name in NODES):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the test cluster's nodes did not come up: {done.stdout} {done.stderr}")


@contextlib.contextmanager
def slurm_cluster() -> Iterator[dict[str, str]]:
    """Start the cluster; yields the environment its clients need (SLURM_CONF); stops every daemon it started."""
    root = Path(tempfile.mkdtemp(prefix="grpo-slurm-"))
    root.chmod(0o755)  # munged runs as user munge and must reach its directory
    for sub in ("state", "log", *(f"spool/{name}" for name in NODES)):
        (root / sub).mkdir(parents=True)
    if MISSING:
        raise RuntimeError(f"Slurm is not installed here ({', '.join(MISSING)}): apt-get install slurm-wlm munge")
    sock, munge_pid = _start_munge(root)
    conf = root / "slurm.conf"
    conf.write_text(_config(root, sock))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["slurmctld", "-f", str(conf)], env=env, check=True, timeout=30)
        for name in NODES:
            subprocess.run(["slurmd", "-f", str(conf), "-N", name], env=env, check=True, timeout=30)
        wait_idle(env)
        yield {"SLURM_CONF": str(conf)}
    finally:
        _cancel_every_job(env)  # slurmstepd outlives its slurmd: end the jobs first
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True, timeout=30)
        deadline = time.time() + 20
        pid_files = [root / "slurmctld.pid", *(root / f"slurmd-{name}.pid" for name in NODES)]
        while time.time() < deadline and any(_alive(path) for path in pid_files):
            time.sleep(0.2)
        for path in pid_files:
            _kill_pid_file(path)
        _kill_pid_file(munge_pid)
        shutil.rmtree(root, ignore_errors=True)


def _cancel_every_job(env: dict[str, str], timeout: float = 60.0) -> None:
    subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True, timeout=30)
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30)
        if done.returncode != 0 or not done.stdout.strip():
            return
        time.sleep(0.5)


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def scontrol(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["scontrol", *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def main() -> None:
    """Start the cluster and keep it up until interrupted."""
    with slurm_cluster() as env:
        print(f"export SLURM_CONF={env['SLURM_CONF']}   # two CPU nodes, n1 and n2; Ctrl-C stops them", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
