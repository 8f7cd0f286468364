"""The docs site's generated reference pages (run by mkdocs-gen-files at every build; tests/test_docs.py imports it):

- reference/cli.md: every subcommand and option, from the argparse parser itself (``bayesattn.cli.build_parser``);
- reference/config.md: every field of every experiment's config, with its type, default and allowed values, from
  the pydantic config classes themselves;
- reference/api.md: every public name of ``bayesattn`` and ``bayesattn.theory``, rendered by mkdocstrings;
- changelog.md: the repository's CHANGELOG.md as it stands;
- gallery.md: every figure of docs/figures with its caption (from the page that shows it) and its command.

Nothing here is written by hand, so the pages cannot drift from the code.
"""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is docs/gen/reference.py)


# ------------------------------------------------------------------------------------------ command line
def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | what it does | default | choices |", "|---|---|---|---|"]
    for a in parser._actions:  # noqa: SLF001 -- argparse offers no public walk of its actions
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):  # noqa: SLF001
            continue
        name = ", ".join(a.option_strings) or a.dest
        if a.metavar and a.option_strings:
            name += f" {a.metavar}"
        default = "" if a.default in (None, False, [], argparse.SUPPRESS) else f"`{a.default}`"
        choices = ", ".join(f"`{c}`" for c in a.choices) if a.choices else ""
        rows.append(f"| `{name}` | {(a.help or '').replace('|', '/')} | {default} | {choices} |")
    return rows


def cli_markdown() -> str:
    from bayesattn.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    out = [
        "# Command line",
        "",
        "Generated from the parser of `bayesattn` (`bayesattn.cli.build_parser`).",
        "",
        "```",
        parser.format_usage().strip(),
        "```",
        "",
        parser.description or "",
        "",
    ]
    import bayesattn.cli as cli

    out += ["Exit status and interrupts:", "", "```", cli.__doc__.strip().split("\n\n")[-1], "```", ""]
    helps = {c.dest: c.help for c in sub._choices_actions}  # noqa: SLF001
    for name, p in sub.choices.items():
        out += [
            f"## `bayesattn {name}`",
            "",
            helps.get(name, ""),
            "",
            p.description or "",
            "",
            "```",
            p.format_usage().strip(),
            "```",
            "",
            *_options(p),
            "",
        ]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ configuration
def _type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (list, tuple):
        args = typing.get_args(annotation)
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        k, v = typing.get_args(annotation)
        return f"table of {_type_name(k)} -> {_type_name(v)}"
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "none"
    return getattr(annotation, "__name__", str(annotation))


def _allowed(field) -> str:
    parts = []
    for m in field.metadata:
        for attr, sym in (
            ("ge", ">="),
            ("gt", ">"),
            ("le", "<="),
            ("lt", "<"),
            ("min_length", "length >="),
            ("max_length", "length <="),
        ):
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{sym} {v}")
    ann = field.annotation
    for arg in [ann, *typing.get_args(ann)]:
        for m in getattr(arg, "__metadata__", ()):
            for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                v = getattr(m, attr, None)
                if v is not None:
                    parts.append(f"{sym} {v}")
    return ", ".join(dict.fromkeys(parts))


def _section(model: type[BaseModel], prefix: str, out: list[str], seen: set) -> None:
    doc = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    title = prefix or "top level"
    out += [f"#### `{title}`", "", doc, "", "| field | type | default | allowed |", "|---|---|---|---|"]
    nested = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        sub = _nested_model(ann)
        default = field.default
        if isinstance(default, BaseModel):
            shown = "(section)"
        else:
            shown = f"`{default!r}`" if field.default is not None or not field.is_required() else "required"
        out.append(f"| `{prefix + '.' if prefix else ''}{name}` | {_type_name(ann)} | {shown} | {_allowed(field)} |")
        if sub is not None:
            nested.append((sub, f"{prefix + '.' if prefix else ''}{name}{_key_level(ann)}"))
    out.append("")
    for sub, path in nested:
        _section(sub, path, out, seen)


