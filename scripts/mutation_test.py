"""Mutation testing of the core modules with cosmic-ray (run through scripts/mutation_test.sh).

For each core module: copy the work tree to a scratch folder (the real files are never mutated), let
cosmic-ray enumerate its mutants, keep a deterministic sample (stratified over the mutation operators), run
the module's targeted tests against each sampled mutant, and report killed / total with the survivors' diffs.

A full run over every mutant (about 1,900 here, 1,000 of them binary-operator swaps in posterior.py) takes
many hours on 2 cores, so the default is a sample of MUTANTS_PER_MODULE per module (about 30 minutes).
Not part of the default test run.

    scripts/mutation_test.sh                      # all modules, default sample
    scripts/mutation_test.sh --per-module 60 --modules bayesattn/sweep.py
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

try:
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult
except ImportError:  # the tool lives in its own environment, which scripts/mutation_test.sh makes
    sys.exit(
        "scripts/mutation_test.py: cosmic-ray is not installed here; run scripts/mutation_test.sh, which installs it"
    )

# module -> the default tests that exercise it (fast: each run imports jax and compiles afresh)
MODULES = {
    "bayesattn/bayes/posterior.py": "tests/test_posterior.py tests/test_survivor_pins.py",
    "bayesattn/models/attention.py": "tests/test_attention.py tests/test_attention_model.py",
    "bayesattn/bayes/samples.py": "tests/test_sampler_checks.py tests/test_sampling.py::test_bad_input_raises_value_error",
    "bayesattn/sweep.py": "tests/test_sweep.py tests/test_atomic_writes.py tests/test_survivor_pins.py",
    "bayesattn/training/objective.py": "tests/test_training.py tests/test_training_pins.py -k 'objective or adam_step or initial_loss'",
}
MUTANTS_PER_MODULE = 20
TIMEOUT_S = 300.0


def copy_tree(root: Path, dest: Path) -> None:
    """Tracked and untracked-but-not-ignored files of the work tree (what a commit would hold)."""
    if dest.exists():
        shutil.rmtree(dest)
    names = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        src = root / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def stratified_sample(items, n, seed):
    """Up to n work items, taken round-robin over operator families (each family shuffled by seed)."""
    groups = collections.defaultdict(list)
    # job ids are random: order by what the mutant is, so that a seed names the same sample every run
    for it in sorted(items, key=lambda it: (it.mutations[0].operator_name, it.mutations[0].occurrence)):
        family = it.mutations[0].operator_name.split("/")[-1].split("_")[0]
        groups[family].append(it)
    rng = random.Random(seed)
    for g in groups.values():
        rng.shuffle(g)
    keep, families = [], sorted(groups)
    while len(keep) < n and any(groups.values()):
        for f in families:
            if groups[f] and len(keep) < n:
                keep.append(groups[f].pop())
    return keep


def describe(item, work: Path) -> str:
    m = item.mutations[0]
    line = (work / m.module_path).read_text().splitlines()[m.start_pos[0] - 1].strip()
    return f"{m.module_path}:{m.start_pos[0]} {m.operator_name} #{m.occurrence}: `{line}`"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", required=True, help="the project's Python (with bayesattn's dependencies)")
    ap.add_argument("--modules", nargs="*", default=list(MODULES), help="modules to mutate (default: all core)")
    ap.add_argument("--per-module", type=int, default=MUTANTS_PER_MODULE, help="sampled mutants per module; 0: all")
    ap.add_argument("--seed", type=int, default=0, help="seed of the mutant sample")
    ap.add_argument("--work", default=".mutation", help="scratch folder (ignored by git)")
    args = ap.parse_args()

    root = Path(__file__).resolve().parent.parent
    work = (root / args.work).resolve()
    copy_tree(root, work / "tree")
    tree = work / "tree"
    python = str(Path(args.python).absolute()) if os.sep in args.python else args.python  # not resolve(): keep the venv
    cosmic = str(Path(sys.executable).with_name("cosmic-ray"))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    report = [
        f"# mutation run {time.strftime('%Y-%m-%d %H:%M')} (cosmic-ray, seed {args.seed}, "
        f"{args.per_module or 'all'} mutants per module)",
        "",
    ]
    totals = collections.Counter()
    for module in args.modules:
        tests = MODULES[module]
        test_cmd = f"{python} -m pytest -x -q -p no:cacheprovider {tests}"
        base = subprocess.run(test_cmd, shell=True, cwd=tree, env=env, capture_output=True, text=True)
        if base.returncode != 0:
            print(base.stdout[-3000:], base.stderr[-3000:])
            print(f"baseline tests fail for {module}: fix them first", file=sys.stderr)
            return 1
        stem = module.replace("/", "_").removesuffix(".py")
        config, session = work / f"{stem}.toml", work / f"{stem}.sqlite"
        session.unlink(missing_ok=True)
        config.write_text(
            "[cosmic-ray]\n"
            f'module-path = "{module}"\n'
            f"timeout = {TIMEOUT_S}\n"
            "excluded-modules = []\n"
            f'test-command = "{test_cmd.replace(chr(34), chr(92) + chr(34))}"\n'
            '[cosmic-ray.distributor]\nname = "local"\n'
        )
        subprocess.run([cosmic, "init", str(config), str(session)], cwd=tree, env=env, check=True)
        with use_db(str(session)) as db:
            items = list(db.pending_work_items)
            keep = {it.job_id for it in stratified_sample(items, args.per_module or len(items), args.seed)}
            for it in items:
                if it.job_id not in keep:
                    db.set_result(it.job_id, WorkResult(output="not sampled", worker_outcome=WorkerOutcome.SKIPPED))
        t0 = time.perf_counter()
        print(f"{module}: {len(keep)} of {len(items)} mutants; tests: {tests}", flush=True)
        subprocess.run([cosmic, "exec", str(config), str(session)], cwd=tree, env=env, check=True)
        killed, survived = [], []
        with use_db(str(session)) as db:
            by_id = {it.job_id: it for it in db.work_items}
            for job_id, result in db.results:
                item = by_id[job_id]
                if result.worker_outcome == WorkerOutcome.SKIPPED:
                    continue
                # a mutant that cannot even be imported (incompetent) or times out is caught too
                (survived if result.test_outcome == TestOutcome.SURVIVED else killed).append((item, result))
        n = len(killed) + len(survived)
        totals.update(killed=len(killed), total=n)
        line = f"- `{module}`: {len(killed)} / {n} killed ({time.perf_counter() - t0:.0f} s; tests: {tests})"
        print(line, flush=True)
        report.append(line)
        for item, result in survived:
            report.append(f"  - survived: {describe(item, tree)}")
            report.extend(
                "    " + d
                for d in (result.diff or "").splitlines()
                if d.startswith(("-", "+")) and not d.startswith(("---", "+++"))
            )
    report += ["", f"total: {totals['killed']} / {totals['total']} killed"]
    (work / "report.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
