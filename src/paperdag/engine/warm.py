"""A warm stage server: `paperdag stage` without paying for torch, transformers and sentence-transformers again,
and `paperdag run` without paying for Prefect and DVC again.

Each stage is a fresh process (DVC runs `paperdag stage ADDRESS`), and a stage that trains a tiny LM spends 5-15 CPU
seconds importing its libraries before its first step: more than the work of most stages at smoke scale. `paperdag
warm` starts a server that imports those libraries once (third-party modules only, never the project's code) and
then forks one child per stage. The child becomes the stage process a fresh start would have been: the client's
working directory, environment, sys.path, argv and stdin/stdout/stderr (passed over the socket), its own session,
the project's modules imported afresh from disk. The `paperdag stage` process that DVC started stays as the client:
it forwards SIGINT / SIGTERM / SIGHUP to the child and exits with the child's status; if the client dies (SIGKILL),
the server terminates the child. `paperdag run` is served the same way (Prefect's client and DVC's API cost it ~3 s
of imports before its first stage, where the stage itself may take a second): its child reads Prefect's settings
from its own environment again (orchestrate.py), and the stages it starts are served like any other.

Started by the user, or left behind by a `paperdag run`, and never a change of results:
- a stage (or a run) uses the server when $PAPERDAG_WARM names its socket (or `.paperdag/warm.sock` of the project exists),
  and PAPERDAG_WARM is not "off";
- a `paperdag run` that no server served starts one on `.paperdag/warm.sock` as it ends, detached, as a build
  daemon does (Gradle's, Bazel's), unless PAPERDAG_WARM is set: the first command is cold, the next ones are not;
  one server per socket (an flock on `<socket>.lock`); it exits after its idle time;
- the server serves only a client whose interpreter, installed libraries and this module (their files unchanged
  since the server started: `libraries`) and every environment variable a library reads at import (numerics,
  thread counts, HF_*, PYTHON*, ...) equal its own: otherwise the stage runs in its own process as before, with a
  one-line note; a server whose libraries changed retires. base.numerics' environment is therefore part of the
  key (`paperdag warm` applies it first).
- messages are JSON (no pickle); the socket is the user's own (mode 0600).
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "PAPERDAG_WARM"  # the socket's path, or "off"
SERVED = "PAPERDAG_WARM_SERVED"  # in a served child: "<its pid>:<its client's pid>"
TRIED = "PAPERDAG_WARM_TRIED"  # set across `paperdag stage`'s re-execution once it asked the server and was not served
DEFAULT_SOCKET = ".paperdag/warm.sock"
LOG = ".paperdag/warm.log"  # where a `paperdag warm` that `paperdag run` started writes
STALE = "the libraries changed since the server started"  # a refusal no later client can avoid: the server retires
_CLAIM: list[int] = []  # the fd of this server's claim on its socket (claim()); a forked child closes it
_SOCKET_MAX = 108  # bytes in a Unix socket's path, its terminating NUL included (Linux's sun_path)
# imported once by the server: what the stages import and what costs seconds (measured: sentence_transformers
# 12 CPU-s, transformers' Llama 9 s, torch 3 s). Not polars: it is not fork-safe once its thread pool runs.
PRELOAD = ("numpy", "scipy.stats", "scipy.sparse", "scipy.optimize", "torch", "safetensors.torch", "tokenizers",
           "transformers", "transformers.modeling_utils", "transformers.models.llama.modeling_llama",
           "transformers.models.bert.modeling_bert", "sentence_transformers", "sklearn", "faiss", "bm25s",
           # for `paperdag run`: Prefect's flow engine and client (~2.5 s), DVC's repository API (~1 s). Neither
           # starts a thread or writes the environment when imported; Prefect's settings are read again per run
           "prefect", "prefect.main", "prefect.flows", "prefect.tasks", "prefect.task_runners", "prefect.runtime",
           "prefect.client.orchestration", "dvc.repo",
           # what Prefect imports on a process's first flow run (its parameters' encoder: ~0.15 s)
           "fastapi.encoders",
           # the figures most stage modules import at their top (~0.5 s a stage); not pyplot, which picks its
           # backend on first use
           "matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg")
# what Prefect's logging configuration was made from when this process imported Prefect (settings.py; serve() sets
# it, a served child carries it into its fresh copy of this module): a served `paperdag run` whose own is the same
# keeps that configuration instead of making it again (~0.3 s)
PREFECT_LOGGING: str | None = None
# a server whose idle time is up but whose `may_exit` says no asks again after this many seconds
RECHECK_S = 5.0
# environment variables some library reads when it is imported: a client differing in one is not served
_LOAD_TIME = ("PYTHON", "PAPERDAG_NUMERICS", "OMP_", "MKL_", "OPENBLAS_", "NUMEXPR_", "VECLIB_", "POLARS_", "RAYON_",
              "ATEN_", "ONEDNN_", "DNNL_", "NPY_", "CUDA", "CUBLAS_", "KMP_", "TORCH", "HF_", "TRANSFORMERS_",
              "SENTENCE_TRANSFORMERS", "TOKENIZERS_", "LD_", "HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPL",
              "VIRTUAL_ENV")
_SET_BY_IMPORTS = ("KMP_INIT_AT_FORK", "KMP_DUPLICATE_LIB_OK")  # sklearn, joblib, torch (where they are set at all)
_HEADER = 8  # bytes: the request's length, sent with the three file descriptors


def socket_path(root: Path | None) -> Path | None:
    """Where this process's stages find the server, or None when it is off."""
    value = os.environ.get(ENV, "")
    if value == "off":
        return None
    if value:
        return Path(value)
    return root / DEFAULT_SOCKET if root is not None else None


