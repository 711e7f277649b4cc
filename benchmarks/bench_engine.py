"""Engine overheads, measured on the toy diamond pipeline (tests/resources/toy) in a throw-away repository.

- no-op `dvc repro` of the whole (toy) repo;
- per-stage overhead of `paperdag stage` over calling the stage function in-process, and over a bare
  `python -c "import paperdag.engine.runner"` (interpreter start and the engine's imports);
- the read-only commands a user types: `paperdag list`, `paperdag lineage ARTIFACT`, an up-to-date `paperdag run`;
- `paperdag run` on two independent equal stages: concurrent (2 workers) vs sequential (1 worker), as the span
  from the first start to the last end of the two stages' MLflow runs (same machine, same run of this script);
- Prefect start-up: one stale stage rerun by `paperdag run` (temporary Prefect server, flow, dvc commit) minus
  the same rerun by `dvc repro`, with a reused and a fresh PREFECT_HOME; on a running `prefect server start`; and
  on that server with a running `paperdag warm` serving both commands (paperdag.engine.warm); and with a running
  `paperdag warm` alone, whose own Prefect server the run uses.

Usage: .venv/bin/python benchmarks/bench_engine.py [--work-seconds 15]; writes benchmarks/results/engine.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TOY = REPO / "tests" / "resources" / "toy"


# a flow of one task that does nothing, run as `paperdag run` runs its flow (no result persistence, quiet logs)
EMPTY_FLOW = """
from prefect import flow, task
@task(persist_result=False)
def nothing(): return 1
@flow(persist_result=False)
def empty(): return nothing.submit().result()
empty()
"""
PREFECT_QUIET = {"PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                 "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "false"}


def sh(cwd: Path, *cmd: str, env: dict[str, str | None] | None = None) -> float:
    """Seconds `cmd` takes in `cwd`, in this process's environment with `env` on top (None: unset)."""
    t = time.perf_counter()
    full = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=full)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    return time.perf_counter() - t


def paperdag(cwd: Path, *args: str, env: dict[str, str | None] | None = None) -> float:
    return sh(cwd, sys.executable, "-m", "paperdag", *args, env=env)


def dvc(cwd: Path, *args: str) -> float:
    return sh(cwd, sys.executable, "-m", "dvc", *args)


def set_param(repo: Path, old: str, new: str) -> None:
    p = repo / "params.yaml"
    text = p.read_text()
    assert old in text, old
    p.write_text(text.replace(old, new))


EMPTY_PIPELINE = """description: One stage that does nothing, imports nothing (the engine's own cost per stage).
stages:
  nothing:
    outs:
      out: data/empty/out.json
"""
EMPTY_STAGE = '''"""A stage with no work and no imports."""

from dataclasses import dataclass


@dataclass(frozen=True)
class NothingParams:
    seed: int


def nothing(params: NothingParams) -> dict:
    return {"out": {}}
'''


def make_repo(dest: Path) -> Path:
    shutil.copytree(TOY, dest)
    (dest / "pipelines" / "empty.yaml").write_text(EMPTY_PIPELINE)
    (dest / "stages" / "empty.py").write_text(EMPTY_STAGE)
    for args in (["init", "-q"], ["config", "user.email", "b@example.com"], ["config", "user.name", "bench"]):
        subprocess.run(["git", *args], cwd=dest, check=True)
    (dest / ".gitignore").write_text("/data/\n/mlflow.db\n/mlruns/\n/.paperdag/\n/.prefect/\n/report/\n__pycache__/\n")
    dvc(dest, "init", "-q")
    paperdag(dest, "render")
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(["git", "commit", "-qm", "bench"], cwd=dest, check=True)
    return dest


