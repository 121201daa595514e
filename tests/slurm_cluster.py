"""A throw-away Slurm 22.05 cluster on this machine, for the tests that run gpumosaic on a
real Slurm (tests/runtime/executors/slurm).

Debian's ``munge``, ``slurmctld``, ``slurmd`` and ``slurm-client`` (``make slurm`` installs
them). Every file is in one temporary folder: munge runs with its own key and socket,
``slurmctld`` and one ``slurmd -N NAME`` per node listen on free loopback ports, and each
node offers typed GRES GPUs on character-device stand-ins (``mknod c 195 N``), so Slurm
accounts for them and sets ``CUDA_VISIBLE_DEVICES`` as on a real GPU node. Every daemon
runs in the foreground as a child of the test process and is stopped by its PID.

Starting waits on events (``scontrol ping`` answers, ``sinfo`` shows every node idle),
never on a fixed sleep. ``unavailable()`` says in one line why a machine cannot run it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from waiting import wait_for

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "squeue", "scancel")
SBIN = ("/usr/sbin", "/usr/bin")
START_TIMEOUT_S = 60.0  # a bound far above the ~2 s it takes on an idle machine


def which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN:
        path = Path(folder) / name
        if path.exists():
            return str(path)
    return None


def unavailable() -> str | None:
    """Why a throw-away Slurm cannot start here (None: it can)."""
    if os.geteuid() != 0:
        return "a throw-away Slurm needs root (its daemons run as root)"
    missing = [b for b in BINARIES if which(b) is None]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): make slurm installs "
            "munge, slurmctld, slurmd and slurm-client"
        )
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class SlurmNodeSpec:
    name: str
    gpu_type: str
    gpus: int
    cpus: int = 8


@dataclass
class SlurmCluster:
    """A running throw-away cluster (``start``); ``stop`` ends every daemon by PID."""

    root: Path
    nodes: tuple[SlurmNodeSpec, ...] = (
        SlurmNodeSpec("gm1", "v100", 2),
        SlurmNodeSpec("gm2", "k80", 2),
    )
    partition: str = "gm"
    conf: Path = field(init=False)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.conf = self.root / "slurm.conf"

    # ---- the environment every Slurm command of the tests runs with -------------------

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        exe = which(args[0]) or args[0]
        return subprocess.run(
            [exe, *args[1:]], env=self.env, capture_output=True, text=True, check=check, timeout=30
        )

    # ---- set-up ------------------------------------------------------------------------

    def write(self) -> None:
        root = self.root
        for sub in ("state", "spool", "dev", "munge", "log"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o755)
        os.chmod(root / "munge", 0o711)  # the socket: reachable by every user
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        self.ports["ctld"] = free_port()
        minor = 0
        node_lines, gres_lines = [], []
        for node in self.nodes:
            self.ports[node.name] = free_port()
            (root / "spool" / node.name).mkdir(exist_ok=True)
            first = minor
            for _ in range(node.gpus):
                dev = root / "dev" / f"nvidia{minor}"
                if not dev.exists():
                    os.mknod(dev, 0o666 | 0o020000, os.makedev(195, minor))
                minor += 1
            files = f"{root}/dev/nvidia[{first}-{minor - 1}]"
            node_lines.append(
                f"NodeName={node.name} NodeHostname=localhost NodeAddr=127.0.0.1 "
                f"Port={self.ports[node.name]} CPUs={node.cpus} RealMemory=4000 "
                f"Gres=gpu:{node.gpu_type}:{node.gpus} State=UNKNOWN"
            )
            gres_lines.append(f"NodeName={node.name} Name=gpu Type={node.gpu_type} File={files}")
        names = ",".join(n.name for n in self.nodes)
        lines = [
            "ClusterName=gpumosaic-test",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={self.ports['ctld']}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root}/munge/munge.sock",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool/%n",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd-%n.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1",
            "SlurmdParameters=config_overrides",
            "GresTypes=gpu",
            "ReturnToService=2",
            "SlurmdTimeout=5",
            "SlurmctldTimeout=10",
            "MessageTimeout=5",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=600",
            "MaxJobCount=10000",
            *node_lines,
            f"PartitionName={self.partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")
        (root / "gres.conf").write_text("\n".join(gres_lines) + "\n")
        cgroup = "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n"
        (root / "cgroup.conf").write_text(cgroup)

    def start(self) -> SlurmCluster:
        self.write()
        root = self.root
        self._spawn(
            "munged",
            [
                which("munged") or "munged",
                "--foreground",
                "--force",
                f"--socket={root}/munge/munge.sock",
                f"--key-file={root}/munge/munge.key",
                f"--pid-file={root}/munge/munged.pid",
                f"--log-file={root}/log/munged.log",
                f"--seed-file={root}/munge/munged.seed",
            ],
        )
        wait_for(
            lambda: (root / "munge" / "munge.sock").exists(),
            START_TIMEOUT_S,
            "munged's socket",
            lambda: self._log("munged"),
        )
        self.start_ctld(clear=True)
        for node in self.nodes:
            self.start_node(node.name)
        self.wait_idle()
        return self

    def start_ctld(self, *, clear: bool = False) -> None:
        argv = [which("slurmctld") or "slurmctld", "-D", "-f", str(self.conf)]
        self._spawn("slurmctld", argv + (["-c"] if clear else ["-R"]))
        wait_for(
            lambda: self.run("scontrol", "ping", check=False).stdout.count("UP") > 0,
            START_TIMEOUT_S,
            "slurmctld to answer scontrol ping",
            lambda: self._log("slurmctld"),
            poll_s=0.1,
        )

    def restart_ctld(self) -> None:
        """``slurmctld`` stopped (by PID) and started again on its saved state; returns
        once every node runs jobs again (``wait_schedulable``)."""
        proc = self.procs.pop("slurmctld")
        proc.terminate()
        proc.wait(timeout=30)
        self.start_ctld()
        self.wait_idle()
        self.wait_schedulable()

    def wait_schedulable(self) -> None:
        """Until a job pinned to each node has run there. (Just after a slurmctld
        restart ``sinfo`` says idle while the scheduler still calls a node unavailable,
        ``ReqNodeNotAvail``, for tens of seconds.)"""
        ids = [
            self.run(
                "sbatch", "--parsable", f"--partition={self.partition}", f"--nodelist={n.name}",
                "--job-name=probe", "--output=/dev/null", "--wrap=true",
            ).stdout.strip()
            for n in self.nodes
        ]  # fmt: skip

        def states() -> list[str]:
            out = self.run("squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%T").stdout
            return out.split()

        wait_for(
            lambda: states() and all(s == "COMPLETED" for s in states()),
            START_TIMEOUT_S,
            "a job on every node",
            lambda: f"{states()} {self.node_states()}",
            poll_s=0.1,
        )

    def start_node(self, name: str) -> None:
        argv = [which("slurmd") or "slurmd", "-D", "-N", name, "-f", str(self.conf)]
        self._spawn(f"slurmd-{name}", argv)

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout
        return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)

    def wait_idle(self, names: tuple[str, ...] | None = None) -> None:
        want = names or tuple(n.name for n in self.nodes)
        wait_for(
            lambda: all(self.node_states().get(n) in ("idle", "mixed", "allocated") for n in want),
            START_TIMEOUT_S,
            f"Slurm nodes {', '.join(want)} to be up",
            lambda: f"{self.node_states()}\n{self._log('slurmctld')}",
            poll_s=0.1,
        )

    def busy(self) -> list[str]:
        """Jobs that hold resources (running, starting or completing)."""
        states = "--states=RUNNING,CONFIGURING,COMPLETING,SUSPENDED"
        out = self.run("squeue", "-h", states, "-o", "%i|%j|%T|%N", check=False).stdout
        return out.split()

    def wait_quiet(self) -> None:
        """Until no job holds resources (a test starts on an empty cluster)."""
        wait_for(lambda: not self.busy(), START_TIMEOUT_S, "Slurm's jobs to end", self.busy)

    # ---- faults ------------------------------------------------------------------------

    def kill_node(self, name: str) -> None:
        """``slurmd`` of one node killed (SIGKILL), and every job process it started, as if
        the machine died."""
        proc = self.procs.pop(f"slurmd-{name}")
        stepds = self._stepd_pids(name)
        proc.kill()
        proc.wait(timeout=10)
        for pid in stepds:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _stepd_pids(self, name: str) -> list[int]:
        """The ``slurmstepd`` processes of node ``name`` (those holding a socket in the
        node's spool folder) and the job processes of that node (``SLURMD_NODENAME``)."""
        spool = f"{self.root}/spool/{name}/"
        inodes = set()
        with contextlib.suppress(OSError), open("/proc/net/unix") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 8 and parts[7].startswith(spool):
                    inodes.add(f"socket:[{parts[6]}]")
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                fds = os.listdir(f"/proc/{entry}/fd") if cmd.startswith(b"slurmstepd") else []
                links = {os.readlink(f"/proc/{entry}/fd/{fd}") for fd in fds}
            except OSError:
                continue
            if links & inodes or f"SLURMD_NODENAME={name}\0".encode() in environ:
                pids.append(int(entry))
        return pids

    # ---- tear-down ---------------------------------------------------------------------

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.run("scancel", "--partition", self.partition, check=False)
        order = [k for k in self.procs if k.startswith("slurmd-")] + ["slurmctld", "munged"]
        for key in order:
            proc = self.procs.pop(key, None)
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for name in (n.name for n in self.nodes):
            for pid in self._stepd_pids(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _spawn(self, key: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{key}.out", "ab")  # noqa: SIM115 - the child's
        self.procs[key] = subprocess.Popen(
            argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()

    def _log(self, key: str) -> str:
        parts = []
        for path in (self.root / "log").glob(f"{key}*"):
            with contextlib.suppress(OSError):
                parts.append(f"{path.name}: {path.read_text()[-1500:]}")
        proc = self.procs.get(key)
        if proc is not None and proc.poll() is not None:
            parts.append(f"{key} exited with {proc.returncode}")
        return "\n".join(parts)


def start_cluster(root: Path) -> SlurmCluster:
    cluster = SlurmCluster(root)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise


def elapsed(since: float) -> float:
    return time.monotonic() - since
