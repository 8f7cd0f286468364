"""The docs site's reference pages are generated from the code (docs/gen/reference.py): every public name is in the
API reference, every subcommand and option in the command-line page, every config field of every experiment in
the configuration page. A built site (BAYESATTN_SITE, set by .ci/run after `mkdocs build`) has no broken link and
no missing image."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import typing
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import bayesattn
from bayesattn.cli import build_parser
from bayesattn.experiments import EXPERIMENTS

ROOT = Path(__file__).resolve().parent.parent


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "gen" / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_lazy_public_names_are_each_subpackages_own():
    """bayesattn's table of public names (imported on first use) names exactly what each subpackage exports."""
    by_sub: dict[str, set] = {}
    for name, sub in bayesattn._WHERE.items():
        by_sub.setdefault(sub, set()).add(name)
        assert getattr(bayesattn, name) is getattr(importlib.import_module(f"bayesattn.{sub}"), name)
    for sub, names in by_sub.items():
        exported = set(importlib.import_module(f"bayesattn.{sub}").__all__)
        assert names <= exported, (sub, names - exported)
    assert set(bayesattn.__all__) == set(bayesattn._WHERE)


def test_every_public_name_is_in_the_api_reference():
    from bayesattn.bayes import theory

    api = _reference().api_markdown()
    rendered = set(re.findall(r"^::: (\S+)$", api, flags=re.M))
    for name in bayesattn.__all__:
        if name != "theory":
            assert f"bayesattn.{bayesattn._WHERE[name]}.{name}" in rendered, name
    for name in theory.__all__:
        assert f"bayesattn.bayes.theory.{name}" in rendered, name
    for path in rendered:  # each resolves to a real object
        module, _, attr = path.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), path


def test_gallery_shows_every_figure_with_its_command():
    ref = _reference()
    gallery = ref.gallery_markdown()
    figures = [f for f in (ROOT / "docs" / "figures").iterdir() if f.suffix in (".png", ".gif")]
    assert figures
    for f in figures:
        assert f"](figures/{f.name})" in gallery, f.name
        assert f.name in ref.FIGURE_COMMANDS, f"{f.name}: no command recorded in docs/gen/reference.py"
    assert "command not recorded" not in gallery
    for name in ref.FIGURE_COMMANDS:  # no stale entry
        assert (ROOT / "docs" / "figures" / name).is_file(), name


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_command_line_page_covers_every_subcommand_and_option():
    page = _reference().cli_markdown()
    for name, parser in _subcommands().items():
        assert f"## `bayesattn {name}`" in page, name
        for action in parser._actions:
            for opt in action.option_strings:
                if opt not in ("-h", "--help"):
                    assert f"`{opt}" in page, (name, opt)


def test_configuration_page_covers_every_field():
    page = _reference().config_markdown()

    def fields(model, prefix=""):
        for name, field in model.model_fields.items():
            yield prefix + name
            ref = _reference()
            sub = ref._nested_model(field.annotation)
            if sub is not None:
                # a dict of sections (mcmc.by_attention) needs its key in a --set path: the page names it
                # and a list of sections (plateau's cases) its index
                kinds = [a for a in (field.annotation, *typing.get_args(field.annotation)) if typing.get_origin(a)]
                dicts = [a for a in kinds if typing.get_origin(a) is dict]
                level = f".<{' or '.join(typing.get_args(typing.get_args(dicts[0])[0]))}>" if dicts else ""
                level = ".<index>" if any(typing.get_origin(a) is list for a in kinds) else level
                yield from fields(sub, prefix + name + level + ".")

    for name, cls in EXPERIMENTS.items():
        assert f"## `{name}`" in page
        for f in fields(cls.Config):
            assert f"| `{f}` |" in page, (name, f)


def test_a_per_attention_override_path_from_the_configuration_page_loads():
    """The page's path for a per-attention override, with its key filled in, is one --set accepts; the path
    without the key level is refused."""
    from bayesattn.experiments.config import ConfigError, apply_overrides

    page = _reference().config_markdown()
    row = "| `mcmc.by_attention.<softmax or linear>.method` |"
    assert row in page
    cls = EXPERIMENTS["phase-diagram"].Config
    for att in ("softmax", "linear"):
        path = row.split("`")[1].replace("<softmax or linear>", att)
        cfg = cls.load(apply_overrides(cls, {}, [f"{path}=chees"]))
        assert cfg.mcmc.by_attention[att].method == "chees"
    with pytest.raises((ConfigError, ValueError), match="by_attention"):
        cls.load(apply_overrides(cls, {}, ["mcmc.by_attention.method=chees"]))