@contextlib.contextmanager
def warm_server(repo: Path, sock: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """`paperdag warm` in the repo (its default preloads), until the block ends; yields the clients' environment."""
    env = {**os.environ, **env}
    proc = subprocess.Popen([sys.executable, "-m", "paperdag", "warm", "--socket", str(sock), "--idle", "600"], cwd=repo,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while not sock.exists():
            if proc.poll() is not None:
                raise SystemExit("paperdag warm did not start")
            time.sleep(0.1)
        yield {**env, "PAPERDAG_WARM": str(sock)}
    finally:
        proc.terminate()
        proc.wait(60)


def span(repo: Path, stages: set[str], parent_run: str | None = None) -> float:
    """Seconds from the first start to the last end of the given stages' latest MLflow runs."""
    sys.path.insert(0, str(REPO / "src"))
    from paperdag.engine.tracking import client

    c = client(repo)
    exp = c.get_experiment_by_name("toy")
    runs = c.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"], max_results=200)
    latest = {}
    for r in runs:
        st = r.data.tags.get("paperdag.stage")
        if st in stages and st not in latest:
            latest[st] = r.info
    return (max(i.end_time for i in latest.values()) - min(i.start_time for i in latest.values())) / 1000


def in_process_stage_seconds(repo: Path, repeats: int) -> float:
    """Call toy's `make` directly, as a user's script would: no engine, no MLflow."""
    sys.path.insert(0, str(repo))
    sys.path.insert(0, str(repo / "src"))
    import importlib

    import paperdag.methods

    paperdag.methods.__path__.append(str(repo / "src" / "paperdag" / "methods"))
    toy = importlib.import_module("stages.toy")
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = toy.make(toy.MakeParams(n=50, extra_rows="", seed=1))
        out["table"].write_parquet(repo / "direct.parquet")
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def server_start_seconds(tmp: Path, repeats: int) -> dict[str, float]:
    """The temporary Prefect server, from start to healthy, the three cases interleaved: on a copy of the template
    (prefect_server.py: told to skip migrating and registering block types), on a copy of it named by
    PREFECT_API_DATABASE_CONNECTION_URL (a database paperdag does not vouch for: the server checks its migrations and
    registers the block types itself, as every start did before), and on a fresh home (Prefect migrates a new
    database)."""
    from paperdag.engine.prefect_server import build_template

    code = ("import os, sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter()\n"
            "from paperdag.engine.prefect_server import temporary_server\n"
            "with temporary_server() as ready: ready(); print(time.perf_counter() - t)\n")

    def once(home: Path, how: str) -> float:
        env = {**os.environ, "PREFECT_HOME": str(home)}
        env.pop("PREFECT_API_URL", None)
        home.mkdir(parents=True)
        if how == "checked":
            shutil.copyfile(build_template(), home / "own.db")
            env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{home / 'own.db'}"
        elif how == "fresh":  # Prefect's own path: no database copied in, it migrates one
            env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{home / 'fresh.db'}"
        r = subprocess.run([sys.executable, "-c", code, str(REPO / "src")], env=env, capture_output=True, text=True, check=True)
        return float(r.stdout.strip().splitlines()[-1])

    times: dict[str, list[float]] = {"template": [], "checked": [], "fresh": []}
    for i in range(repeats):
        for how, got in times.items():
            got.append(once(tmp / f"{how}-{i}", how))
    return {"template_s": statistics.median(times["template"]),
            "template_checked_by_the_server_s": statistics.median(times["checked"]),
            "fresh_s": statistics.median(times["fresh"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work-seconds", type=float, default=15.0, help="compute per independent stage in the concurrency test")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for k in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "PAPERDAG_ROOT"):
        os.environ.pop(k, None)  # embedded defaults, as a new user has them
    # cold rows: no warm server, and none left behind by a run (the "left behind" row below unsets it)
    os.environ["PAPERDAG_WARM"] = "off"
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    results: dict[str, object] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    with tempfile.TemporaryDirectory(prefix="paperdag-bench-") as tmp:
        repo = make_repo(Path(tmp) / "toy")
        prefect_home = Path(tmp) / "prefect-home"
        env = {"PREFECT_HOME": str(prefect_home)}
        dvc(repo, "repro")

        noop = [dvc(repo, "repro") for _ in range(args.repeats)]
        results["noop_dvc_repro_s"] = statistics.median(noop)

        empty = [paperdag(repo, "stage", "empty:nothing") for _ in range(args.repeats)]
        via_cli = [paperdag(repo, "stage", "toy:make") for _ in range(args.repeats)]
        bare = [sh(repo, sys.executable, "-c", "import paperdag.engine.runner") for _ in range(args.repeats)]
        direct = in_process_stage_seconds(repo, args.repeats)
        results["stage"] = {
            "empty_stage_s": statistics.median(empty),
            "empty_over_import_runner_s": statistics.median(empty) - statistics.median(bare),
            "paperdag_stage_s": statistics.median(via_cli),
            "import_runner_s": statistics.median(bare),
            "direct_call_s": direct,
            "overhead_s": statistics.median(via_cli) - direct,
            "over_import_runner_s": statistics.median(via_cli) - statistics.median(bare),
            "note": "paperdag stage = process start, numerics re-exec, imports, validation, md5s, a run record "
                    "(MLflow gets it from a detached drainer, off the stage's path)",
        }
        dvc(repo, "commit", "-f", "pipelines/toy/dvc.yaml:toy-make")
        dvc(repo, "commit", "-f", "empty-nothing")
        paperdag(repo, "lineage", "data/toy/metrics.json")  # drains: MLflow's store exists before it is timed
        results["commands"] = {
            "list_s": statistics.median(paperdag(repo, "list") for _ in range(args.repeats)),
            "lineage_s": statistics.median(paperdag(repo, "lineage", "data/toy/metrics.json") for _ in range(args.repeats)),
            "up_to_date_run_s": statistics.median(paperdag(repo, "run", "toy", env=env) for _ in range(args.repeats)),
        }

        # two independent equal stages: concurrent vs sequential, same repo, same script run
        set_param(repo, "seconds: 0.0", f"seconds: {args.work_seconds}")
        t_par = paperdag(repo, "run", "toy", "--workers", "2", env=env)
        span_par = span(repo, {"left", "right"})
        set_param(repo, f"seconds: {args.work_seconds}", f"seconds: {args.work_seconds + 0.001}")
        t_seq = paperdag(repo, "run", "toy", "--workers", "1", env=env)
        span_seq = span(repo, {"left", "right"})
        results["parallel"] = {
            "work_seconds_per_stage": args.work_seconds,
            "span_concurrent_s": span_par,
            "span_sequential_s": span_seq,
            "speedup": span_seq / span_par,
            "flow_wall_concurrent_s": t_par,
            "flow_wall_sequential_s": t_seq,
            "flow_speedup": t_seq / t_par,
        }

        # Prefect start-up: the same one-stage change, rerun by `dvc repro` and by `paperdag run` (temporary server,
        # flow, task, dvc commit), with a reused and a fresh PREFECT_HOME
        scale = iter(range(3, 100))

        def bump() -> None:
            text = (repo / "params.yaml").read_text()
            import re

            (repo / "params.yaml").write_text(re.sub(r"scale: [0-9.]+", f"scale: {next(scale)}.0", text))

        def one_stage_changes(served: dict[str, str | None]) -> tuple[list[float], list[float]]:
            """A one-stage change rerun by `dvc repro`, then another by `paperdag run`, `--repeats` times, in the
            environment `served` (a warm server's clients)."""
            t_d, t_r = [], []
            for _ in range(args.repeats):
                bump()
                t_d.append(sh(repo, sys.executable, "-m", "dvc", "repro", env=served))
                bump()
                t_r.append(paperdag(repo, "run", "toy", env=served))
            return t_d, t_r

        t_dvc, t_reused = [], []
        for _ in range(args.repeats):
            bump()
            t_dvc.append(dvc(repo, "repro"))
            bump()
            t_reused.append(paperdag(repo, "run", "toy", env=env))
        bump()
        t_fresh = paperdag(repo, "run", "toy", env={"PREFECT_HOME": str(Path(tmp) / "fresh-home")})
        t_noop = statistics.median(paperdag(repo, "run", "toy", env=env) for _ in range(args.repeats))
        from paperdag.engine.prefect_server import running_server

        with running_server(Path(tmp) / "server-home") as url:  # a `prefect server start` the user keeps running
            t_external = []
            for _ in range(args.repeats):
                bump()
                t_external.append(paperdag(repo, "run", "toy", env={"PREFECT_API_URL": url}))
            # the least any Prefect flow costs a fresh process: one task that does nothing, on that server
            quiet = {"PREFECT_API_URL": url, "PREFECT_HOME": str(Path(tmp) / "server-home"), **PREFECT_QUIET}
            t_floor = [sh(repo, sys.executable, "-c", EMPTY_FLOW, env=quiet) for _ in range(args.repeats)]
            # and a `paperdag warm` the user keeps running too: both commands' stages are served by it, and the
            # run itself (Prefect and DVC imported there once)
            with warm_server(repo, Path(tmp) / "warm.sock", {"PREFECT_API_URL": url}) as served:
                # the empty stage again, served: the client's and the forked child's own costs
                t_warm_empty = [paperdag(repo, "stage", "empty:nothing", env=served) for _ in range(args.repeats)]
                t_warm_dvc, t_warm_run = one_stage_changes(served)
        # `paperdag warm` alone: it starts the Prefect server every run on its PREFECT_HOME uses (prefect_server.py)
        with warm_server(repo, Path(tmp) / "warm-alone.sock", env) as served:
            t_alone_dvc, t_alone_run = one_stage_changes(served)
        # no set-up at all (PAPERDAG_WARM unset): the first `paperdag run` is cold and leaves a `paperdag warm`
        # behind (warm.start_behind); the next commands are served by it and use its Prefect server
        from paperdag.engine import warm
        from paperdag.engine.prefect_server import published_server

        behind: dict[str, str | None] = {"PAPERDAG_WARM": None, "PREFECT_HOME": str(Path(tmp) / "behind-home")}
        bump()
        t_first = paperdag(repo, "run", "toy", env=behind)
        sock, t_ready = repo / warm.DEFAULT_SOCKET, time.perf_counter()
        try:
            while not (sock.exists() and published_server(Path(tmp) / "behind-home")):
                if time.perf_counter() - t_ready > 300:
                    raise SystemExit("the cold `paperdag run` left no `paperdag warm` behind, or it did not start")
                time.sleep(0.2)
            t_ready = time.perf_counter() - t_ready
            t_behind_dvc, t_behind_run = one_stage_changes(behind)
        finally:
            warm.stop(sock)
        results["prefect_startup"] = {
            "one_stage_dvc_repro_s": statistics.median(t_dvc),
            "one_stage_paperdag_run_reused_home_s": statistics.median(t_reused),
            "one_stage_paperdag_run_fresh_home_s": t_fresh,
            "ratio_paperdag_run_over_dvc_repro": statistics.median(t_reused) / statistics.median(t_dvc),
            "prefect_cost_reused_home_s": statistics.median(t_reused) - statistics.median(t_dvc),
            "prefect_cost_fresh_home_s": t_fresh - statistics.median(t_dvc),
            "up_to_date_paperdag_run_s": t_noop,
            "one_stage_paperdag_run_external_server_s": statistics.median(t_external),
            "ratio_external_server_over_dvc_repro": statistics.median(t_external) / statistics.median(t_dvc),
            "one_stage_dvc_repro_warm_s": statistics.median(t_warm_dvc),
            "one_stage_paperdag_run_warm_s": statistics.median(t_warm_run),
            "ratio_warm_over_dvc_repro_warm": statistics.median(t_warm_run) / statistics.median(t_warm_dvc),
            "empty_prefect_flow_s": statistics.median(t_floor),
            "ratio_empty_prefect_flow_over_dvc_repro": statistics.median(t_floor) / statistics.median(t_dvc),
            "one_stage_dvc_repro_warm_alone_s": statistics.median(t_alone_dvc),
            "one_stage_paperdag_run_warm_alone_s": statistics.median(t_alone_run),
            "ratio_warm_alone": statistics.median(t_alone_run) / statistics.median(t_alone_dvc),
            "first_paperdag_run_no_setup_s": t_first,
            "warm_left_behind_ready_after_s": t_ready,
            "one_stage_dvc_repro_left_behind_s": statistics.median(t_behind_dvc),
            "one_stage_paperdag_run_left_behind_s": statistics.median(t_behind_run),
            "ratio_left_behind": statistics.median(t_behind_run) / statistics.median(t_behind_dvc),
            "ratio_first_run_over_dvc_repro": t_first / statistics.median(t_dvc),
            "note": "a fresh PREFECT_HOME starts from the migrated template (prefect_server.py); an up-to-date run "
                    "stops the server it started while DVC planned",
        }
        results["stage"]["empty_stage_served_s"] = statistics.median(t_warm_empty)
        results["stage"]["empty_served_over_fresh"] = statistics.median(t_warm_empty) / results["stage"]["empty_stage_s"]
        results["server_start"] = server_start_seconds(Path(tmp), args.repeats)
    out = HERE / "results" / "engine.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    s, p, f, c, v = results["stage"], results["parallel"], results["prefect_startup"], results["commands"], results["server_start"]
    print(f"no-op dvc repro (4 stages)           {results['noop_dvc_repro_s']:.2f} s")
    print(f"empty stage                          {s['empty_stage_s']:.2f} s ({s['empty_over_import_runner_s']:+.2f} s over "
          f"`python -c 'import paperdag.engine.runner'`, {s['import_runner_s']:.2f} s)")
    print(f"empty stage served by paperdag warm  {s['empty_stage_served_s']:.2f} s ({s['empty_served_over_fresh']:.2f}x the fresh process)")
    print(f"paperdag stage toy:make vs direct    {s['paperdag_stage_s']:.2f} s vs {s['direct_call_s']:.3f} s "
          f"(overhead {s['overhead_s']:.2f} s; "
          f"{s['over_import_runner_s']:+.2f} s over the import)")
    print(f"paperdag list / lineage / up-to-date run   {c['list_s']:.2f} / {c['lineage_s']:.2f} / {c['up_to_date_run_s']:.2f} s")
    print(f"Prefect server to healthy            template {v['template_s']:.1f} s (the server checking it itself "
          f"{v['template_checked_by_the_server_s']:.1f} s), fresh database {v['fresh_s']:.1f} s")
    print(f"two independent {p['work_seconds_per_stage']:.0f} s stages         span {p['span_sequential_s']:.1f} s sequential / "
          f"{p['span_concurrent_s']:.1f} s concurrent = {p['speedup']:.2f}x (whole flow {p['flow_speedup']:.2f}x)")
    print(f"one-stage change: dvc repro {f['one_stage_dvc_repro_s']:.1f} s, paperdag run {f['one_stage_paperdag_run_reused_home_s']:.1f} s "
          f"(Prefect +{f['prefect_cost_reused_home_s']:.1f} s; fresh PREFECT_HOME +{f['prefect_cost_fresh_home_s']:.1f} s); "
          f"up-to-date run {f['up_to_date_paperdag_run_s']:.1f} s; paperdag run / dvc repro = {f['ratio_paperdag_run_over_dvc_repro']:.2f}")
    print(f"one-stage change on a running `prefect server start` (PREFECT_API_URL): paperdag run "
          f"{f['one_stage_paperdag_run_external_server_s']:.1f} s = {f['ratio_external_server_over_dvc_repro']:.2f}x dvc repro")
    print(f"one-stage change with that server and a `paperdag warm` serving both: dvc repro {f['one_stage_dvc_repro_warm_s']:.1f} s, "
          f"paperdag run {f['one_stage_paperdag_run_warm_s']:.1f} s = {f['ratio_warm_over_dvc_repro_warm']:.2f}x")
    print(f"an empty one-task Prefect flow in a fresh process, on that server: {f['empty_prefect_flow_s']:.1f} s = "
          f"{f['ratio_empty_prefect_flow_over_dvc_repro']:.2f}x the one-stage dvc repro (Prefect's own floor)")
    print(f"one-stage change with a `paperdag warm` alone (its own Prefect server): dvc repro "
          f"{f['one_stage_dvc_repro_warm_alone_s']:.1f} s, paperdag run {f['one_stage_paperdag_run_warm_alone_s']:.1f} s = "
          f"{f['ratio_warm_alone']:.2f}x")
    print(f"no set-up: the first paperdag run {f['first_paperdag_run_no_setup_s']:.1f} s (cold, "
          f"{f['ratio_first_run_over_dvc_repro']:.2f}x the cold dvc repro) leaves a `paperdag warm` behind, serving "
          f"{f['warm_left_behind_ready_after_s']:.0f} s later; then dvc repro {f['one_stage_dvc_repro_left_behind_s']:.1f} s, "
          f"paperdag run {f['one_stage_paperdag_run_left_behind_s']:.1f} s = {f['ratio_left_behind']:.2f}x")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
