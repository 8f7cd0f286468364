"""The training-dynamics laboratory's config: the clustering-head runs (sparse modular addition) and the
focus-dilution runs (Markov data), their settings, seeds and options, and the equilibrium counterpart (the copy
task's posterior-mean attention entropy against P). No JAX here."""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..config import (
    Distinct,
    ExperimentConfig,
    Increasing,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PositiveInts,
    Section,
    Seed,
    SeedCount,
    SeqLength,
)
from ..sections import ChainsSection, PriorSection

EXPERIMENTS = ("clustering_head", "focus_dilution")
OPTIMIZERS = ("gd", "adam")


class ClusterConfig(Section):
    """One clustering-head run (the paper's code setup): data, model sizes, Adam, epochs. ``seeds`` and ``seed``
    are kept for the record of older points; the experiment's seeds are its own."""

    p: int = 2
    k: PositiveInt = 5
    seq_len: PositiveInt = 12
    n_train: PositiveInt = 2048
    n_test: PositiveInt = 2048
    emb_dim: PositiveInt = 2
    n_emb: int | None = None  # token embeddings (= output classes); None: p + 1, as the paper's grid (3 for p = 2)
    ffn_dim: PositiveInt = 32
    lr: PositiveFloat = 3e-3
    batch_size: PositiveInt = 32
    epochs: PositiveInt = 1000
    seeds: SeedCount = 8
    seed: Seed = 0
    success_acc: float = 0.98
    # fine-tuning as the paper's code does it (finetune.py): the trained model goes on training, with a fresh Adam,
    # for finetune_epochs on new data of finetune_p classes (its embedding table has num_emb >= finetune_p rows);
    # None: no fine-tuning. The run's curves, spikes and curvature are then the fine-tuning stage's
    finetune_p: int | None = None
    finetune_epochs: PositiveInt = 1000

    LEGACY_DEFAULTS: ClassVar[dict[str, Any]] = {"finetune_p": None, "finetune_epochs": 1000}

    @model_validator(mode="after")
    def _consistent(self):
        if self.p < 2:
            raise ValueError(f"p={self.p}: expected an integer >= 2")
        if self.k > self.seq_len:
            raise ValueError(f"k={self.k}: expected k <= seq_len={self.seq_len} (the summed tokens are the first k)")
        if self.n_emb is not None and self.n_emb < self.p:
            raise ValueError(f"n_emb={self.n_emb}: expected an integer >= p={self.p}")
        if self.batch_size > self.n_train:
            raise ValueError(f"batch_size={self.batch_size}: expected <= n_train={self.n_train}")
        if self.finetune_p is not None and not 2 <= self.finetune_p <= self.num_emb:
            raise ValueError(
                f"finetune_p={self.finetune_p}: expected 2 <= finetune_p <= the model's {self.num_emb} token "
                f"embeddings (n_emb; p + 1 by default)"
            )
        return self

    @property
    def num_emb(self) -> int:
        return self.p + 1 if self.n_emb is None else self.n_emb

    def finetune_config(self) -> ClusterConfig:
        """The fine-tuning stage's config: the same model (num_emb rows), finetune_p classes, finetune_epochs."""
        return self.model_copy(
            update={"p": self.finetune_p, "n_emb": self.num_emb, "epochs": self.finetune_epochs, "finetune_p": None}
        )


class FDConfig(Section):
    """One focus-dilution run: a Markov chain P = lam I + (1 - lam) 1 pi^T, one layer, one head, GD or Adam."""

    pi: list[float] = [0.75, 0.19, 0.05, 0.01]  # this toolkit's choice (the paper's stationary law is not available)
    lam: Annotated[float, Field(ge=0, lt=1)] = 0.5
    T: int = 16
    n: PositiveInt = 256
    d: PositiveInt = 8
    init_scale: PositiveFloat = 0.02
    optimizer: Literal["gd", "adam"] = "gd"
    lr: PositiveFloat = 0.5
    steps: PositiveInt = 20000
    record_every: PositiveInt = 50
    seeds: SeedCount = 4
    seed: Seed = 0
    min_drop: PositiveFloat = 0.05  # the entropy change that counts as a focus or dilution phase (nats)
    rank_one: PositiveFloat = 1.3  # effective rank of E below which it counts as condensed to rank one
    # the entropy whose falls and rises are the focus and dilution phases: "value_entropy" (of the attention
    # mass over token values: falls when attention piles onto the frequent tokens) or "entropy" (over positions)
    stage_signal: Literal["value_entropy", "entropy", "entropy_frequent", "entropy_rare"] = "value_entropy"

    @field_validator("pi")
    @classmethod
    def _stationary_law(cls, pi):
        if len(pi) < 2:
            raise ValueError(f"pi={pi}: expected a vector of at least 2 probabilities")
        if any(not math.isfinite(x) or x < 0 for x in pi):
            raise ValueError(f"pi={pi}: expected non-negative entries (a stationary law)")
        if abs(sum(pi) - 1.0) > 1e-6:
            raise ValueError(f"pi={pi}: entries sum to {sum(pi):.6g}, expected 1")
        return pi

    @model_validator(mode="after")
    def _consistent(self):
        if self.T < 2:
            raise ValueError(f"T={self.T}: expected an integer >= 2")
        if self.record_every > self.steps:
            raise ValueError(f"record_every={self.record_every}: expected <= steps={self.steps}")
        return self

    @property
    def V(self) -> int:
        return len(self.pi)


