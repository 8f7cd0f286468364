"""The staircase's config: the Bayesian staircase over P (H heads on lags 1..H), the paper's training runs on the
high-order Markov chain, the H-head theory and the simplified ODE. No JAX here."""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from ..config import (
    MAX_SEEDS,
    Attention,
    ExperimentConfig,
    Increasing,
    NonEmpty,
    NonEmptyDistinct,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PositiveInts,
    Probability,
    Section,
    Seed,
    SeedCount,
    SeqLength,
)
from ..sections import ChainsSection, PriorSection

PARTS = ("mcmc", "theory", "train", "ode")
Part = Literal["mcmc", "theory", "train", "ode"]


class BayesConfig(Section):
    """The Bayesian staircase: ``heads`` lists H; for each H the task has H lags 1..H with weights ``ratio``^k
    (k = 0 strongest, lag 1), orthogonal U_k (identity U_k would let one head carry every lag). ``ratio`` may be a
    list (a sweep of the weight ratio w_2/w_1: every ratio gets its own curves)."""

    T: SeqLength = 16
    d: PositiveInt = 8
    # the MCMC points are one per (ratio, attention, H, P, init): none of these lists may be empty or repeat a value
    heads: NonEmptyDistinct[PositiveInt] = [2, 3]  # H <= T - 1: the task's lags are 1..H
    ratio: float | list[float] = 0.6
    attention: NonEmpty[Attention] = ["softmax", "linear"]
    inits: NonEmpty[Literal["cold", "hot"]] = ["cold", "hot"]
    # increasing: the theory part takes it as its P grid (theory.heads_curve: common.check_grid)
    P: Annotated[PositiveInts, Increasing] = [200, 315, 497, 784, 1237, 1951, 3076, 4851, 7650, 12063, 19024, 30000]
    prior: PriorSection = PriorSection()
    mcmc: ChainsSection = ChainsSection(num_chains=4, num_warmup=500, num_samples=1000)
    # data sets of the MCMC points, from the config's seed up (seed, seed + 1, ...): the first is a one-seed run's,
    # and from 2 the summary adds each transition P_k and each P_2/P_1 over them
    seeds: SeedCount = 1

    @model_validator(mode="after")
    def _ratios(self):
        if not self.ratios or not all(0 < r <= 1 for r in self.ratios):
            raise ValueError(
                f"ratio={self.ratio!r}: the weight ratio w_2/w_1 must be a number in (0, 1], or a "
                "non-empty list of them"
            )
        if len(set(self.ratios)) != len(self.ratios):
            raise ValueError(f"ratio={self.ratio!r}: expected distinct ratios (a repeated one makes the same points)")
        check_heads("heads", self.heads, self.T)
        return self

    @property
    def ratios(self) -> list[float]:
        return list(self.ratio) if isinstance(self.ratio, list) else [self.ratio]

    def task(self, H: int, ratio: float | None = None):
        from ...tasks import MultiLagCopyTask

        r = self.ratios[0] if ratio is None else ratio
        return MultiLagCopyTask(
            T=self.T,
            d=self.d,
            spans=tuple((k + 1,) for k in range(H)),
            weights=tuple(r**k for k in range(H)),
            rotations="orthogonal",
        )


def check_heads(name: str, heads: list[int], T: int) -> None:
    """H heads on the lags 1..H of a task of length T (:meth:`BayesConfig.task`): every lag in 1..T-1."""
    if any(H > T - 1 for H in heads):
        raise ValueError(f"{name}={heads}: expected at most T - 1 = {T - 1} heads (one lag each, lags 1..H < T={T})")


