"""Values a run could only fail on mid-run (or that would make it compute less than asked, or the same point twice)
are refused when the config loads, through the path ``--set`` takes (``apply_overrides``, then ``Config.load``),
with one line naming the field, the value and what is allowed; every shipped named config still loads."""

from __future__ import annotations

import pytest

from bayesattn.experiments import EXPERIMENTS, ConfigError
from bayesattn.experiments.config import apply_overrides, find_config, read_toml

SHIPPED = [(name, cfg) for name, exp in EXPERIMENTS.items() for cfg in sorted(exp.configs())]


def load(experiment: str, *items: str, config: str | None = None):
    """The experiment's named config (default: its default one) with ``items`` set, as the CLI loads it."""
    exp = EXPERIMENTS[experiment]
    data = read_toml(find_config(exp.package(), config or exp.default_config))
    return exp.Config.load(apply_overrides(exp.Config, data, items), source="test")


def refused(experiment: str, *items: str, config: str | None = None) -> str:
    with pytest.raises(ConfigError) as e:
        load(experiment, *items, config=config)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("test: "), msg
    return msg


@pytest.mark.parametrize("experiment, name", SHIPPED)
def test_every_shipped_config_loads(experiment, name):
    load(experiment, config=name)


# (experiment, named config or None, --set items, what the message must hold: the field and its value)
CASES = [
    # SMC starts from the prior: its cold and hot points would be two prior runs, labelled cold and hot
    ("phase-diagram", None, ["mcmc.method=smc"], "mcmc.inits=['cold', 'hot']: method='smc' draws its particles"),
    (
        "phase-diagram",
        None,
        ["mcmc.by_attention.linear.method=smc"],
        "mcmc.by_attention.linear.inits=['cold', 'hot']: method='smc'",
    ),
    # phase-diagram: the theory's (P, vary) plane and finite-size scaling (theory.common.check_grid, task.replace)
    ("phase-diagram", None, ["theory.vary_values=[-1]"], "theory.vary_values.0=-1: Input should be greater than 0"),
    ("phase-diagram", None, ["theory.vary_values=[nan]"], "theory.vary_values.0=nan: Input should be a finite"),
    ("phase-diagram", None, ["theory.vary_values=[inf]"], "theory.vary_values.0=inf: Input should be a finite"),
    ("phase-diagram", None, ["theory.vary_name=T", "theory.vary_values=[2.5]"], "theory.vary_values=[2.5]: with"),
    ("phase-diagram", None, ["theory.vary_name=T", "theory.vary_values=[1]"], "theory.vary_values=[1.0]: with"),
    ("phase-diagram", None, ["theory.vary_name=T", "theory.vary_values=[]"], "theory.vary_values=[]: expected"),
    ("phase-diagram", None, ["theory.vary_name=sigma_A2", "theory.vary_values=[]"], "theory.vary_values=[]"),
    ("phase-diagram", None, ["theory.vary_name=sigma_A2", "theory.vary_values=[0]"], "theory.vary_values.0=0:"),
    ("phase-diagram", None, ["theory.vary_values=[16, 8]"], "theory.vary_values=[16, 8]: expected strictly"),
    ("phase-diagram", None, ["theory.vary_values=[8, 8]"], "theory.vary_values=[8, 8]: expected strictly"),
    (
        "phase-diagram",
        None,
        ["task.offset=3", "theory.vary_name=T", "theory.vary_values=[3, 8]"],
        "theory.vary_values=[3.0, 8.0]: expected sequence lengths T > task.offset=3",
    ),
    ("phase-diagram", None, ["theory.T_values=[0]"], "theory.T_values.0=0: Input should be greater than or equal to 2"),
    ("phase-diagram", None, ["theory.T_values=[8, 8]"], "theory.T_values=[8, 8]: expected strictly increasing"),
    ("phase-diagram", None, ["theory.T_values=[16, 8]"], "theory.T_values=[16, 8]: expected strictly increasing"),
    (
        "phase-diagram",
        None,
        ["task.offset=3", "theory.T_values=[3, 8]"],
        "theory.T_values=[3, 8]: expected sequence lengths T > task.offset=3",
    ),
    # log-spaced neighbours that round to one integer gave fewer points than asked (P = 1:5:100 ran 5)
    ("phase-diagram", None, ["P.start=1", "P.stop=5", "P.num=100"], "P.start=1, stop=5, num=100: only 5 distinct"),
    # three-transitions
    ("three-transitions", None, ["T_values=[]"], "T_values=[]: List should have at least 1 item"),
    ("three-transitions", None, ["T_values=[1]"], "T_values.0=1: Input should be greater than or equal to 2"),
    ("three-transitions", None, ["T_values=[4, 4]"], "T_values=[4, 4]: expected distinct values (4 repeated)"),
    ("three-transitions", None, ["attentions=[]"], "attentions=[]: List should have at least 1 item"),
    ("three-transitions", None, ["mcmc.span=0.5"], "mcmc.span=0.5: Input should be greater than 1"),
    ("three-transitions", None, ["mcmc.span=1.0"], "mcmc.span=1.0: Input should be greater than 1"),
    ("three-transitions", None, ["mcmc.span=nan"], "mcmc.span=nan"),
    ("three-transitions", None, ["mcmc.grid=1"], "mcmc.grid=1: Input should be greater than or equal to 2"),
    ("three-transitions", None, ["tau.values=[]"], "tau.values=[]: List should have at least 1 item"),
    ("three-transitions", None, ["tau.values=[0.1, 0.1]"], "tau.values=[0.1, 0.1]: expected distinct values"),
    ("three-transitions", None, ["tau.sgld=[1.0, 1.0]"], "tau.sgld=[1.0, 1.0]: expected distinct values"),
    ("three-transitions", None, ["adam.grid_points=1"], "adam.grid_points=1: Input should be greater than or equal"),
    ("three-transitions", None, ["theory_P_max=10"], "theory_P_max=10: Input should be greater than 10"),
    ("three-transitions", None, ["tau.P_max=100"], "tau.P_max=100: Input should be greater than 100"),
    # staircase
    ("staircase", None, ["bayes.heads=[]"], "bayes.heads=[]: List should have at least 1 item"),
    ("staircase", None, ["theory.heads=[]"], "theory.heads=[]: List should have at least 1 item"),
    ("staircase", None, ["bayes.heads=[2, 2]"], "bayes.heads=[2, 2]: expected distinct values"),
    ("staircase", None, ["theory.heads=[2, 2]"], "theory.heads=[2, 2]: expected distinct values"),
    ("staircase", None, ["bayes.T=8", "bayes.heads=[8]"], "bayes.heads=[8]: expected at most T - 1 = 7 heads"),
    ("staircase", None, ["bayes.T=8", "theory.heads=[9]"], "theory.heads=[9]: expected at most T - 1 = 7 heads"),
    ("staircase", None, ["bayes.P=[200, 200]"], "bayes.P=[200, 200]: expected strictly increasing"),
    ("staircase", None, ["bayes.P=[400, 200]"], "bayes.P=[400, 200]: expected strictly increasing"),
    ("staircase", None, ["bayes.ratio=[0.5, 0.5]"], "bayes.ratio=[0.5, 0.5]: expected distinct ratios"),
    ("staircase", None, ["bayes.attention=[]"], "bayes.attention=[]: List should have at least 1 item"),
    ("staircase", None, ["bayes.inits=[]"], "bayes.inits=[]: List should have at least 1 item"),
    # sparse
    ("screens", None, ["bayes.P=[30, 30]"], "bayes.P=[30, 30]: expected distinct values (30 repeated)"),
    ("screens", None, ["model.models=[]"], "model.models=[]: List should have at least 1 item"),
    ("sparse", None, ["grid=[]"], "grid=[]: List should have at least 1 item"),
    ("sparse", None, ["heads=[]"], "heads=[]: List should have at least 1 item"),
    ("sparse", None, ["head_dims=[]"], "head_dims=[]: List should have at least 1 item"),
    ("sparse", None, ["mixer_s=[]"], "mixer_s=[]: List should have at least 1 item"),
    ("sparse", None, ["bayes.grid=[]"], "bayes.grid=[]: List should have at least 1 item"),
    ("sparse", None, ["bayes.inits=[]"], "bayes.inits=[]: List should have at least 1 item"),
    ("sparse", None, ["grid=[[8, 1], [8, 1]]"], "grid=[[8, 1], [8, 1]]: expected distinct values ([8, 1] repeated)"),
    ("sparse", None, ["bayes.grid=[[8, 2], [8, 2]]"], "bayes.grid=[[8, 2], [8, 2]]: expected distinct values"),
    ("sparse", None, ["heads=[2, 2]"], "heads=[2, 2]: expected distinct values (2 repeated)"),
    ("sparse", None, ["head_dims=[4, 4]"], "head_dims=[4, 4]: expected distinct values"),
    ("sparse", None, ["mixer_s=[3, 3]"], "mixer_s=[3, 3]: expected distinct values"),
    ("sparse", None, ["bayes.P=[25, 25]"], "bayes.P=[25, 25]: expected distinct values"),
    ("sparse", None, ["mixer_lr.mixer=[0.001, 0.001]"], "mixer_lr.mixer=[0.001, 0.001]: expected distinct values"),
    # dynlab: the equilibrium and Langevin counterparts
    ("dynlab", "focus_dilution", ["equilibrium.P=[16, 16]"], "equilibrium.P=[16, 16]: expected strictly increasing"),
    ("dynlab", "focus_dilution", ["equilibrium.P=[64, 16]"], "equilibrium.P=[64, 16]: expected strictly increasing"),
    ("dynlab", "focus_dilution", ["equilibrium.T=1"], "equilibrium.T=1: expected a sequence length >= 2"),
    ("dynlab", "focus_dilution", ["equilibrium.T=[]"], "equilibrium.T=[]: expected a sequence length >= 2"),
    ("dynlab", "focus_dilution", ["equilibrium.T=[8, 8]"], "equilibrium.T=[8, 8]: expected a sequence length"),
    ("dynlab", "focus_dilution", ["equilibrium.T=[1, 8]"], "equilibrium.T=[1, 8]: expected a sequence length"),
    ("dynlab", "focus_dilution_pi", ["langevin.T=1"], "langevin.T=1: Input should be greater than or equal to 2"),
    ("dynlab", "focus_dilution_pi", ["langevin.P=[1024, 1024]"], "langevin.P=[1024, 1024]: expected distinct"),
    # plateau: the summary names a case by (attention, T)
    (
        "plateau",
        None,
        ['cases=[{attention = "softmax", T = 8}, {attention = "softmax", T = 8, gd_lr = 0.1}]'],
        "cases[1]: attention='softmax', T=8 is also cases[0]'s; expected one case per (attention, T)",
    ),
]


