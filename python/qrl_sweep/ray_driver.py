"""The Ray executor of `qrl-sim sweep --executor ray`: runs each run of a planned sweep as a Ray task that
runs `qrl-sim run` (the node CLI) into the run's directory, retried when its worker dies, resumed from its
checkpoint. Not the sweep: qrl-sim plans it, owns the directories and writes the summary and report.

Launched by qrl-sim as ``python3 ray_driver.py`` (by path, so the task functions travel by value and the
worker nodes need Ray, node and qrl-sim, not this package). It speaks JSON lines:

stdin   one ``{"address", "numCpus", "maxInFlight", "maxRetries", "cli", "cwd"}`` line, then
        ``{"run": {"index", "dir", "config"}}`` lines as runs may start, ``{"stop": true}`` (no further
        run starts; running ones stop after their current step, with a checkpoint) and
        ``{"close": true}``; end of input before ``close`` (qrl-sim is gone) stops at once.
stdout  ``{"event": "ready", "cluster", "cpus"}``, one ``{"event": "done", "index", "ok", "stopped",
        "error", "seconds"}`` per run, ``{"event": "closed"}``; a problem before ``ready`` is one
        ``{"event": "error", "field", "message"}`` line and exit status 2.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional

# Bounded waits: nothing this driver does waits without a limit.
CONNECT_TIMEOUT_S = 10.0
POLL_S = 0.2
# `qrl-sim run` exits 130 or 143 when a signal stopped it after a step (src/cli/stop.ts, STOP_EXIT).
STOPPED_EXITS = (130, 143)
# Test hook: "STEP:MARKER" — the first task whose run has STEP metrics lines kills its own Ray worker
# (SIGKILL) after creating MARKER, as a lost node would; the retry must resume the run byte-identically.
KILL_HOOK_ENV = "QRL_SWEEP_RAY_TEST_KILL"
# Ray's switch between a single-machine instance on 127.0.0.1 ("0") and a cluster on the node's address
# (Ray otherwise rewrites 127.0.0.1 to the node's network address).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def emit(event: Dict[str, Any]) -> None:
    """One event line on standard output (the only thing written there)."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def fail(field: str, message: str) -> None:
    """A problem with the sweep's input, before any run: one error event, exit status 2."""
    emit({"event": "error", "field": field, "message": message})
    sys.exit(2)