def key(environ: dict[str, str] | None = None, set_by_imports: dict[str, str] | None = None) -> dict[str, Any]:
    """What must be the same in the server and in a client for the forked child to compute what a fresh process
    would: the interpreter and the load-time environment. A variable the preloaded imports set themselves (sklearn
    and joblib: KMP_INIT_AT_FORK) counts as absent where it holds that value: a fresh process ends with it too."""
    environ = dict(os.environ) if environ is None else environ
    same = set_by_imports or {}
    env = {k: v for k, v in sorted(environ.items()) if k.startswith(_LOAD_TIME) and same.get(k) != v}
    return {"python": sys.executable, "version": sys.version, "prefix": sys.prefix, "libraries": libraries(),
            "env": env}


def libraries() -> dict[str, int | None]:
    """What the server runs that no child re-imports -> its mtime (ns): each directory this interpreter's libraries
    are installed in (site-packages and dist-packages on sys.path under the interpreter's prefixes, the user's site)
    and this module, whose serve loop and key the server keeps. Installing, upgrading or removing a package adds or
    removes an entry in its directory (its dist-info), so a server started before that holds modules a fresh
    process would no longer import. (Code outside those, $PYTHONPATH's included, is the project's: every child
    imports it afresh from disk.)"""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    homes = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    dirs = {paths["purelib"], paths["platlib"], __file__}
    dirs |= {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")
             and os.path.realpath(p).startswith(homes)}
    if site.ENABLE_USER_SITE:
        dirs.add(site.getusersitepackages())
    out: dict[str, int | None] = {}
    for d in sorted(dirs):
        try:
            out[d] = os.stat(d).st_mtime_ns
        except OSError:
            out[d] = None
    return out


def _difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    if a["python"] == b["python"] and a["version"] != b["version"]:  # the interpreter was upgraded in place
        return f"{STALE}: Python {a['version'].split()[0]} -> {b['version'].split()[0]}"
    for k in ("python", "version", "prefix"):
        if a[k] != b[k]:
            return f"{k} {a[k]!r} != {b[k]!r}"
    mine, theirs = a.get("libraries", {}), b.get("libraries", {})
    if mine != theirs:
        return f"{STALE}: {', '.join(sorted(d for d in {*mine, *theirs} if mine.get(d) != theirs.get(d)))}"
    names = sorted(k for k in set(a["env"]) | set(b["env"]) if a["env"].get(k) != b["env"].get(k))
    return "environment differs in " + ", ".join(names[:6]) + (" ..." if len(names) > 6 else "")


# --- one server per socket, and the one `paperdag run` leaves behind ---------------------------------------------

