"""The sparse-pattern experiment's config: the training runs (a one-layer transformer or a causal MLP-Mixer on the
sparse linear map or a cellular automaton, many seeds), the grids over (S, s), heads and head size, and the
Bayesian surrogate's posterior. No JAX here."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from ..config import (
    Distinct,
    ExperimentConfig,
    NonEmpty,
    NonEmptyDistinct,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PositiveInts,
    Section,
    Seed,
    SeedCount,
)
from ..sections import ChainsSection, PriorSection

Pair = Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # [S, s]
PARTS = ("grid", "heads", "head_dim", "mixer", "bayes", "theory")
Part = Literal["grid", "heads", "head_dim", "mixer", "bayes", "theory"]


class SparseTrainConfig(Section):
    """One training configuration. Defaults: the CPU default (docs/results/sparse.md section 2 says what is scaled);
    :meth:`full_size` gives the replication's settings (D = 128, MLP 512, H = 8, lr 3e-4, 200 warmup steps,
    wd 0.01, 10k steps, 8192 tokens per step)."""

    task: Literal["linear_map", "cellular_automaton"] = "linear_map"
    S: PositiveInt = 16
    s: PositiveInt = 3
    k: PositiveInt = 1  # cellular automaton: applications of the rule (k + 1 states of 16 cells)
    n_rules: PositiveInt = 256  # cellular automaton: the pool of rule tables one table per sequence is drawn from
    # "per_seed": every seed trains on its own map A (linear map) or pool of rule tables (automaton), drawn from
    # the seed's key (TASK_STREAM); "fixed": one A / pool for all seeds, drawn from task_seed
    A: Literal["per_seed", "fixed"] = "per_seed"
    task_seed: Seed = 0
    model: Literal["transformer", "mixer"] = "transformer"
    width: PositiveInt = 64
    layers: PositiveInt = 1  # blocks of attention (mixing) and MLP
    heads: PositiveInt = 8
    head_dim: PositiveInt | None = None
    mlp: NonNegativeInt = 256
    lr: PositiveFloat = 1e-3
    warmup: NonNegativeInt = 200
    weight_decay: NonNegativeFloat = 0.01
    steps: int = 3000
    tokens_per_step: PositiveInt = 2048
    record_every: PositiveInt = 50
    probe: PositiveInt = 256
    # early stop, per seed: a seed's run ends at the first record step >= its own t* + stop_after_solved (0: never);
    # its results are taken there, whatever the other seeds of its program do
    stop_after_solved: NonNegativeInt = 100
    dtype: Literal["float32", "float64"] = "float32"
    # the replication's initialisation: token embedding 0.02 N(0, 1) (as its learned positions), biases in the MLP
    # (zero at init). Runs before these fields existed had an embedding N(0, 1), 50x the positions, and no biases:
    # the attention's input was then nearly blind to position, and (8, 3) was unsolved at the CPU default
    embed_std: PositiveFloat = 0.02
    mlp_bias: bool = True
    # added after runs were made, with the value those runs had (their points keep their names)
    LEGACY_DEFAULTS: ClassVar[dict] = {"A": "fixed", "embed_std": 1.0, "mlp_bias": False, "n_rules": 256, "layers": 1}

    @model_validator(mode="after")
    def _consistent(self):
        if self.steps < 10:
            raise ValueError(f"steps={self.steps}: expected an integer >= 10")
        if self.task == "linear_map" and self.s > self.S:
            raise ValueError(f"s={self.s}: expected 1 <= s <= S={self.S} (ones per row of the S x S map)")
        if self.head_dim is None and self.model == "transformer" and self.width % self.heads:
            raise ValueError(f"heads={self.heads}: must divide width={self.width} (or give head_dim)")
        if self.batch < 1:
            raise ValueError(f"tokens_per_step={self.tokens_per_step}: less than one sequence of {self.T} tokens")
        return self

    @classmethod
    def full_size(cls, **changes) -> SparseTrainConfig:
        base = dict(
            width=128, heads=8, mlp=512, lr=3e-4, warmup=200, weight_decay=0.01, steps=10000, tokens_per_step=8192
        )
        return cls(**{**base, **changes})

    def make_task(self):
        """The task with the fixed map / pool (from ``task_seed``); the per-seed draws: ``training.seed_tasks``."""
        from ...tasks.sparse import CellularAutomatonTask, SparseLinearMapTask

        if self.task == "linear_map":
            return SparseLinearMapTask(S=self.S, s=self.s, seed=self.task_seed)
        return CellularAutomatonTask(k=self.k, n_rules=self.n_rules, seed=self.task_seed)

    @property
    def T(self) -> int:
        """The task's sequence length: 2 S (linear map) or 16 (k + 1) (cellular automaton, 16 cells)."""
        return 2 * self.S if self.task == "linear_map" else 16 * (self.k + 1)

    @property
    def batch(self) -> int:
        """Sequences per step: tokens_per_step / T."""
        return self.tokens_per_step // self.T

    def network_config(self):
        from ...models.transformer import MixerConfig, TransformerConfig

        task = self.make_task()
        if self.model == "transformer":
            return TransformerConfig(
                T=task.T,
                width=self.width,
                layers=self.layers,
                heads=self.heads,
                head_dim=self.head_dim,
                mlp=self.mlp or None,
                norm="layernorm",
                norm_position="pre",
                positions="learned",
                vocab=task.vocab,
                causal=True,
                mlp_bias=self.mlp_bias,
                embed_std=self.embed_std,
            )
        return MixerConfig(
            T=task.T,
            width=self.width,
            layers=self.layers,
            mlp=self.mlp or None,
            vocab=task.vocab,
            mlp_bias=self.mlp_bias,
            embed_std=self.embed_std,
        )

    def config(self) -> dict:
        """The point's dict of this config (:meth:`Section.point_dict`: ``A`` left out when "fixed", the only
        behaviour before the field existed)."""
        return self.point_dict()


