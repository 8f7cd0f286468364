"""Three transitions: the transition P of the joint mode (Adam on the network), of the marginal mode (Adam with
the readout integrated out) and of the posterior (theory and NUTS), across T, for softmax and linear attention;
and SGLD at temperature tau (docs/results/three_transitions.md).

A run writes one point file per (kind, attention, T[, objective, init]) under ``points/<kind>/``, ``summary.json``
(the table of transitions) and ``figures/three_transitions.{png,pdf}``.
"""

from __future__ import annotations

from ..contract import Experiment
from .config import ThreeTransitionsConfig

__all__ = ["ThreeTransitions", "ThreeTransitionsConfig", "point_config"]

# what a point of each kind depends on, besides its own fields (so that changing the SGLD or MCMC settings does
# not invalidate the theory and Adam points, and the other way round); workers change the speed only
DEPENDS_ON = {
    "theory": ("d", "prior", "theory_P_max"),
    "adam": ("d", "prior", "seed", "theory_P_max", "adam"),
    "mcmc": ("d", "prior", "seed", "theory_P_max", "mcmc"),
    "tau_theory": ("d", "prior", "tau"),
    "sgld": ("d", "prior", "seed", "adam", "tau"),
}


# the version of Adam's transition search (compute.adam_transition), in every Adam point: a point computed by
# another version is not reused. 2: round 2 counts round 1's bracket ends (version 1 gave no P when round 2's runs
# all lay on one side of the jump)
ADAM_SEARCH = 2


def point_config(cfg: ThreeTransitionsConfig, kind: str) -> dict:
    """The config fields a point of this kind depends on (its file name hashes them)."""
    c = cfg.to_dict()
    return {k: c[k] for k in DEPENDS_ON[kind]}


class ThreeTransitions(Experiment):
    name = "three-transitions"
    description = "the transitions of the joint mode, the marginal mode and the posterior across T, and SGLD at tau"
    Config = ThreeTransitionsConfig
    default_config = "three_transitions"

    def points(self, config: ThreeTransitionsConfig) -> dict[str, list[dict]]:
        from ...models.attention import attention_kind

        pts = []
        for a in config.attentions:
            for T in config.T_values:
                pts.append({"kind": "theory", "attention": a, "T": T})
                pts.append({"kind": "mcmc", "attention": a, "T": T})
                for obj in ("joint", "marginal"):
                    for init in ("small", "hot") if attention_kind(a).normalised else ("small",):
                        adam = {"kind": "adam", "attention": a, "T": T, "objective": obj, "init": init}
                        pts.append({**adam, "search": ADAM_SEARCH})
        if "softmax" in config.attentions:
            pts.append({"kind": "tau_theory"})
            for tau in config.tau.sgld:
                for init in ("small", "hot"):
                    pts.append({"kind": "sgld", "tau": tau, "init": init})
        # one part per kind, the quick ones first; in each, the largest T first, so that parallel workers finish
        # together
        pts.sort(key=lambda p: -p.get("T", 32))
        # the seeded kinds once per seed: the first seed's points are those of a one-seed run, so adding seeds
        # keeps them
        configs = [config.model_copy(update={"seed": config.seed + i}) for i in range(config.seeds)]
        return {
            kind: [
                {**p, "config": point_config(c, kind)}
                for c in (configs if "seed" in DEPENDS_ON[kind] else configs[:1])
                for p in pts
                if p["kind"] == kind
            ]
            for kind in ("theory", "tau_theory", "adam", "sgld", "mcmc")
        }

    def compute(self, point: dict) -> dict:
        from .compute import compute_point

        return compute_point(point)

    def summarize(self, config, records):
        from .summary import summarize

        recs = [r for part in records.values() for r in part]
        return {**summarize(recs, config.seed), "cpu_s_of_points": sum(r["result"].get("cpu_s", 0.0) for r in recs)}

    def describe(self, summary: dict) -> list[str]:
        lines = []
        for row in summary["table"]:
            post = row.get("theory_posterior", {}).get("P_c")
            mc = row.get("mcmc", {}).get("P")
            lines.append(
                f"{row['attention']} T={row['T']}: posterior P_c {_p(post)} (theory), {_p(mc)} (NUTS); "
                + ", ".join(f"{k.removeprefix('adam_')} {_p(v['P'])}" for k, v in row.items() if k.startswith("adam_"))
            )
        if "seeds" in summary:
            from .summary import seeds_line

            lines.append(seeds_line(summary["seeds"]))
        return lines

    def figures(self, folder):
        from .figures import plot_seeds, plot_three_transitions

        return plot_three_transitions(folder) + plot_seeds(folder)


def _p(x) -> str:
    return "-" if x is None else f"{x:.0f}"