def _claim_file(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def claim(path: Path) -> None:
    """Hold the claim on the socket `path` (an flock on `<path>.lock`, naming this pid) for the rest of this
    process's life: one server per socket (a second would take the first's socket from under it). Another live
    server's claim is an error naming its pid."""
    from paperdag.engine.errors import PaperdagError
    from paperdag.engine.locks import try_exclusive

    lock = _claim_file(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    if not try_exclusive(fd):
        held_by = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise PaperdagError(f"another `paperdag warm` (pid {held_by}) serves {path}")
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _CLAIM.append(fd)


def claimant(path: Path) -> int | None:
    """The pid of the live server that holds the claim on the socket `path` (-1 in the moment before it has written
    it), or None."""
    from paperdag.engine.locks import holder

    pid = holder(_claim_file(path))
    return None if pid is None else int(pid) if pid.isdigit() else -1


def start_behind(root: Path, environ: dict[str, str]) -> int | None:
    """What a `paperdag run` that no server served leaves behind, as a build daemon does: `paperdag warm` on the
    project's socket (.paperdag/warm.sock), detached (its own session; it exits after its idle time, 900 s), so that
    the next runs and stages in this project skip their imports and use its Prefect server. Started with `environ`,
    the environment the user gave the run, so that it serves that user's later commands. Only where PAPERDAG_WARM
    is unset (set, it names the socket to use or is "off") and no server holds the socket; returns its pid."""
    import subprocess

    path = root / DEFAULT_SOCKET
    if environ.get(ENV) or client_pid() != os.getpid() or len(os.fsencode(path.resolve())) >= _SOCKET_MAX:
        return None
    if claimant(path) is not None:
        return None
    log = root / LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:  # each server's log starts afresh
        proc = subprocess.Popen([sys.executable, "-m", "paperdag", "warm"], cwd=root, env=environ,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    proc.returncode = 0  # not this process's to wait for: it outlives it (no ResourceWarning at exit)
    return proc.pid


def stop(path: Path, timeout: float = 30) -> bool:
    """Stop the server that holds the claim on the socket `path` (SIGTERM, then SIGKILL after `timeout` s), if its
    process is a `paperdag warm`; True when one was stopped."""
    pid = claimant(path) or 0
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if pid > 0 else []
    except OSError:
        command = []
    if not any(b"paperdag" in part for part in command) or b"warm" not in command:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while claimant(path) is not None:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.05)
    return True


# --- client: the `paperdag stage` process DVC started ----------------------------------------------------------

def client_pid() -> int:
    """The pid of the process the user (or DVC) started for this one: in a served child its client's, which waits
    for it and forwards signals to it; elsewhere this process's own."""
    child, _, client = os.environ.get(SERVED, "").partition(":")
    return int(client) if child == str(os.getpid()) else os.getpid()


def delegate(root: Path, argv: list[str], env: dict[str, str] | None = None) -> int | None:
    """Run `paperdag ARGV` in a child of the warm server, with `env` (default: this process's environment), and
    return its exit status; None when no server serves this process (none running, a stale socket, a different key,
    or this process is a served child itself): then the caller runs the command itself."""
    path = socket_path(root)
    if path is None or not path.exists() or client_pid() != os.getpid():
        return None
    env = dict(os.environ) if env is None else env
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:  # a stale socket file: the server is gone
        sock.close()
        return None
    with sock:
        request = json.dumps({"argv": argv, "sys_argv": sys.argv, "sys_path": sys.path, "cwd": os.getcwd(),
                              "env": env, "key": key(env), "pid": os.getpid()}).encode()
        sys.stdout.flush()
        sys.stderr.flush()
        socket.send_fds(sock, [len(request).to_bytes(_HEADER, "big")], [0, 1, 2])
        sock.sendall(request)
        reader = sock.makefile("rb")
        reply = _read(reader)
        if reply is None or "refused" in reply:
            why = reply["refused"] if reply else "it closed the connection"
            print(f"paperdag: the warm stage server at {path} does not serve `paperdag {argv[0]}` ({why}): running it "
                  "here", file=sys.stderr)
            return None
        pid = int(reply["pid"])

        def forward(signum: int, frame: Any) -> None:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, forward)
        done = _read(reader)
    if done is None:  # the server died under the stage: do not leave the stage running unowned
        forward(signal.SIGTERM, None)
        print(f"paperdag: the warm stage server at {path} went away while stage process {pid} ran", file=sys.stderr)
        return 1
    if "signal" in done:  # end as the stage did, so that DVC sees what it would have seen
        signum = int(done["signal"])
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum
    return int(done["exit"])


def _read(reader: Any) -> dict[str, Any] | None:
    line = reader.readline()
    return json.loads(line) if line else None


# --- server -----------------------------------------------------------------------------------------------------

def serve(path: Path, idle: float, preload: tuple[str, ...] = PRELOAD,
          before_listen: Callable[[], object] | None = None, may_exit: Callable[[], bool] | None = None) -> None:
    """Import `preload`, call `before_listen` (the Prefect server started beside the imports: wait until it is
    healthy), then serve stage requests on the Unix socket `path` until `idle` seconds pass with no stage running or
    asked for and `may_exit()` agrees (a run of another process on its Prefect server says no), or SIGTERM /
    SIGINT. Children still running at shutdown are terminated."""
    import importlib

    global PREFECT_LOGGING
    start = time.perf_counter()
    env_before = dict(os.environ)
    libraries_before = libraries()  # before the imports: a package installed meanwhile makes the server stale
    before = _project_modules()  # this module and what the command line imported to start it
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # a library this environment lacks: the stages that need it import it themselves
            pass
    own = _project_modules() - before
    if own:  # the project's code must come from disk in every child, never from this process
        raise RuntimeError(f"warm: preloading imported project modules: {', '.join(sorted(own)[:5])}")
    # what the imports wrote into the environment (torch: KMP_*, ...): a fresh process would have it after them too
    set_by_imports = {k: v for k, v in os.environ.items() if env_before.get(k) != v}
    # and those the imports set where this process already had them (started from a process that had imported them)
    set_by_imports.update({k: os.environ[k] for k in _SET_BY_IMPORTS if k in os.environ})
    my_key = key(env_before, set_by_imports) | {"libraries": libraries_before}
    if "prefect.main" in sys.modules:  # Prefect imported (and its logging configured) under this environment
        from paperdag.engine.settings import prefect_logging_inputs

        PREFECT_LOGGING = prefect_logging_inputs()
    if before_listen is not None:
        before_listen()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen(64)
    listener.setblocking(False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stopping: list[int] = []
    signal.signal(signal.SIGCHLD, lambda s, f: None)
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    signal.signal(signal.SIGINT, lambda s, f: stopping.append(s))
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    children: dict[int, socket.socket] = {}  # child pid -> its client's connection
    print(f"paperdag warm: serving stages on {path} (imports took {time.perf_counter() - start:.1f} s; "
          f"idle exit after {idle:g} s)", flush=True)
    last = time.monotonic()
    try:
        while not stopping:
            timeout = None if children else max(0.0, idle - (time.monotonic() - last))
            if not children and timeout == 0:
                if may_exit is None or may_exit():
                    break
                last = time.monotonic() - idle + RECHECK_S
                continue
            for sk, _ in sel.select(timeout):
                if sk.data == "accept":
                    refused = _accept(listener, sel, children, my_key, set_by_imports, wake_r)
                    if refused and refused.startswith(STALE) and idle > 0:
                        print("paperdag warm: retiring once its stages are done: it can serve no client again",
                              flush=True)
                        idle = 0.0
                elif sk.data == "wake":
                    try:
                        os.read(wake_r, 512)
                    except BlockingIOError:
                        pass
                else:  # a client's connection became readable: it went away (clients send nothing more)
                    sel.unregister(sk.fileobj)
                    _kill(sk.data)
            _reap(children, sel)
            if children:
                last = time.monotonic()
    finally:
        for pid in list(children):
            _kill(pid)
        deadline = time.monotonic() + 10
        while children and time.monotonic() < deadline:
            _reap(children, sel)
            time.sleep(0.05)
        signal.set_wakeup_fd(-1)
        listener.close()
        path.unlink(missing_ok=True)


# (module name, its __file__) -> whether it is the project's: filled by the server after its imports and inherited
# by every child, which then resolves only the paths of modules imported since (realpath over ~4,000 preloaded
# modules took a child ~0.2 s)
_OWN: dict[tuple[str, str | None], bool] = {}


def _project_modules() -> set[str]:
    """Imported modules that are not the interpreter's or the environment's own (the project's code)."""
    homes = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})

    def own(name: str, file: str | None) -> bool:
        if (name, file) not in _OWN:
            _OWN[name, file] = name == "paperdag" or name.startswith("paperdag.") or (
                name not in ("__main__", "__mp_main__") and file is not None and os.path.isabs(file)
                and not os.path.realpath(file).startswith(homes))
        return _OWN[name, file]

    return {name for name, module in list(sys.modules.items())
            if own(name, file if isinstance(file := getattr(module, "__file__", None), str) else None)}