def geometric_pi(V: int, ratio: float) -> list:
    """pi_i proportional to ratio^i, i = 0..V-1 (a skewed stationary law over V tokens)."""
    import numpy as np

    if isinstance(V, bool) or not isinstance(V, int) or V < 2:
        raise ValueError(f"vocab={V!r}: expected an integer >= 2")
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio={ratio}: expected 0 < ratio <= 1")
    w = ratio ** np.arange(V)
    return (w / w.sum()).tolist()


class ClusterOptions(Section):
    """Per-point options of the clustering head: the largest Hessian eigenvalue every ``curv_every`` epochs (and at
    every epoch of the ``curv_window`` epochs before each spike and at the spike) by ``lanczos_iter`` Lanczos steps; sandbox frames (embeddings over training)
    of the first ``sandbox_seeds`` seeds on ``sandbox_seqs`` test sequences; epochs per compiled block."""

    curv_every: PositiveInt = 50
    curv_window: PositiveInt = 2
    curv_seed: Seed = 0
    lanczos_iter: PositiveInt = 20
    frames: PositiveInt = 40
    sandbox_seqs: PositiveInt = 256
    sandbox_seeds: NonNegativeInt = 4
    block: PositiveInt = 50

    LEGACY_DEFAULTS: ClassVar[dict[str, Any]] = {"curv_window": 2}


class EquilibriumSection(Section):
    """NUTS on the closed-form copy-task posterior (one softmax head) at each P and T, and the order-parameter
    theory's posterior-mean attention entropy beside it."""

    P: Annotated[PositiveInts, Increasing]  # the theory's grid (theory.entropy_curve: common.check_grid)
    T: PositiveInt | list[PositiveInt] = 8  # one point per (T, P)
    d: PositiveInt = 4
    prior: PriorSection = PriorSection()
    mcmc: ChainsSection = ChainsSection(num_chains=2, num_warmup=300, num_samples=300)

    @model_validator(mode="after")
    def _lengths(self):
        Ts = self.Ts
        if not Ts or min(Ts) < 2 or len(set(Ts)) != len(Ts):
            raise ValueError(
                f"T={self.T!r}: expected a sequence length >= 2 (the copy task's), or a non-empty list of distinct ones"
            )
        return self

    @property
    def Ts(self) -> list[int]:
        return list(self.T) if isinstance(self.T, list) else [self.T]


class LangevinSection(Section):
    """The posterior's own dynamics: Langevin (SGLD at temperature 1, whose stationary law is the posterior) on the
    one-head softmax copy-task posterior with the readout integrated out, from a small init, per seed; the
    attention entropy over positions and m along Langevin time (lr x steps). One data set and one init per seed."""

    P: Annotated[PositiveInts, Distinct]  # one run per P (train_sweep refuses a repeated one)
    T: SeqLength = 8
    d: PositiveInt = 4
    prior: PriorSection = PriorSection()
    seeds: SeedCount = 16
    lr: PositiveFloat = 0.05
    steps: PositiveInt = 30000
    init_scale: PositiveFloat = 0.01
    records: PositiveInt = 300

    @model_validator(mode="after")
    def _records(self):
        if self.records > self.steps:
            raise ValueError(f"langevin.records={self.records}: at most langevin.steps={self.steps}")
        return self


class DynlabConfig(ExperimentConfig):
    """``base``: fields of :class:`ClusterConfig` or :class:`FDConfig`; ``settings``: a list of overrides of
    ``base`` (one grid point each; for focus-dilution ``vocab`` and ``ratio`` stand for ``pi = geometric_pi(vocab,
    ratio)``); ``optimizers`` (focus-dilution): one run per optimizer per setting; ``options``: the clustering
    head's per-point options; ``equilibrium``: the MCMC counterpart (none when absent); ``langevin``: the
    posterior's Langevin dynamics along time (none when absent). Seeds train
    ``seeds_per_program`` at a time in one vmapped program, in aligned blocks (seed i in block i //
    seeds_per_program), so that a seed's result does not depend on which other seeds were asked for. The width
    itself is part of a seed's result: vmapped arithmetic rounds differently at each width, and a run sensitive to
    rounding (the clustering head at p = 3) ends differently (docs/results/dynlab.md)."""

    name: str = "dynlab"
    experiment: Literal["clustering_head", "focus_dilution"] = "clustering_head"
    seed: Seed = 0
    seeds: SeedCount = 8
    seeds_per_program: PositiveInt = 8
    base: dict = {}
    settings: list[dict] = [{}]
    optimizers: Annotated[list[Literal["gd", "adam"]], Field(min_length=1)] = ["gd"]
    options: ClusterOptions = ClusterOptions()
    equilibrium: EquilibriumSection | None = None
    langevin: LangevinSection | None = None
    adam_lr: PositiveFloat = 0.01  # focus-dilution: the Adam step where a setting gives no lr (base lr is GD's)

    @model_validator(mode="after")
    def _settings(self):
        if not self.settings:
            raise ValueError("settings=[]: expected at least one setting (use [{}] for the base alone)")
        for i, s in enumerate(self.settings):
            try:
                self.setting_config(s, self.optimizers[0])
            except ValueError as e:
                raise ValueError(f"settings[{i}]: {e}") from None
        return self

    def setting_config(self, setting: dict, optimizer: str) -> ClusterConfig | FDConfig:
        kw = {**self.base, **setting, "seeds": 1}
        if self.experiment == "clustering_head":
            return ClusterConfig.load(kw)
        if "vocab" in kw or "ratio" in kw:
            kw["pi"] = geometric_pi(kw.pop("vocab", 4), kw.pop("ratio", 0.25))
        opt = kw.setdefault("optimizer", optimizer)
        if opt == "adam" and "lr" not in setting:
            kw["lr"] = self.adam_lr
        return FDConfig.load(kw)