def test_a_list_entry_path_from_the_configuration_page_loads():
    """The page's path for a field of one entry of a list of sections, its index filled in, sets that entry only;
    an index past the list's end is refused, naming the list's length."""
    from bayesattn.experiments.config import ConfigError, apply_overrides

    page = _reference().config_markdown()
    row = "| `cases.<index>.T` |"
    assert row in page
    cls = EXPERIMENTS["plateau"].Config
    default = cls()
    path = row.split("`")[1].replace("<index>", "1")
    cfg = cls.load(apply_overrides(cls, {}, [f"{path}=64"]))
    assert [c.T for c in cfg.cases] == [c.T if i != 1 else 64 for i, c in enumerate(default.cases)]
    assert cfg.cases[0] == default.cases[0] and cfg.cases[1].gd_lr == default.cases[1].gd_lr
    n = len(default.cases)
    with pytest.raises(ConfigError, match=rf"cases has {n} entries; expected an index in 0..{n - 1}, not '{n}'"):
        apply_overrides(cls, {}, [f"cases.{n}.T=16"])


# ------------------------------------------------------------------------------------------ the built site
class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.images, self.ids = [], [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])


SITE = os.environ.get("BAYESATTN_SITE")


@pytest.mark.skipif(not SITE, reason="needs a built site: BAYESATTN_SITE=DIR (set by .ci/run after mkdocs build)")
def test_built_site_has_no_broken_link_and_every_image_loads():
    site = Path(SITE)
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    parsed = {}
    for page in pages:
        p = _Links()
        p.feed(page.read_text(errors="replace"))
        parsed[page] = p
    broken = []
    for page, p in parsed.items():
        for src in p.images:
            if urlparse(src).scheme in ("http", "https", "data"):
                continue
            path = unquote(urlparse(src).path)
            target = ((site if path.startswith("/") else page.parent) / path.lstrip("/")).resolve()
            if not target.is_file() or target.stat().st_size == 0:
                broken.append(f"{page.relative_to(site)}: image {src}")
        for href in p.links:
            u = urlparse(href)
            if u.scheme in ("http", "https", "mailto") or href.startswith("#") and not href[1:]:
                continue
            if not u.path:  # a link inside the page
                if u.fragment and u.fragment not in p.ids:
                    broken.append(f"{page.relative_to(site)}: anchor {href}")
                continue
            # an absolute path is the site's root (the 404 page links so, as it is served from any folder)
            base = site if u.path.startswith("/") else page.parent
            target = (base / unquote(u.path).lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: link {href}")
            elif u.fragment and target.suffix == ".html" and target in parsed and u.fragment not in parsed[target].ids:
                broken.append(f"{page.relative_to(site)}: anchor {href}")
    assert not broken, "\n".join(broken[:40])


# ------------------------------------------------------------------------------------ commands quoted in the docs
_SYNOPSIS = re.compile(r"\[|\||\.\.|<|\b(NAME|EXPERIMENT|STORE)\b")  # a usage line, not a command to run


def _quoted_commands() -> list[tuple[str, str]]:
    """(where, command) for every `bayesattn ...` command the docs, the README and the figure gallery quote: inline
    code spans (which may wrap over lines) and lines of fenced blocks (with backslash continuations)."""
    out = []
    for path in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        out += [(where, " ".join(m.split())) for m in re.findall(r"(?<!`)`(bayesattn [^`]+)`(?!`)", text)]
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0].strip().removeprefix("$ ")
                if line.startswith("bayesattn "):
                    out.append((where, " ".join(line.split())))
    for name, command in _reference().FIGURE_COMMANDS.items():
        if command.startswith("bayesattn "):
            out.append((f"figure {name}", re.sub(r"\s*\([^()]*\)$", "", command)))
    return [(w, c) for w, c in out if not _SYNOPSIS.search(re.sub(r"'[^']*'|\"[^\"]*\"", "", c))]


def test_the_docs_quote_commands():
    assert len(_quoted_commands()) >= 60


@pytest.mark.parametrize(("where", "command"), _quoted_commands())
def test_every_quoted_command_parses_and_its_config_loads(where, command, tmp_path, monkeypatch):
    """Every command the docs quote is one the command line takes today: its options parse, and a run's config,
    with every --set, loads and passes the experiment's checks (the run itself is stopped before any work)."""
    import shlex
    from contextlib import nullcontext

    from bayesattn import runtime, scaleout, sweep
    from bayesattn.cli import main

    argv = shlex.split(command)[1:]
    if len(argv) == 1:  # the name of a subcommand, as the prose mentions it
        assert argv[0] in _subcommands(), f"{where}: `{command}`: no such subcommand"
        return
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: `{command}` does not parse")
    if not hasattr(args, "experiment"):
        return  # list, figures, check, archive, sample, train, screen: parsing is their whole check here
    reached = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runtime, "prepare_output_dir", lambda out, name: tmp_path)
    monkeypatch.setattr(scaleout, "sweep_executor", lambda *a, **k: nullcontext())
    monkeypatch.setattr(scaleout, "check_scheduler", lambda *a, **k: None)  # the docs' HOST answers nowhere
    monkeypatch.setattr(sweep, "run_experiment", lambda experiment, config, *a, **k: reached.append(config) or {})
    monkeypatch.setattr(sweep, "check_reuse", lambda reuse: [])  # folders of the repository, not of tmp_path
    assert main([*argv, "--no-compile-cache", "--no-figures"]) == 0, f"{where}: `{command}`"
    assert len(reached) == 1
