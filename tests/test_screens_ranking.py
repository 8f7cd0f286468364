"""The paper's PR-integral ranking of heads (bayesattn.diagnostics.ranking), against brute-force loops."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bayesattn.diagnostics.ranking import (
    elbow,
    pr_integral,
    pr_spread,
    precision_at_k,
    rank_heads,
    ranking_over_training,
)

ROOT = Path(__file__).resolve().parents[1]


def _trapezoid_loop(y, x):
    tot = 0.0
    for i in range(len(x) - 1):
        tot += 0.5 * (y[i] + y[i + 1]) * (x[i + 1] - x[i])
    return tot


def test_pr_integral_matches_a_trapezoid_loop():
    rng = np.random.default_rng(0)
    steps = np.array([0, 1, 3, 7, 20, 55, 150, 400])
    pr = rng.uniform(0.5, 9.0, size=(len(steps), 3, 4))  # some values below 1: clipped at 0
    got = pr_integral(pr, steps)
    for l in range(3):
        for h in range(4):
            want = _trapezoid_loop([max(v - 1.0, 0.0) for v in pr[:, l, h]], steps)
            assert got[l, h] == pytest.approx(want, rel=1e-12)
    # a constant PR c integrates to (c - 1) * (last step - first step)
    assert pr_integral(np.full((3, 1), 4.0), [10, 20, 110])[0] == pytest.approx(300.0)
    np.testing.assert_allclose(pr_spread(pr), pr.max(0) - pr.min(0))
    with pytest.raises(ValueError, match="steps"):
        pr_integral(pr[:2], [5, 5])
    with pytest.raises(ValueError, match="shape"):
        pr_integral(pr, steps[:-1])


def test_rank_elbow_precision_against_brute_force():
    score = np.array([[3.0, 9.0], [1.0, 5.0]])
    assert rank_heads(score) == [(0, 1), (1, 1), (0, 0), (1, 0)]
    rng = np.random.default_rng(1)
    for _ in range(20):
        v = np.sort(rng.exponential(size=12))[::-1]
        # brute force: distance of each point to the line through the first and last points
        p0, p1 = np.array([0.0, v[0]]), np.array([11.0, v[-1]])
        u = (p1 - p0) / np.linalg.norm(p1 - p0)
        w = [np.array([i, v[i]]) - p0 for i in range(12)]
        dist = [abs(u[0] * wi[1] - u[1] * wi[0]) for wi in w]  # |u x w|, the 2-d cross product
        assert elbow(v) == int(np.argmax(dist))
    assert elbow([10, 9.5, 9, 1, 0.9, 0.8]) == 3  # chord at x = 3: 4.48, the point (3, 1) lies 3.48 below it
    ranked = [(0, 1), (1, 1), (0, 0), (1, 0)]
    assert precision_at_k(ranked, [(1, 1), (1, 0)], [1, 2, 4]) == {1: 0.0, 2: 0.5, 4: 0.5}


def test_ranking_over_training_on_constructed_trajectories():
    steps = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128])
    K = len(steps)
    pr = np.full((K, 2, 2), 3.0)
    pr[:, 0, :] = 6.0  # layer 0: high from the start, then collapses
    pr[5:, 0, :] = 1.5
    pr[4:, 1, :] = 10.0  # layer 1 (the "induction" heads): rises at step 8
    want = [(1, 0), (1, 1)]
    integ = ranking_over_training(pr, steps, want, "integral")
    spread = ranking_over_training(pr, steps, want, "spread")
    # brute force: the top two by the integral up to each checkpoint
    for k in range(1, K):
        sc = np.array(
            [
                [_trapezoid_loop(np.maximum(pr[: k + 1, l, h] - 1, 0), steps[: k + 1]) for h in range(2)]
                for l in range(2)
            ]
        )
        top = set(rank_heads(sc)[:2])
        assert integ["match"][k - 1] == (top == set(want))
    assert integ["first_match"] == integ["from_step"]
    # layer 1's integral overtakes layer 0's (6 - 1 = 5 per step until step 16) only later than the rise
    assert integ["from_step"] > 8
    # the spread sees the jump (7 against 4.5) at the first checkpoint after it
    assert spread["from_step"] == 8


def convergence_script():
    """scripts/screens_convergence.py as a module."""
    spec = importlib.util.spec_from_file_location("screens_convergence", ROOT / "scripts" / "screens_convergence.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_screens_convergence_script_counts_and_overlaps(tmp_path, capsys):
    """scripts/screens_convergence.py: per run folder the heads per class and their Jaccard overlap with the
    reference (the paper-baseline run of largest N), from constructed head records."""
    import json

    mod = convergence_script()

    def run(name, N, induction_heads):
        recs = [
            {
                "layer": 0,
                "head": h,
                "classes": ["induction"] if h in induction_heads else [],
                "best_class": "induction" if h in induction_heads else None,
                "induction_circuit": h in induction_heads,
                "previous_token_circuit": False,
            }
            for h in range(4)
        ]
        folder = tmp_path / name / "points" / "model"
        folder.mkdir(parents=True)
        body = {"point": {}, "result": {"records": recs, "probe": {"N": N, "baseline": "paper"}}}
        (folder / "p.json").write_text(json.dumps(body))
        return tmp_path / name

    small, large = run("small", 64, {0, 1}), run("large", 2000, {1, 2})
    out = tmp_path / "table.json"
    assert mod.main([str(small), str(large), "--json", str(out)]) == 0
    table = {r["heads"]: r for r in json.loads(out.read_text())["rows"]}
    assert table["induction (30x)"]["counts"] == [2, 2]
    assert table["induction (30x)"]["jaccard_with_reference"] == [1 / 3, 1.0]  # {0,1} vs {1,2}: 1 of 3
    assert table["unclassified"]["counts"] == [2, 2]
    assert mod.main([str(tmp_path)]) == 2 and "no points/model" in capsys.readouterr().err
    # a summary.json recording the head sets (bayesattn.experiments.screens.summary.head_sets) gives the same table
    from bayesattn.experiments.screens.summary import head_sets

    for name in ("small", "large"):
        (rec,) = [json.loads(p.read_text()) for p in (tmp_path / name / "points" / "model").iterdir()]
        model = {"probe": rec["result"]["probe"], "head_sets": head_sets(rec["result"])}
        (tmp_path / f"{name}.json").write_text(json.dumps({"model": model}))
    out2 = tmp_path / "table2.json"
    assert mod.main([str(tmp_path / "small.json"), str(tmp_path / "large.json"), "--json", str(out2)]) == 0
    assert json.loads(out2.read_text()) == json.loads(out.read_text())


def test_model_summary_records_head_sets_at_the_runs_threshold():
    """The screens summary keeps each head set of a model screen as sorted [layer, head] lists, labelled with the
    run's threshold, so screens can be compared without their point files."""
    from bayesattn.experiments.screens.summary import summarize

    recs = [
        {"layer": 1, "head": 0, "classes": ["induction"], "best_class": "induction", "induction_circuit": True,
         "previous_token_circuit": False},
        {"layer": 0, "head": 2, "classes": ["induction", "bos"], "best_class": "bos", "induction_circuit": False,
         "previous_token_circuit": False},
        {"layer": 0, "head": 1, "classes": [], "best_class": None, "induction_circuit": False,
         "previous_token_circuit": True},
    ]  # fmt: skip
    res = {"models": [], "probe": {"N": 8}, "lines": [], "ranking": None, "records": recs}
    sets = summarize({"model": [{"point": {"model": {"threshold": 12.5}}, "result": res}]})["model"]["head_sets"]
    assert sets["induction (12.5x)"] == [[0, 2], [1, 0]]
    assert sets["bos (12.5x)"] == [[0, 2]] and sets["self (12.5x)"] == []
    assert sets["induction circuit (50x)"] == [[1, 0]] and sets["previous-token circuit (100x)"] == [[0, 1]]
    assert sets["best class induction"] == [[1, 0]] and sets["best class bos"] == [[0, 2]]
    assert sets["unclassified"] == [[0, 1]]


def test_the_results_pages_probe_size_table_is_the_script_on_the_committed_summaries(capsys):
    """docs/results/screens.md section 1b: its table of heads per class and Jaccard overlaps is, row for row,
    scripts/screens_convergence.py's output on the five committed SmolLM2 summaries under reference/."""
    mod = convergence_script()
    files = [ROOT / "reference" / f"smollm2_N{N}_summary.json" for N in (64, 256, 1000, 2000)]
    files.append(ROOT / "reference" / "smollm2_N64_class_free_summary.json")
    assert mod.main([str(f) for f in files]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    page = (ROOT / "docs" / "results" / "screens.md").read_text(encoding="utf-8")
    start = page.index(table[0])  # the header row, naming the five columns
    assert page[start:].splitlines()[: len(table)] == table