def _key_level(annotation) -> str:
    """For a dict of sections (such as ``mcmc.by_attention``), the key level a ``--set`` path needs:
    ``.<softmax or linear>`` from a Literal key type, else ``.<key>``; for a list of sections (plateau's
    ``cases``), ``.<index>``; empty for anything else."""
    for a in [annotation, *typing.get_args(annotation)]:
        if typing.get_origin(a) is list:
            return ".<index>"
        if typing.get_origin(a) is dict:
            key = typing.get_args(a)[0]
            names = typing.get_args(key) if typing.get_origin(key) is typing.Literal else ()
            return f".<{' or '.join(map(str, names))}>" if names else ".<key>"
    return ""


def _nested_model(annotation):
    for a in [annotation, *typing.get_args(annotation)]:
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
        for b in typing.get_args(a):
            if isinstance(b, type) and issubclass(b, BaseModel):
                return b
    return None


def config_markdown() -> str:
    from bayesattn.experiments import EXPERIMENTS

    out = [
        "# Configuration",
        "",
        "Generated from the config classes themselves. Every experiment reads a TOML file (a named config: "
        "`bayesattn list`, or a path); any field can be set from the command line with `--set section.key=value` "
        "(the value is a TOML literal, or a bare word; a list also takes `a,b,c`; an entry of a list of sections is "
        "named by its index from 0, as in `--set cases.0.T=16`). Unknown keys are refused at "
        'every level, types are strict (an integer field takes an integer, not `4.0` or `"4"`), and every '
        "refusal is one line naming the field, the value and what is allowed, before any work starts.",
        "",
    ]
    for name, cls in EXPERIMENTS.items():
        out += [
            f"## `{name}`",
            "",
            cls.description + ".",
            "",
            "Named configs: " + ", ".join(f"`{c}`" for c in sorted(cls.configs())) + ".",
            "",
        ]
        _section(cls.Config, "", out, set())
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ Python API
def public_names() -> dict[str, list[str]]:
    """{heading: [dotted path to render]} of every public name of bayesattn and bayesattn.theory."""
    import bayesattn
    from bayesattn.bayes import theory

    where = bayesattn._WHERE  # noqa: SLF001 -- the package's own table of public names
    groups: dict[str, list[str]] = {}
    titles = {
        "tasks": "Tasks and data",
        "models": "Attention and models",
        "diagnostics": "Diagnostics",
        "bayes": "Posterior, sampling and modes",
        "training": "Training",
    }
    for name, sub in where.items():
        if name == "theory":
            continue
        groups.setdefault(titles[sub], []).append(f"bayesattn.{sub}.{name}")
    groups["Theory (`bayesattn.theory`)"] = [f"bayesattn.bayes.theory.{n}" for n in theory.__all__]
    return groups