def _last_line(path: str) -> str:
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _die_with_parent() -> None:
    """In the spawned `qrl-sim run` (before exec): SIGKILL when the Ray worker that spawned it dies, so a
    retried task never runs beside the process of its killed attempt (Linux; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def run_task(run: Dict[str, Any], cli: List[str], cwd: str, stop_flag: Any, kill_hook: Optional[str]) -> Dict[str, Any]:
    """One run of the sweep in a Ray worker: `qrl-sim run --resume DIR` when DIR holds a config.json (a
    retried attempt, or a sweep resumed), else `qrl-sim run --config C --out DIR` into a new DIR. Polls
    the stop flag; once set, sends the run SIGTERM (it stops after its current step with a checkpoint)."""
    import shutil
    import subprocess
    import tempfile

    import ray

    t0 = time.monotonic()
    out_dir = run["dir"]

    def stopping() -> bool:
        try:
            return bool(ray.get(stop_flag.get.remote(), timeout=30))
        except Exception:
            return True  # the driver is gone: stop as for a signal

    if stopping():
        return {"ok": True, "stopped": True, "error": None, "seconds": 0.0}
    work = tempfile.mkdtemp(prefix="qrl-sweep-task-")
    try:
        if os.path.exists(os.path.join(out_dir, "config.json")):
            args = ["run", "--resume", out_dir, "--no-report"]
        else:
            # Never started (or killed before its config.json): nothing in DIR is worth keeping.
            shutil.rmtree(out_dir, ignore_errors=True)
            config_path = os.path.join(work, "config.json")
            with open(config_path, "w", encoding="utf-8") as f:
                json.dump(run["config"], f)
            args = ["run", "--config", config_path, "--out", out_dir, "--no-report"]
        command = list(cli) if all(os.path.exists(p) for p in cli) else ["qrl-sim"]
        stderr_path = os.path.join(work, "stderr")
        with open(stderr_path, "w") as stderr:
            try:
                child = subprocess.Popen(command + args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=_die_with_parent, start_new_session=True)
            except OSError as error:
                return {"ok": False, "stopped": False, "error": f"cannot start {command[0]} on {socket.gethostname()}: {error.strerror}", "seconds": time.monotonic() - t0}
            signalled = False
            last_check = 0.0
            while child.poll() is None:
                time.sleep(POLL_S)
                if kill_hook is not None:
                    _maybe_kill_self(kill_hook, out_dir)
                if not signalled and time.monotonic() - last_check >= 0.5:
                    last_check = time.monotonic()
                    if stopping():
                        child.send_signal(signal.SIGTERM)
                        signalled = True
        code = child.returncode
        seconds = time.monotonic() - t0
        if code == 0:
            return {"ok": True, "stopped": False, "error": None, "seconds": seconds}
        if signalled and code in STOPPED_EXITS:
            return {"ok": True, "stopped": True, "error": None, "seconds": seconds}
        line = _last_line(stderr_path)
        for prefix in ("qrl-sim run: ", "qrl-sim: "):
            if line.startswith(prefix):
                line = line[len(prefix):]
        return {"ok": False, "stopped": False, "error": line or f"qrl-sim run exited with status {code}", "seconds": seconds}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _maybe_kill_self(hook: str, out_dir: str) -> None:
    step, _, marker = hook.partition(":")
    try:
        with open(os.path.join(out_dir, "metrics.jsonl"), "rb") as f:
            lines = f.read().count(b"\n")
    except OSError:
        return
    if lines < int(step):
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def check_address(address: str) -> None:
    """A `host:port` (or `ray://host:port`) address must accept a TCP connection within
    CONNECT_TIMEOUT_S: ray.init would otherwise retry for minutes."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rpartition(":")
    if sep == "" or not port.isdigit():
        fail("--ray-address", f"expected HOST:PORT, ray://HOST:PORT or auto, got '{address}'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        reason = "timed out" if isinstance(error, socket.timeout) else (error.strerror or str(error))
        fail("--ray-address", f"cannot reach '{address}' ({reason} within {CONNECT_TIMEOUT_S:.0f} s)")


def read_commands(into: "queue.Queue[Optional[Dict[str, Any]]]") -> None:
    """Standard input, one JSON command a line, into the queue; None at end of input."""
    for line in sys.stdin:
        if line.strip():
            into.put(json.loads(line))
    into.put(None)


def main() -> int:
    first = sys.stdin.readline()
    if not first.strip():
        return 2
    setup = json.loads(first)
    address = setup.get("address")
    if address is None:
        # A local cluster is one machine: on 127.0.0.1 (read when ray is imported; its processes inherit it).
        # A given cluster is Ray's to address as its environment says.
        os.environ.setdefault(LOOPBACK_ENV, "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a sweep reports nothing to anyone
    try:
        import ray
    except ImportError as error:
        fail("--executor", f"ray: Ray is not importable by {sys.executable} ({error}); pip install 'ray==2.58.0' (python/requirements.lock) or set QRL_PYTHON")
    if address is not None:
        check_address(address)
    # Signals are qrl-sim's to handle (it started this process in a group of its own); a stray one is a stop.
    commands: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: commands.put({"stop": True}))
    try:
        if address is None:
            # address "local": a new instance even where `ray start` runs a cluster on this machine
            ray.init(address="local", num_cpus=setup["numCpus"], include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as error:  # an address that answers but is no Ray cluster, a local start that fails
        fail("--ray-address" if address is not None else "--executor", f"ray.init({'' if address is None else repr(address)}): {str(error).splitlines()[0] if str(error) else type(error).__name__}")
    try:
        return drive(ray, setup, commands)
    finally:
        ray.shutdown()


def drive(ray: Any, setup: Dict[str, Any], commands: "queue.Queue[Optional[Dict[str, Any]]]") -> int:
    """Submits the runs as they come, reports each as it ends; on stop, sets the flag every task polls and
    waits for the running ones to stop after their step; at end of input, returns at once (ray.shutdown
    then kills the workers, and each run with its worker: files stay whole, --resume continues)."""

    @ray.remote(num_cpus=0)
    class StopFlag:
        def __init__(self) -> None:
            self.value = False

        def set(self) -> None:
            self.value = True

        def get(self) -> bool:
            return self.value

    flag = StopFlag.remote()
    task = ray.remote(num_cpus=1, max_retries=int(setup["maxRetries"]))(run_task)
    cluster = ray.cluster_resources()
    emit({"event": "ready", "cluster": setup.get("address") or "local", "cpus": int(cluster.get("CPU", 0))})
    threading.Thread(target=read_commands, args=(commands,), daemon=True).start()
    kill_hook = os.environ.get(KILL_HOOK_ENV)
    limit = setup.get("maxInFlight")
    waiting: List[Dict[str, Any]] = []
    running: Dict[Any, int] = {}
    stopped = False
    closing = False
    while not (closing and not running and not waiting):
        try:
            command = commands.get(timeout=POLL_S if running else 1.0)
        except queue.Empty:
            command = {}
        if command is None:
            return 1  # qrl-sim is gone: stop at once
        if command.get("stop") and not stopped:
            stopped = True
            ray.get(flag.set.remote(), timeout=30)
        if command.get("close"):
            closing = True
        if "run" in command:
            waiting.append(command["run"])
        while waiting and (stopped or limit is None or len(running) < limit):
            run = waiting.pop(0)
            if stopped:
                emit({"event": "done", "index": run["index"], "ok": True, "stopped": True, "error": None, "seconds": 0.0})
                continue
            running[task.remote(run, setup["cli"], setup["cwd"], flag, kill_hook)] = run["index"]
        if running:
            ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
            for ref in ready:
                index = running.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as error:  # retries spent, or the task could not run
                    text = str(error).strip().splitlines()
                    result = {"ok": False, "stopped": False, "error": f"ray: {type(error).__name__}: {text[-1] if text else ''}", "seconds": 0.0}
                emit({"event": "done", "index": index, **result})
    emit({"event": "closed"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