@pytest.mark.parametrize("experiment, config, items, needle", CASES, ids=[" ".join(c[2]) for c in CASES])
def test_a_value_the_run_cannot_use_is_refused_when_the_config_loads(experiment, config, items, needle):
    msg = refused(experiment, *items, config=config)
    assert needle in msg, msg


@pytest.mark.parametrize(
    "experiment, config, items",
    [
        # no plane: its values are unused (the defaults stay as they are)
        ("phase-diagram", None, ["theory.vary_name=", "theory.vary_values=[]"]),
        ("phase-diagram", None, ["theory.vary_name=sigma_A2", "theory.vary_values=[0.25, 0.5, 2.5]"]),
        ("phase-diagram", None, ["theory.vary_name=T", "theory.vary_values=[2, 3, 8]", "theory.T_values=[2, 4]"]),
        ("phase-diagram", None, ["theory.T_values=[]"]),  # no finite-size scaling
        ("three-transitions", None, ["tau.sgld=[]"]),  # no SGLD runs: the tau panel shows the theory alone
        ("three-transitions", None, ["T_values=[2]", "adam.grid_points=2", "mcmc.grid=2", "mcmc.span=1.01"]),
        ("staircase", None, ["bayes.T=8", "bayes.heads=[7]", "theory.heads=[1, 7]"]),
        ("sparse", None, ["grid=[[8, 1], [1, 1]]", "bayes.P=[400, 25]"]),
        ("dynlab", "focus_dilution", ["equilibrium.T=[8, 16]"]),
    ],
)
def test_values_at_the_limits_are_accepted(experiment, config, items):
    load(experiment, *items, config=config)


def test_points_of_an_accepted_limit_config_build():
    """The smallest accepted three-transitions grid still builds its points (one per kind, attention, T)."""
    exp = EXPERIMENTS["three-transitions"]
    cfg = load("three-transitions", "T_values=[2]", "attentions=softmax", "tau.sgld=[]")
    parts = exp().points(cfg)
    assert [p["T"] for p in parts["theory"]] == [2] and parts["sgld"] == []