def api_markdown() -> str:
    out = [
        "# Python API",
        "",
        "Every public name of `bayesattn` (`import bayesattn as ba`) and of `bayesattn.theory` (`ba.theory`), "
        "from its docstring. The names are imported on first use, so `import bayesattn` stays fast.",
        "",
    ]
    for title, paths in public_names().items():
        out += [f"## {title}", ""]
        for path in paths:
            out += [f"::: {path}", ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ gallery
# the command that draws each figure in docs/figures (the copies shown on the results pages); a figure missing
# here is listed with "command not recorded", and tests/test_docs.py fails on it
PD = "bayesattn run phase-diagram --config"
FIGURE_COMMANDS = {
    "fig1_order_parameter_vs_P.png": "bayesattn phase-diagram",
    "fig2_free_energy_landscapes.png": "bayesattn phase-diagram",
    "fig3_phase_diagram_P_sigma_A2.png": f"{PD} sigma_A2_plane",
    "fig3_phase_diagram_P_T.png": f"{PD} T_plane",
    "fig4_posterior_mean_attention.png": "bayesattn phase-diagram",
    "fig5_posterior_histograms.png": f"{PD} coexistence",
    "fig6_training_curves.png": f"{PD} training_dynamics",
    "fig7_finite_size_scaling.png": f"{PD} finite_size",
    "fig8_test_error_vs_P.png": "bayesattn phase-diagram",
    "fig8_onehot_test_error_vs_P.png": "bayesattn phase-diagram --tokens onehot --T 32 --P 2700:15000:12 "
    "--set attention=[softmax] --methods theory,mcmc --seeds 8 --set theory.num_P=100 --set theory.vary_name=",
    "fig9_seeds.png": "bayesattn phase-diagram --seeds 16",
    "fig9_onehot_linear_seeds.png": "bayesattn phase-diagram --tokens onehot --T 16 --P 1000:30000:12 "
    "--set attention=[linear] --methods theory,mcmc --seeds 8 --set theory.num_P=100 --set theory.vary_name=",
    "onehot_linear_vs_nuts.png": "python scripts/onehot_linear_check.py",
    "theory_vs_mcmc_causal.png": "python scripts/theory_vs_mcmc.py (causal boundary; docs/theory.md)",
    "theory_vs_mcmc_causal_onehot.png": "python scripts/theory_vs_mcmc.py (causal boundary, one-hot tokens)",
    "theory_vs_mcmc_onehot.png": "python scripts/theory_vs_mcmc.py (one-hot tokens)",
    "three_transitions.png": "bayesattn three-transitions",
    "three_transitions_seeds.png": "bayesattn three-transitions --set seeds=16",
    "staircase_bayes.png": "bayesattn staircase",
    "staircase_training.png": "bayesattn staircase",
    "staircase_full_training.png": "bayesattn staircase --config staircase_full --parts train --set train_only=main",
    "staircase_sgd_full.png": "bayesattn staircase --config staircase_full --parts train "
    "--set 'train_only=[\"sgd_transformer\"]' --set train_variants.sgd_transformer.seeds=4",
    "staircase_T64.png": "bayesattn staircase --config staircase_T64",
    "staircase_ratio.png": "bayesattn staircase --config staircase_ratio --set bayes.seeds=8",
    "staircase_theory_seeds.png": "bayesattn staircase --config staircase_theory",
    "staircase_datasize.png": "bayesattn staircase --config staircase_datasize_cpu",
    "sparse_emergence.png": "bayesattn sparse",
    "sparse_heatmap.png": "bayesattn sparse",
    "sparse_anchor.png": "bayesattn sparse --config sparse_anchor",
    "sparse_anchor_gpu.png": "bayesattn sparse --config sparse_anchor --set 'grid=[[16,4],[32,3]]' "
    "--set seeds_per_program=8 (a GPU)",
    "sparse_heads.png": "bayesattn sparse",
    "sparse_mixer.png": "bayesattn sparse",
    "sparse_mixer_cpu.png": "bayesattn sparse --config sparse_mixer_cpu",
    "sparse_mixer_full.png": "bayesattn sparse --config sparse_mixer_vs_transformer --set 'mixer_s=[3,4]' "
    "--set 'mixer_lr.transformer=[3e-4]' --set 'mixer_lr.mixer=[3e-4]' (a GPU)",
    "sparse_bayes_summed.png": "bayesattn sparse",
    "sparse_bayes_normalized.png": "bayesattn sparse --config sparse_bayes_normalized",
    "dynlab_ch_spikes.png": "bayesattn dynlab --config clustering_head",
    "dynlab_ch_clustering_heads.png": "bayesattn dynlab --config clustering_head",
    "dynlab_ch_sandbox_frames.png": "bayesattn dynlab --config clustering_head",
    "dynlab_ch_sandbox.gif": "bayesattn dynlab --config clustering_head",
    "dynlab_ch_finetune_spikes.png": "bayesattn dynlab --config clustering_finetune",
    "dynlab_ch_finetune_spike_windows.png": "bayesattn dynlab --config clustering_finetune",
    "dynlab_fd_cycles.png": "bayesattn dynlab --config focus_dilution",
    "dynlab_fd_cycle_counts.png": "bayesattn dynlab --config focus_dilution",
    "dynlab_fd_cycle_threshold.png": "bayesattn dynlab --config focus_dilution",
    "dynlab_fd_stage_timelines.png": "bayesattn dynlab --config focus_dilution",
    "dynlab_fd_pca_paths.png": "bayesattn dynlab --config focus_dilution",
    "dynlab_fd_equilibrium.png": "bayesattn dynlab --config focus_dilution",
    "dynlab_fd_pi_vocab.png": "bayesattn dynlab --config focus_dilution_pi",
    "dynlab_fd_full_pi_vocab.png": "bayesattn dynlab --config focus_dilution_full",
    "dynlab_fd_langevin.png": "bayesattn dynlab --config focus_dilution_pi",
    "screens_smollm2.png": "bayesattn screens --config smollm2",
    "screens_trajectory.png": "bayesattn screens --config screens",
    "screens_trajectory_seeds.png": "bayesattn screens --config screens --set seeds=16",
    "screens_bayes.png": "bayesattn screens --config screens_bayes",
    "plateau.png": "bayesattn plateau",
    "plateau_flow.png": "bayesattn plateau --config plateau_flow",
    "plateau_full.png": "bayesattn plateau --config plateau_full",
}


def shown_figures() -> dict[str, tuple[str, str]]:
    """{figure file name: (caption, page)}: each figure of docs/figures with the alt text and page (relative to
    docs/) of the first results or theory page that shows it."""
    import re

    docs = ROOT / "docs"
    pages = sorted(docs.glob("results/*.md")) + sorted(docs.glob("*.md"))
    out: dict[str, tuple[str, str]] = {}
    for page in pages:
        for alt, name in re.findall(r"!\[([^\]]*)\]\((?:\.\./)?figures/([^)\s]+)\)", page.read_text()):
            out.setdefault(name, (alt, page.relative_to(docs).as_posix()))
    return out


def gallery_markdown() -> str:
    shown = shown_figures()
    out = [
        "# Figure gallery",
        "",
        "Every figure in the documentation, with its caption and the command that draws it. Each command writes "
        "its figures under `results/<config>/figures/`, drawn from the saved point files only "
        "(`bayesattn figures DIR` redraws them). The copies here were drawn by the runs described on each page.",
        "",
    ]
    for f in sorted((ROOT / "docs" / "figures").iterdir()):
        if f.suffix not in (".png", ".gif"):
            continue
        caption, page = shown.get(f.name, (f.stem.replace("_", " "), None))
        caption = caption[:1].upper() + caption[1:]
        where = f" Shown on [{page}]({page})." if page else ""
        command = FIGURE_COMMANDS.get(f.name, "command not recorded")
        out += [f"## {f.stem}", "", f"![{caption}](figures/{f.name})", "", f"{caption}.{where}", "", f"`{command}`", ""]
    return "\n".join(out)


def changelog_markdown() -> str:
    """The repository's CHANGELOG.md, as the site's changelog page (one text, kept at the top of the repository)."""
    return (ROOT / "CHANGELOG.md").read_text()


PAGES = {
    "reference/cli.md": cli_markdown,
    "reference/config.md": config_markdown,
    "reference/api.md": api_markdown,
    "changelog.md": changelog_markdown,
    "gallery.md": gallery_markdown,
}

if __name__ == "<run_path>":  # mkdocs-gen-files runs this file with runpy.run_path at every build
    import mkdocs_gen_files

    for page, render in PAGES.items():
        with mkdocs_gen_files.open(page, "w") as f:
            f.write(render())
