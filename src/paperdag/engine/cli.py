"""The `paperdag` command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from paperdag.engine.errors import PaperdagError, StageError


def find_root(start: Path | None = None) -> Path:
    """The nearest directory upwards holding params.yaml and pipelines/ (PAPERDAG_ROOT overrides)."""
    if os.environ.get("PAPERDAG_ROOT"):
        return Path(os.environ["PAPERDAG_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    for d in [here, *here.parents]:
        if (d / "pipelines").is_dir() and (d / "params.yaml").exists():
            return d
    raise PaperdagError(f"no paperdag project (a directory with pipelines/ and params.yaml) at or above {here}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paperdag", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="write the dvc.yaml files (the root's, pipelines/*/dvc.yaml) from pipelines/*.yaml")
    r.add_argument("--check", action="store_true", help="exit 1 when a dvc.yaml differs from the declarations")
    s = sub.add_parser("stage", help="run one stage (the command dvc.yaml calls)")
    s.add_argument("address", metavar="PIPELINE:STAGE")
    w = sub.add_parser("warm", help="serve stages from a process that has imported torch & co. once (blocks; a cold `paperdag run` "
                                     "starts one behind it unless PAPERDAG_WARM is set)")
    w.add_argument("--socket", type=Path, help="the Unix socket (default: $PAPERDAG_WARM, else <root>/.paperdag/warm.sock)")
    w.add_argument("--idle", type=float, default=900, help="exit after this many seconds with no stage (default 900)")
    w.add_argument("--no-prefect", action="store_true",
                   help="start no Prefect server (default: one, used by every `paperdag run` on this PREFECT_HOME "
                        "while this lives, unless PREFECT_API_URL names one)")
    w.add_argument("--preload", help="comma-separated modules to import once (default: torch, transformers, "
                                     "sentence_transformers and the other heavy ones, paperdag.engine.warm.PRELOAD)")
    run = sub.add_parser("run", help="run a pipeline's stale stages as a Prefect flow")
    run.add_argument("pipeline")
    run.add_argument("--runner", choices=["thread", "dask"], default="thread")
    run.add_argument("--address", help="address of an existing Dask scheduler (with --runner dask)")
    run.add_argument("--wait-for-workers", type=float, metavar="SECONDS",
                     help="with --address: how long to wait for the scheduler's first worker before stopping, and "
                          "during the run how long it may have no worker, or not answer, before the run stops "
                          "(default 30; 0: neither checked, for a cluster that starts workers when tasks arrive)")
    run.add_argument("--workers", type=int, help="stages run at once (default: CPU count)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="change a params.yaml value before running (written to params.yaml, like dvc exp run -S)")
    sc = sub.add_parser("schedule", help="register a Prefect deployment of a pipeline with a cron schedule; list, remove")
    sc.add_argument("pipeline", nargs="?")
    what = sc.add_mutually_exclusive_group(required=True)
    what.add_argument("--cron", help="schedule PIPELINE with this cron expression")
    what.add_argument("--list", action="store_true", help="the scheduled pipelines: status, last and next run")
    what.add_argument("--remove", metavar="PIPELINE", help="delete the pipeline's deployment and its schedule")
    sub.add_parser("serve", help="serve the scheduled pipelines (blocks)")
    ln = sub.add_parser("lineage", help="trace an artifact back to its sources")
    ln.add_argument("target", metavar="PATH_OR_MD5")
    fmt = ln.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--mermaid", action="store_true")
    v = sub.add_parser("verify", help="rerun stages in a scratch workspace and compare outputs")
    v.add_argument("target", metavar="PIPELINE[:STAGE]")
    v.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance for float tensors and JSON numbers")
    v.add_argument("--against-lock", action="store_true",
                   help="compare with the md5s dvc.lock records (what a fresh clone checks), rebuilding missing inputs")
    v.add_argument("--workers", type=int, help="stages rerun at once (default: CPU count)")
    v.add_argument("--json", action="store_true")
    au = sub.add_parser("audit", help="check each output's links in dvc.lock: file, run, params, commit, chain, "
                                      "environment, verify (exit 1 when one is broken)")
    au.add_argument("pipelines", nargs="*", metavar="PIPELINE", help="default: every pipeline")
    au.add_argument("--json", action="store_true")
    im = sub.add_parser("import-runs", help="copy the finished runs of another MLflow store (a git worktree's mlflow.db) "
                                            "that this project's lacks, so lineage and audit find them")
    im.add_argument("source", help="a tracking URI, an mlflow.db file or a directory holding one")
    im.add_argument("pipelines", nargs="*", metavar="PIPELINE", help="default: every pipeline")
    cl = sub.add_parser("claims", help="judge the pipelines' declared claims on their metrics: held, not held, within noise")
    cl.add_argument("pipelines", nargs="*", metavar="PIPELINE", help="default: every pipeline with claims")
    cl.add_argument("--check", action="store_true", help="exit 1 unless every claim is held")
    out = cl.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true")
    out.add_argument("--markdown", action="store_true")
    out.add_argument("--readme", action="store_true", help="write each pipeline's table into README.md's claims block")
    ex = sub.add_parser("export", help="write the build dvc.lock records as a Workflow Run RO-Crate and/or OpenLineage events")
    to = ex.add_argument_group("where (one or both)")
    to.add_argument("--ro-crate", metavar="DIR", help="a Workflow Run RO-Crate's directory (replaced if it holds a crate)")
    to.add_argument("--openlineage", metavar="FILE", help="OpenLineage RunEvents, START and COMPLETE per stage, one JSON a line")
    ex.add_argument("--pipeline", help="only this pipeline's stages")
    sub.add_parser("list", help="pipelines and stages, stale or up to date")
    w = sub.add_parser("why", help="why stages are stale: changed params (old -> new), code, inputs and their upstream stage")
    w.add_argument("target", nargs="?", metavar="PIPELINE|STAGE|ARTIFACT",
                   help="a pipeline, pipeline:stage, a dvc.yaml stage name or an output path (default: every stage)")
    w.add_argument("--json", action="store_true")
    w.add_argument("--check", action="store_true", help="exit 1 when anything is stale (for CI)")
    rep = sub.add_parser("report", help="write report/index.html and report/README.md")
    rep.add_argument("--out", default="report")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for a warm server's child (warm.py), as given
    try:
        return _dispatch(args)
    except PaperdagError as e:
        print(f"paperdag: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _start_warm_behind(root: Path, environ: dict[str, str]) -> None:
    from paperdag.engine import warm

    try:
        pid = warm.start_behind(root, environ)
    except OSError as e:  # the run is done: a server left behind is a convenience, never its failure
        print(f"paperdag: could not start `paperdag warm` behind the run: {e}", file=sys.stderr)
        return
    if pid is not None:
        print(f"paperdag: started `paperdag warm` (pid {pid}, log {warm.LOG}): the next runs and stages here skip "
              "their imports and use its Prefect server; it exits after 15 idle minutes (PAPERDAG_WARM=off: never "
              "start one)", file=sys.stderr)


def _dispatch(args: argparse.Namespace) -> int:
    root = find_root()
    if args.command == "render":
        from paperdag.engine.render import render
        from paperdag.engine.runner import validated_project

        current = render(validated_project(root), check=args.check)
        if args.check and not current:
            print("paperdag: the dvc.yaml files have drifted from pipelines/: run `paperdag render`", file=sys.stderr)
            return 1
        print("dvc.yaml files are up to date" if current else "dvc.yaml files written (the root's and pipelines/*/dvc.yaml)")
        return 0
    if args.command == "stage":
        from paperdag.engine import numerics
        from paperdag.engine.failures import failure_path, record_failure
        from paperdag.engine.params import load_params

        failure_path(root, args.address).unlink(missing_ok=True)
        try:
            from paperdag.engine import warm

            argv, n = ["stage", args.address], numerics.from_params(load_params(root))
            # a warm server's child runs it, when one serves, under the numerics' environment: asked before this
            # process re-executes itself under that environment (one interpreter start less), and only once
            if not os.environ.pop(warm.TRIED, None):
                code = warm.delegate(root, argv, {**os.environ, **numerics.environment(n)})
                if code is not None:
                    return code
                os.environ[warm.TRIED] = "1"
            # the libraries read their kernel and thread settings when they load: fix them before anything imports them
            numerics.ensure(n, argv)
            os.environ.pop(warm.TRIED, None)
            from paperdag.engine.runner import run_stage

            run_stage(root, args.address)
        except PaperdagError as e:
            record_failure(root, args.address, e)
            raise
        except Exception:  # the runner said why on one line and kept the traceback (failures.py)
            return 1
        except BaseException as e:  # interrupted or terminated
            record_failure(root, args.address, e)
            raise
        return 0
    if args.command == "warm":
        from paperdag.engine import numerics, warm
        from paperdag.engine.params import load_params

        argv = ["warm", "--idle", str(args.idle)] + (["--socket", str(args.socket)] if args.socket else []) \
            + (["--preload", args.preload] if args.preload is not None else []) + (["--no-prefect"] if args.no_prefect else [])
        numerics.ensure(numerics.from_params(load_params(root)), argv)  # the stages' numerics: part of the key
        path = args.socket or warm.socket_path(root) or root / warm.DEFAULT_SOCKET
        warm.claim(path.resolve())  # before anything starts: a second server on this socket stops here
        preload = warm.PRELOAD if args.preload is None else tuple(m for m in args.preload.split(",") if m)
        # and the Prefect server every `paperdag run` on this PREFECT_HOME uses while this lives (unless the user
        # points PREFECT_API_URL at one), started beside the imports
        from paperdag.engine import prefect_server
        from paperdag.engine.settings import prefect_defaults

        prefect_defaults(root)
        home = Path(os.environ["PREFECT_HOME"])
        other = None if os.environ.get("PREFECT_API_URL") or args.no_prefect else prefect_server.published_server(home)
        if other:  # another warm's: one server per database
            print(f"paperdag warm: the runs on PREFECT_HOME {home} use the Prefect server at {other} (another "
                  "`paperdag warm`'s)", flush=True)
        own = not (os.environ.get("PREFECT_API_URL") or args.no_prefect or other)
        with prefect_server.lasting_server(home) if own else contextlib.nullcontext() as server:

            def announce() -> None:
                if server is not None:
                    print(f"paperdag warm: Prefect server {server.ready()} (PREFECT_HOME {home})", flush=True)

            warm.serve(path.resolve(), args.idle, preload, before_listen=announce,
                       may_exit=server.retire if server is not None else None)
        return 0
    if args.command == "run":
        from paperdag.engine import numerics, warm
        from paperdag.engine.params import load_params

        # a warm server's child runs it, when one serves (Prefect and DVC imported there once), with the numerics'
        # environment that every stage it starts would otherwise set by re-executing itself
        env = {**os.environ, **numerics.environment(numerics.from_params(load_params(root)))}
        code = warm.delegate(root, args.argv, env)
        if code is not None:
            return code
        from paperdag.engine.orchestrate import run_pipeline

        given = dict(os.environ)  # as the user gave it: the run sets Prefect's variables in its own
        try:
            states = run_pipeline(root, args.pipeline, args.runner, args.address, args.workers, args.overrides,
                                  args.wait_for_workers)
        except StageError:  # a run whose stage failed leaves one too; a refused or interrupted one does not
            _start_warm_behind(root, given)
            raise
        _start_warm_behind(root, given)  # a `paperdag warm` for the next commands, as a build daemon
        for stage, state in states.items():
            print(f"{stage}: {state}")
        return 0
    if args.command in ("schedule", "serve"):
        from paperdag.engine.settings import prefect_defaults

        prefect_defaults(root)
        from paperdag.engine import flow

        if args.command == "schedule" and args.list:
            rows = flow.list_schedules(root)
            cols = ["pipeline", "cron", "status", "last_run", "next_run", "deployment_id"]
            widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in cols}
            for r in [dict(zip(cols, cols, strict=True)), *rows]:
                print("  ".join(r[c].ljust(widths[c]) for c in cols).rstrip())
            if not rows:
                print("nothing scheduled")
            return 0
        if args.command == "schedule" and args.remove:
            flow.remove_schedule(root, args.remove)
            print(f"removed the schedule of {args.remove}")
            return 0
        if args.command == "schedule":
            if not args.pipeline:
                raise PaperdagError("schedule --cron EXPR needs a PIPELINE")
            dep = flow.schedule(root, args.pipeline, args.cron)
            print(f"scheduled {args.pipeline} ({args.cron}): deployment {dep}")
            return 0
        flow.serve(root)
        return 0
    if args.command == "lineage":
        from paperdag.engine.lineage import mermaid, trace, tree

        graph = trace(root, args.target)
        print(json.dumps(graph, indent=2) if args.json else mermaid(graph) if args.mermaid else tree(graph))
        return 0
    if args.command == "verify":
        from paperdag.engine.verify import format_results, verify_recorded

        results = verify_recorded(root, args.target, args.against_lock, rtol=args.rtol, workers=args.workers)
        print(json.dumps(results, indent=2) if args.json else format_results(results))
        return 0 if all(r["reproduced"] for r in results) else 1
    if args.command == "audit":
        from paperdag.engine.audit import audit, format_audit

        result = audit(root, args.pipelines or None)
        print(json.dumps(result, indent=2) if args.json else format_audit(result))
        return 0 if result["ok"] else 1
    if args.command == "import-runs":
        from paperdag.engine.runimport import import_runs

        counts = import_runs(root, args.source, args.pipelines or None)
        print(f"imported {counts['imported']} runs from {args.source} ({counts['present']} already here, "
              f"{counts['unfinished']} unfinished there: left)")
        return 0
    if args.command == "claims":
        from paperdag.engine import claims
        from paperdag.engine.spec import load_project

        project = load_project(root)
        names = args.pipelines or [n for n, p in sorted(project.pipelines.items()) if p.claims]
        judged, errors = {}, []
        for n in names:  # one pipeline's bad claim is reported, the others are still judged
            try:
                judged[n] = claims.evaluate_pipeline(root, n, project)
            except PaperdagError as e:
                errors.append(f"{n}: {e}")
                print(f"paperdag: error: {e}", file=sys.stderr)
        if args.json:
            print(json.dumps(judged, indent=2))
        elif args.readme:
            cols = ["claim", "value", "95% interval", "n", "test", "baseline", "status"]
            # a pipeline none of whose metrics is in the workspace (not run here, or not checked out) keeps its table:
            # a column of `missing` would overwrite the figures of the run dvc.lock records
            absent = [n for n, j in judged.items() if j and all(e["status"] == "missing" for e in j.values())]
            tables = {n: claims.table(claims.rows(n, j), markdown=True, columns=cols) for n, j in judged.items() if n not in absent}
            written = claims.update_readme(root / "README.md", tables)
            print(f"README.md: claims tables of {', '.join(written) or 'no pipeline'} written")
            if absent:
                print(f"README.md: claims tables of {', '.join(absent)} left as they are: none of their metrics is in the "
                      "workspace (`dvc checkout` or run them first)")
        else:
            print(claims.table([r for n, j in judged.items() for r in claims.rows(n, j)], markdown=args.markdown))
        failing = [f"{n}.{c}" for n, j in judged.items() for c, e in j.items() if e["status"] != "held"] + errors
        if args.check and failing:
            print(f"paperdag: {len(failing)} claim(s) not held: {', '.join(failing)}", file=sys.stderr)
            return 1
        return 0
    if args.command == "export":
        import time

        from paperdag.engine.export import openlineage, ro_crate

        if not (args.ro_crate or args.openlineage):
            raise PaperdagError("export: give --ro-crate DIR and/or --openlineage FILE")
        t0 = time.perf_counter()
        if args.ro_crate:
            counts = ro_crate(root, Path(args.ro_crate), args.pipeline)
            print(f"{args.ro_crate}: RO-Crate written in {time.perf_counter() - t0:.1f} s: "
                  + ", ".join(f"{n} {t}" for t, n in counts.items()))
        if args.openlineage:
            events = openlineage(root, Path(args.openlineage), args.pipeline)
            print(f"{args.openlineage}: {events} OpenLineage events written")
        return 0
    if args.command == "list":
        from paperdag.engine.status import format_status, status

        print(format_status(status(root)))
        return 0
    if args.command == "why":
        from paperdag.engine import why

        explanation = why.explain(root, args.target)
        print(json.dumps(why.as_json(explanation), indent=2, default=str) if args.json else why.format_text(explanation))
        return 1 if args.check and explanation.stale else 0
    if args.command == "report":
        from paperdag.engine.report import collect, summary, write_report

        data = collect(root)
        html, md = write_report(root, Path(args.out), data)
        print(summary(data))
        print(f"wrote {html} and {md}")
        return 0
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