def _accept(listener: socket.socket, sel: selectors.BaseSelector, children: dict[int, socket.socket],
            my_key: dict[str, Any], set_by_imports: dict[str, str], wake_r: int) -> str | None:
    """Serve one waiting client (fork its child), or refuse it; returns why it was refused, None when served."""
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return None
    conn.setblocking(True)
    fds: list[int] = []
    try:
        conn.settimeout(30)
        header, fds, _, _ = socket.recv_fds(conn, _HEADER, 3)
        size = int.from_bytes(header, "big")
        body = b""
        while len(body) < size:
            chunk = conn.recv(min(1 << 20, size - len(body)))
            if not chunk:
                raise ConnectionError("the client closed the connection mid-request")
            body += chunk
        request = json.loads(body)
        conn.settimeout(None)
        if len(fds) != 3:
            raise ConnectionError(f"expected 3 file descriptors, got {len(fds)}")
    except (OSError, ValueError) as e:
        for fd in fds:
            os.close(fd)
        conn.close()
        print(f"paperdag warm: a bad request: {e}", file=sys.stderr, flush=True)
        return f"a bad request: {e}"
    theirs = {**request["key"], "env": key(request["key"]["env"], set_by_imports)["env"]}
    if theirs != my_key:
        why = _difference(my_key, theirs)
        print(f"paperdag warm: refused paperdag {' '.join(request['argv'])}: {why}", flush=True)
        _send(conn, {"refused": why})
        for fd in fds:
            os.close(fd)
        conn.close()
        return why
    pid = os.fork()
    if pid == 0:
        _child(request, set_by_imports, fds, [listener.fileno(), wake_r, *(c.fileno() for c in children.values()), conn.fileno()])
    for fd in fds:
        os.close(fd)
    children[pid] = conn
    print(f"paperdag warm: pid {pid}: paperdag {' '.join(request['argv'])} in {request['cwd']}", flush=True)
    _send(conn, {"pid": pid})
    sel.register(conn, selectors.EVENT_READ, pid)
    return None