class TrainingConfig(Section):
    """One run on the Markov chain (the paper's minimal model and sizes by default).

    model: "minimal" (the paper's ``full_disection``: :func:`.models.minimal_logits`, parameters of
    :class:`~bayesattn.models.MultiHeadConfig`) or "transformer" (the paper's full one-layer transformer:
    :class:`~bayesattn.models.transformer.TransformerConfig` with hidden ``width``, ``heads`` heads, a ReLU MLP of
    ``mlp`` with biases, post-LayerNorm, learned positions, Xavier / orthogonal init; no dropout, theirs is 0.1).
    optimizer: "adamw" (lr, weight_decay) or "sgd" (lr, ``momentum``; torch's heavy ball). Both clip the
    gradient's global norm at ``clip``.

    scale: the teacher's logits are scale m^k U_k x (:class:`~bayesattn.tasks.HighOrderMarkovTask`); 10, the
    default, is the temperature 0.1 of the paper's runs (its code's first release samples softmax(logits / 0.1); a
    later refactor of that code left its linear teacher at scale 1, which the runs before this field used).
    teacher: "per_seed" (default): every seed draws its own teacher (the chain's U_k from the run's seed);
    "fixed": one teacher for all seeds, from ``teacher_seed`` (the runs made before this field existed).
    data: "finite" (default): ``train`` sequences drawn once, minibatches of ``batch_size`` of them without
    replacement at every step; "online": ``batch_size`` fresh sequences at every step (``train`` is then unused).
    """

    # added after runs were made, with the value those runs had (their points keep their names)
    LEGACY_DEFAULTS: ClassVar[dict] = {
        "teacher": "fixed",
        "data": "finite",
        "scale": 1.0,
        "query_init": 1.0,
        "value_init": 1.0,
    }

    vocab: PositiveInt = 50
    span_lengths: PositiveInts = [2, 2, 2]
    m: PositiveFloat = 1.7
    scale: PositiveFloat = 10.0
    generated: PositiveInt = 20
    heads: PositiveInt = 3
    model: Literal["minimal", "transformer"] = "minimal"
    width: PositiveInt = 255  # transformer only
    mlp: PositiveInt = 64  # transformer only
    train: PositiveInt = 9000
    val: PositiveInt = 3000
    batch_size: PositiveInt = 3000
    steps: PositiveInt = 2000
    optimizer: Literal["adamw", "sgd"] = "adamw"
    lr: PositiveFloat = 0.08
    weight_decay: NonNegativeFloat = 0.01  # adamw only
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.0  # sgd only
    clip: PositiveFloat = 1.0
    plateau: bool = False
    patience: NonNegativeInt = 10  # torch's meaning (reduce after patience + 1 bad steps)
    factor: Probability = 0.5
    record_every: PositiveInt = 10
    probe: PositiveInt = 500
    dtype: Literal["float32", "float64"] = "float32"  # the forward pass; parameters and optimiser state: float64
    teacher: Literal["per_seed", "fixed"] = "per_seed"
    teacher_seed: Seed = 0  # teacher = "fixed" only
    data: Literal["finite", "online"] = "finite"
    # the minimal model's initial W_Q and W_V, as multiples of their Xavier-uniform draw (1: the paper's default;
    # its infinite-data config starts W_Q at 1e-9 and W_V at 0)
    query_init: PositiveFloat = 1.0
    value_init: NonNegativeFloat = 1.0

    @model_validator(mode="after")
    def _consistent(self):
        if self.data == "finite" and self.batch_size > self.train:
            raise ValueError(f"batch_size={self.batch_size}: expected an integer <= train={self.train}")
        if self.probe > self.val:
            raise ValueError(f"probe={self.probe}: expected an integer <= val={self.val}")
        if self.momentum and self.optimizer != "sgd":
            raise ValueError(
                f"momentum={self.momentum!r} with optimizer={self.optimizer!r}: expected 0 (momentum "
                "is sgd's; adamw has its own moments)"
            )
        if self.model == "transformer" and self.width % self.heads:
            raise ValueError(f"width={self.width}: must be a multiple of heads={self.heads}")
        return self

    def teacher_of(self, seed: int | None) -> int:
        """The teacher's seed of the run ``seed``: the run's own seed ("per_seed"; None: 0) or ``teacher_seed``."""
        return (0 if seed is None else int(seed)) if self.teacher == "per_seed" else self.teacher_seed

    def task(self, seed: int | None = None):
        """The chain of the run ``seed`` (its teacher: :meth:`teacher_of`); shapes do not depend on the seed."""
        from ...tasks import HighOrderMarkovTask

        b = sum(self.span_lengths)
        return HighOrderMarkovTask(
            T=b + self.generated - 1,
            d=self.vocab,
            span_lengths=tuple(self.span_lengths),
            m=self.m,
            scale=self.scale,
            seed=self.teacher_of(seed),
        )

    def network(self):
        from ...models.networks import MultiHeadConfig
        from ...models.transformer import TransformerConfig

        task = self.task()
        if self.model == "transformer":
            return TransformerConfig(
                T=task.T,
                width=self.width,
                layers=1,
                heads=self.heads,
                mlp=self.mlp,
                norm="layernorm",
                norm_position="post",
                positions="learned",
                vocab=task.d,
                d_out=task.d,
                activation="relu",
                mlp_bias=True,
                init="xavier",
            )
        return MultiHeadConfig(
            T=task.T,
            d_in=task.d,
            heads=self.heads,
            positions="onehot",
            decoder="identity",
            mask="causal",
            init="xavier",
            init_scale=self.query_init,
            value_init_scale=self.value_init,
            score_scale=1.0 / math.sqrt(task.d + task.T),
        )

    def optimizer_transform(self):
        """clip -> AdamW (decoupled weight decay) or SGD (heavy-ball momentum) -> optional plateau decay (an
        ``optax.GradientTransformation``)."""
        from ...training.core import OptimizerConfig

        kind = {"momentum": self.momentum or None} if self.optimizer == "sgd" else {"weight_decay": self.weight_decay}
        if self.plateau:
            kind.update(decay="plateau", plateau_factor=self.factor, plateau_patience=self.patience + 1)
        return OptimizerConfig(self.optimizer, self.lr, clip=self.clip, **kind).build(self.steps)

    def config(self) -> dict:
        """The point's dict of this run (:meth:`Section.point_dict`: the fields added later left out at their old
        value)."""
        return self.point_dict()


