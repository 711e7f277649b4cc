"""The warm stage server (`paperdag warm`) against fresh stage processes: one pipeline's smoke-scale build, twice
each way, interleaved, in throw-away repositories (scratch copies of this project's pipeline).

Per build: the wall time of `dvc repro` and the whole machine's CPU seconds meanwhile (/proc/stat, so the detached
drainer and the server's children count), and whether every output is bit-identical between the two ways (timing
fields aside: the files dvc.lock marks volatile are compared without them by `paperdag.lock`'s stable md5).
The server's own start (its imports) is reported apart: it is paid once per session, not per build.

Usage: .venv/bin/python benchmarks/bench_warm.py [--pipeline rot] [--repeats 2]; writes benchmarks/results/warm.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sh(cwd: Path, *cmd: str, env: dict[str, str] | None = None) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def machine_cpu_s() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def scratch_repo(dest: Path, pipeline: str, smoke: bool = True) -> Path:
    """A committed git + DVC repository holding a copy of this project's `pipeline` (its smoke scale by default)."""
    from paperdag.engine.scratch import copy_pipeline

    copy_pipeline(ROOT, pipeline, dest, smoke=smoke)
    sh(dest, "git", "init", "-q", "-b", "main")
    (dest / ".gitignore").write_text("/data/\n/mlflow.db\n/mlruns/\n/.paperdag/\n__pycache__/\n")
    sh(dest, sys.executable, "-m", "dvc", "init", "-q")
    sh(dest, "git", "add", "-A")
    sh(dest, "git", "-c", "user.email=b@example.com", "-c", "user.name=bench", "commit", "-qm", "scratch")
    return dest


def build(repo: Path, warm: str) -> dict[str, float]:
    cpu, t = machine_cpu_s(), time.perf_counter()
    sh(repo, sys.executable, "-m", "dvc", "repro", "-q", env={"PAPERDAG_WARM": warm, "PAPERDAG_DRAIN_LINGER": "5"})
    wall = time.perf_counter() - t
    from paperdag.engine import records

    records.drain(repo)  # the drainer's work counts too
    while records.drainer_alive(repo):
        time.sleep(0.2)
    return {"wall_s": wall, "cpu_s": machine_cpu_s() - cpu}


def stable_md5s(repo: Path) -> dict[str, str]:
    """Every output dvc.lock records -> its md5, or for one with volatile values the md5 without them."""
    import yaml

    from paperdag.engine import dvc

    stable = yaml.safe_load((repo / "paperdag.lock").read_text())["outputs"]
    out = {}
    for stage in (dvc.lock(repo).get("stages") or {}).values():
        for o in stage.get("outs", []):
            out[o["path"]] = stable.get(o["path"], {}).get(o["md5"], o["md5"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", default="rot")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "warm.sock"
        t = time.perf_counter()
        server = subprocess.Popen([sys.executable, "-m", "paperdag", "warm", "--socket", str(sock), "--idle", "3600",
                                   "--no-prefect"],
                                  cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        while not sock.exists():
            if server.poll() is not None:
                raise SystemExit("paperdag warm exited before serving")
            time.sleep(0.1)
        start_s = time.perf_counter() - t
        try:
            runs: dict[str, list[dict[str, float]]] = {"fresh": [], "warm": []}
            md5s: dict[str, dict[str, str]] = {}
            for i in range(args.repeats):
                for way in ("fresh", "warm"):
                    repo = scratch_repo(Path(tmp) / f"{way}{i}", args.pipeline)
                    runs[way].append(build(repo, "off" if way == "fresh" else str(sock)))
                    md5s.setdefault(way, stable_md5s(repo))
                    print(way, i, runs[way][-1], flush=True)
        finally:
            server.terminate()
            server.wait(30)
    best = {w: {k: min(r[k] for r in rs) for k in ("wall_s", "cpu_s")} for w, rs in runs.items()}
    result = {
        "pipeline": args.pipeline, "repeats": args.repeats, "server_start_s": start_s, "runs": runs, "best": best,
        "wall_ratio_fresh_over_warm": best["fresh"]["wall_s"] / best["warm"]["wall_s"],
        "cpu_ratio_fresh_over_warm": best["fresh"]["cpu_s"] / best["warm"]["cpu_s"],
        "outputs_identical": md5s["fresh"] == md5s["warm"], "outputs": len(md5s["fresh"]),
    }
    out = ROOT / "benchmarks/results/warm.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