def _reap(children: dict[int, socket.socket], sel: selectors.BaseSelector) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        if conn.fileno() in sel.get_map():
            sel.unregister(conn)
        done = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.waitstatus_to_exitcode(status)}
        print(f"paperdag warm: pid {pid}: " + (f"killed by signal {done['signal']}" if "signal" in done
                                                else f"exit {done['exit']}"), flush=True)
        try:
            _send(conn, done)
        except OSError:  # the client is gone
            pass
        conn.close()


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)  # the child leads its own session (and so its own process group)
    except ProcessLookupError:
        pass


def _send(conn: socket.socket, doc: dict[str, Any]) -> None:
    conn.sendall(json.dumps(doc).encode() + b"\n")


def fresh_project_code() -> None:
    """In a served child: the project's code as it is on disk now, not as the server found it (its modules dropped,
    to be imported again); what the server learnt at its imports carried into the fresh copy of this module."""
    import importlib

    carried = PREFECT_LOGGING
    for name in _project_modules():
        del sys.modules[name]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    fresh = importlib.import_module(__name__)
    vars(fresh)["PREFECT_LOGGING"] = carried


def _child(request: dict[str, Any], set_by_imports: dict[str, str], fds: list[int], close: list[int]) -> None:
    """In the forked child: become the stage process the client would have been, run it, exit with its status."""
    # what the child inherits (~600,000 objects after the server's imports) out of its collector's reach: its full
    # collections would otherwise walk them all (a served stage spent ~0.4 s of ~1 s of fixed cost in them) and,
    # touching their headers, copy the pages it shares with the server. Freezing is a list splice, and the
    # server's own collector is left as it was
    gc.freeze()
    code = 1
    try:
        for fd in [*close, *_CLAIM]:
            os.close(fd)
        _CLAIM.clear()
        os.setsid()
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own streams, never closed)
        sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.update(set_by_imports)
        # this process is the stage (or run): it does not delegate again; the processes it starts may
        os.environ[SERVED] = f"{os.getpid()}:{request['pid']}"
        sys.argv = request["sys_argv"]
        sys.path[:] = request["sys_path"]
        fresh_project_code()
        from paperdag.engine.cli import main

        code = main(request["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
