"""The README's Python examples run as written, each on its own (a fresh namespace per block, as a user who
copies one block would), and give what they claim."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_examples_run_each_on_its_own():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 3
    spaces = []
    for block in blocks:
        ns: dict = {}
        exec(compile(block, str(README), "exec"), ns)
        spaces.append(ns)
    sampling, theory, training = spaces
    # the claims written next to the code
    assert abs(float(sampling["samples"].order_parameters["m"].mean()) - 0.243) < 0.02
    assert sampling["mean_V"].shape == (8, 8) and sampling["cov_V"].shape == (8, 8)
    assert theory["curve"].transition["order"] == "first" and 700 < theory["curve"].transition["P_c"] < 780
    err = theory["losses"]["posterior"]
    assert err[0] > 0.9 and err[-1] < 0.5 and len(theory["losses"]["joint_mode"]) == len(err)
    assert training["data"].T == training["task"].T == 8 and training["res"].failure is None
    assert training["sweep"].final_order_parameters["m"].shape == (3, 8)


def test_references_stay_inside_the_repository():
    """Users have only the repository: no pointer to a file outside it, and every docs/ file cited exists."""
    root = README.parent
    outside = ("THEORY" + ".md", "../" + "shared", "/work/" + "shared")
    files = [
        README,
        *root.glob("docs/*.md"),
        *root.glob("docs/results/*.md"),
        *root.glob("scripts/*.py"),
        *root.glob("tests/*.py"),
        *root.glob("bayesattn/**/*.py"),
        *root.glob("bayesattn/experiments/*/configs/*.toml"),
    ]
    cited = set()
    for f in files:
        if not f.is_file():
            continue
        text = f.read_text()
        for needle in outside:
            assert needle not in text, f"{f.relative_to(root)} refers to {needle}, outside the repository"
        cited |= set(re.findall(r"docs/[\w.-]+\.md", text))
    assert "docs/model.md" in cited
    for path in cited:
        assert (root / path).is_file(), f"{path} is cited but not in the repository"


def test_the_printout_shown_is_the_default_summarys():
    """The main job's printout in the README and on the getting-started page is, line for line, what the summary
    of the committed default run prints (``describe``), so the two cannot drift from the reference file."""
    import json

    from bayesattn.experiments.copy_head.summary import describe

    root = README.parent
    summary = json.loads((root / "reference" / "phase_diagram_default_summary.json").read_text())
    want = describe(summary)
    for page in (README, root / "docs" / "index.md"):
        blocks = re.findall(r"^```\w*\n(.*?)^```", page.read_text(), flags=re.S | re.M)
        (block,) = [b for b in blocks if "softmax: theory:" in b]
        assert block.splitlines() == want, page.name
