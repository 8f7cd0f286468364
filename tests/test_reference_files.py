"""The committed result summaries under reference/: each one can be traced and rerun, and each one the docs cite
is there.

- Every ``reference/*_summary.json`` records its experiment, its full config, the package versions and the commit it ran
  (``provenance`` or ``computed_on``), and its config still loads under today's config class of its
  experiment, so ``bayesattn run EXPERIMENT --config FILE`` can rerun it.
- Every ``reference/...`` path that a docs page, the README, the changelog or a shipped config names exists
  (a glob matches at least one file), and every summary is named by at least one of them: no number in the
  docs rests on a file that is not in the repository, and no committed summary is an orphan.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bayesattn.experiments import get_experiment

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "reference"
SUMMARIES = sorted(REFERENCE.glob("*_summary.json"))
# a repository path under reference/ (not the docs site's own reference/ pages): ends in a file or a folder
CITED = re.compile(r"(?<![\w/.-])reference/[A-Za-z0-9_.*{},/-]*[A-Za-z0-9_*}/]")


def _texts() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*.md") if p.relative_to(ROOT / "docs").parts[0] != "reference"]
    configs = list((ROOT / "bayesattn" / "experiments").rglob("*.toml"))
    return sorted(docs) + [ROOT / "README.md", ROOT / "CHANGELOG.md"] + sorted(configs)


def _expand(pattern: str) -> list[str]:
    """Brace alternatives, as a shell expands them: a{1,2}b -> a1b, a2b."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    return [x for alt in m.group(1).split(",") for x in _expand(pattern[: m.start()] + alt + pattern[m.end() :])]


def _citations() -> dict[str, list[str]]:
    """{cited path or glob: [files that cite it]}."""
    out: dict[str, list[str]] = {}
    for text in _texts():
        for m in CITED.finditer(text.read_text(encoding="utf-8")):
            for path in _expand(m.group(0)):
                out.setdefault(path, []).append(str(text.relative_to(ROOT)))
    return out


def test_the_reference_folder_has_summaries():
    assert len(SUMMARIES) >= 10


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.name)
def test_a_summary_records_its_config_versions_and_commit_and_loads_today(path):
    summary = json.loads(path.read_text())
    assert isinstance(summary.get("config"), dict), f"{path.name}: no config"
    assert {"jax", "numpy", "bayesattn"} <= set(summary.get("versions", {})), f"{path.name}: package versions"
    commits = [c.get("git_commit") for c in summary.get("computed_on") or []]
    commits.append((summary.get("provenance") or {}).get("git_commit"))
    assert any(c and re.fullmatch(r"[0-9a-f]{40}", c) for c in commits), f"{path.name}: no commit recorded"
    experiment = get_experiment(summary.get("experiment"))  # ConfigError unless it names a registered experiment
    experiment.Config.load(summary["config"], source=path.name)  # ConfigError if today's config refuses it


def test_every_cited_reference_file_exists():
    missing = {p: where for p, where in _citations().items() if not list(ROOT.glob(p))}
    assert not missing, f"cited but not in the repository: {missing}"


def test_every_summary_is_cited():
    cited = {f for p in _citations() for f in ROOT.glob(p)}
    orphans = [p.name for p in SUMMARIES if p not in cited]
    assert not orphans, f"committed but named by no docs page, README, changelog or config: {orphans}"