class ODESection(Section):
    """The simplified ODE (:class:`bayesattn.dynamics.ode.ODEConfig`, whose defaults are the paper's)."""

    heads: PositiveInt = 3
    N: PositiveInt = 40
    R: PositiveInt = 50
    m: PositiveFloat = 2.5
    groups: PositiveInt = 3
    eps: PositiveFloat = 1e-3
    t_final: PositiveFloat = 1e5
    num_times: PositiveInt = 400
    squared: bool = True
    rtol: PositiveFloat = 1e-8
    atol: PositiveFloat = 1e-10
    seed: Seed = 4

    @model_validator(mode="after")
    def _groups(self):
        if self.groups > min(self.N, self.R):
            raise ValueError(f"groups={self.groups}: expected at most min(N, R) = {min(self.N, self.R)}")
        return self


class HeadsTheory(Section):
    """The H-head theory (``ba.theory.heads_curve``) on the MCMC grid, for each attention of ``bayes.attention``:
    its lag order parameter is the MCMC points' (softmax: the best head's mass; linear: the lag's share in the
    heads' span, which any rotation of the heads leaves unchanged). ``seeds``: the theory's Monte Carlo seeds
    (softmax: the importance sampler's; both: the fluctuations around each well); from two, the comparison with
    the MCMC points over their data sets counts the theory's own Monte Carlo spread."""

    heads: NonEmptyDistinct[PositiveInt] = [2]  # one point per (attention, ratio, H, seed); H <= bayes.T - 1
    num_samples: Annotated[int, Field(ge=1000)] = 100_000
    # importance-sampling seeds seed .. seed + n - 1: from two, the comparison with the MCMC points over their data
    # sets counts the theory's own Monte Carlo spread (the first seed's point is a one-seed run's)
    seeds: SeedCount = 1


class StaircaseConfig(ExperimentConfig):
    """``train``: the main training run; ``train_variants``: more runs, {name: {fields of ``train`` to change, and
    "seeds": int (default 1)}}; ``train_only``: the names of the runs to compute ("main" and variants; None: all)."""

    name: str = "staircase"
    parts: NonEmpty[Part] = list(PARTS)
    seed: Seed = 0
    bayes: BayesConfig = BayesConfig()
    train: TrainingConfig = TrainingConfig()
    train_seeds: SeedCount = 2
    train_variants: dict[str, dict] = {}
    train_only: list[str] | None = None
    ode: ODESection = ODESection()
    theory: HeadsTheory = HeadsTheory()

    @model_validator(mode="after")
    def _runs(self):
        check_heads("theory.heads", self.theory.heads, self.bayes.T)
        for name in self.train_variants:
            self.variant(name)
        for name in self.train_only or []:
            if name != "main" and name not in self.train_variants:
                raise ValueError(
                    f"train_only item {name!r}: expected 'main' or one of the train_variants "
                    f"({', '.join(self.train_variants) or 'none'})"
                )
        return self

    def variant(self, name: str) -> tuple[TrainingConfig, int]:
        """(the training config, the number of seeds) of the variant ``name``."""
        v = dict(self.train_variants[name])
        seeds = v.pop("seeds", 1)
        if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
            raise ValueError(f"train_variants.{name}.seeds={seeds!r}: expected an integer in [1, {MAX_SEEDS}]")
        try:
            return self.train.replace(**v), seeds
        except ValueError as e:
            raise ValueError(f"train_variants.{name}: {e}") from None