class BayesSparseConfig(Section):
    """The surrogate's posterior: for every (S, s) in ``grid`` and every P, NUTS (cold start, L = 0, and hot start
    on the support) on :class:`~bayesattn.SparseRegressionTask` with random supports."""

    # one point per (S, s, P, init) and one theory curve per (S, s): none of these lists may be empty or repeat a value
    grid: NonEmptyDistinct[Pair] = [[8, 1], [8, 2], [8, 3], [16, 1], [16, 2], [16, 3]]
    P: Annotated[PositiveInts, Distinct] = [25, 50, 100, 200, 400, 800, 1600]
    dim: PositiveInt = 8
    normalize: bool = False  # y / sqrt(s): the signal per row independent of s
    prior: PriorSection = PriorSection()
    inits: NonEmpty[Literal["cold", "hot"]] = ["cold", "hot"]
    mcmc: ChainsSection = ChainsSection(num_chains=2, num_warmup=300, num_samples=300)
    theory_P: PositiveInt = 25  # values of P (geometric, P[0] .. 2 P[-1]) of the theory's curve

    @model_validator(mode="after")
    def _pairs(self):
        for S, s in self.grid:
            if s > S:
                raise ValueError(f"grid item [{S}, {s}]: expected 1 <= s <= S")
        return self


class SparseConfig(ExperimentConfig):
    """Named config (configs/NAME.toml). ``train``: :class:`SparseTrainConfig` fields shared by every training
    point; ``grid``: [S, s] pairs; ``heads``: H at the train width; ``head_dims``: head sizes at ``head_dim_heads``
    heads; ``mixer_S``, ``mixer_s``: transformer vs Mixer across s at S = mixer_S. ``seeds`` seeds per training
    point, trained ``seeds_per_program`` at a time in one vmapped program (aligned blocks: a seed's result does not
    depend on how many seeds are asked for)."""

    name: str = "sparse_emergence"
    parts: NonEmpty[Part] = list(PARTS)
    seed: Seed = 0
    seeds: SeedCount = 16
    seeds_per_program: PositiveInt = 16
    train: SparseTrainConfig = SparseTrainConfig()
    # the axes of the training parts (grid, heads, head_dim, mixer), one point per value and seed: none may be empty
    # (a part is left out by ``parts``) or repeat a value
    grid: NonEmptyDistinct[Pair] = [[8, 1], [8, 2], [8, 3], [16, 1], [16, 2], [16, 3]]
    heads: NonEmptyDistinct[PositiveInt] = [1, 2, 4, 8]
    head_dims: NonEmptyDistinct[PositiveInt] = [2, 4, 8, 16]
    head_dim_heads: PositiveInt = 4
    heads_S: PositiveInt = 8
    heads_s: PositiveInt = 3
    mixer_S: PositiveInt = 8
    mixer_s: NonEmptyDistinct[PositiveInt] = [1, 2, 3, 4]
    # learning rates of the mixer part per arm ({"transformer": [...], "mixer": [...]}); an arm not named: train.lr
    mixer_lr: dict[Literal["transformer", "mixer"], NonEmptyDistinct[PositiveFloat]] = {}
    bayes: BayesSparseConfig = BayesSparseConfig()

    @model_validator(mode="after")
    def _runs(self):
        for S, s in self.grid:
            self.train_config(S=S, s=s)
        for H in self.heads:
            self.train_config(S=self.heads_S, s=self.heads_s, heads=H)
        for hd in self.head_dims:
            self.train_config(S=self.heads_S, s=self.heads_s, heads=self.head_dim_heads, head_dim=hd)
        for s in self.mixer_s:
            for m in ("transformer", "mixer"):
                for lr in self.lrs(m):
                    self.train_config(S=self.mixer_S, s=s, model=m, lr=lr)
        return self

    def lrs(self, model: str) -> list[float]:
        """The learning rates of the mixer part's arm ``model``."""
        return list(self.mixer_lr.get(model, [self.train.lr]))

    def train_config(self, **changes) -> SparseTrainConfig:
        return self.train.replace(**changes)
