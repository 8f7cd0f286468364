"""The circuit screens' config: a small transformer trained on in-context repetition and screened at every
checkpoint (``trajectory``), the Bayesian copy head through the same screens across P (``bayes``, with its
order-parameter ``theory`` line), and pretrained models (``model``: SmolLM2 or GGUF files). No JAX here."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from ..config import (
    ExperimentConfig,
    NonEmpty,
    NonEmptyDistinct,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Section,
    Seed,
    SeedCount,
    SeqLength,
)
from ..sections import ChainsSection, PriorSection

PARTS = ("trajectory", "bayes", "theory", "model")
Part = Literal["trajectory", "bayes", "theory", "model"]
Probe = Literal["repeated_pair", "repeated_sequence"]
Baseline = Literal["paper", "class_free"]  # the selectivity's baseline positions (diagnostics.screens)


class TrajectoryConfig(Section):
    """Task (T, vocab, periods), network (width, layers, heads, mlp: 0 = attention only), training (Adam, online
    batches, log-spaced checkpoints) and probes (N sequences of length T, pair positions)."""

    T: SeqLength = 64
    vocab: PositiveInt = 64
    min_period: PositiveInt = 8
    max_period: PositiveInt = 32
    width: PositiveInt = 64
    layers: PositiveInt = 2
    heads: PositiveInt = 4
    mlp: NonNegativeInt = 0
    steps: PositiveInt = 1500
    lr: PositiveFloat = 1e-3
    batch_size: PositiveInt = 32
    checkpoints: PositiveInt = 32
    probe_N: PositiveInt = 64
    probe_T: NonNegativeInt = 0  # 0: T - 1 (the last position, never a training query, is left out)
    probe_seed: Seed = 1
    baseline: Baseline = "paper"
    pair_range: list[PositiveInt] = [10, 32]

    @model_validator(mode="after")
    def _sizes(self):
        if self.min_period < 2 or self.min_period > self.max_period:
            raise ValueError(f"min_period={self.min_period}: expected 2 <= min_period <= max_period={self.max_period}")
        if self.max_period > self.vocab:
            raise ValueError(
                f"max_period={self.max_period}: the segment's tokens are distinct, so it must be <= vocab={self.vocab}"
            )
        if self.max_period > self.T - 2:
            raise ValueError(f"max_period={self.max_period}: leaves no query row; expected <= T - 2 = {self.T - 2}")
        if self.width % self.heads:
            raise ValueError(f"heads={self.heads}: must divide width={self.width}")
        if self.probe_T > self.T:
            raise ValueError(f"probe_T={self.probe_T}: expected <= T={self.T}")
        if len(self.pair_range) != 2 or self.pair_range[0] > self.pair_range[1]:
            raise ValueError(f"pair_range={self.pair_range}: expected [low, high] with low <= high")
        return self

    def task(self):
        from ...tasks import RepeatedSequenceTask

        return RepeatedSequenceTask(T=self.T, d=self.vocab, min_period=self.min_period, max_period=self.max_period)

    def network(self):
        from ...models import TransformerConfig

        return TransformerConfig(
            T=self.T,
            width=self.width,
            layers=self.layers,
            heads=self.heads,
            mlp=self.mlp or None,
            d_in=self.vocab,
            d_out=self.vocab,
            positions="learned",
        )


class BayesLensConfig(Section):
    """The Bayesian copy head through the screens: the copy task (offset 1), softmax, NUTS at each P, the
    previous-token selectivity and PR at the last query on ``probe_N`` probe sequences; ``theory_points`` P values
    of the theory's line (log-spaced over the range of ``P``; 0: none)."""

    T: SeqLength = 8
    d: PositiveInt = 8
    tokens: Literal["gaussian", "onehot"] = "onehot"
    boundary: Literal["cyclic", "causal"] = "cyclic"
    prior: PriorSection = PriorSection(sigma2=10.0)
    P: NonEmptyDistinct[PositiveInt] = [30, 53, 95, 169, 300, 533, 949, 1687, 3000, 5335, 9487, 16870, 30000]
    mcmc: ChainsSection = ChainsSection(num_chains=4, num_warmup=500, num_samples=500)
    probe_N: PositiveInt = 256
    theory_points: NonNegativeInt = 25

    def task(self, tokens: str | None = None):
        from ...tasks import CopyTask

        return CopyTask(T=self.T, d=self.d, offset=1, tokens=tokens or self.tokens, boundary=self.boundary)


class ModelScreen(Section):
    """Pretrained models screened on one probe batch: ``models`` (``smollm2``, from the ``real`` extra, or llama
    GGUF paths; several: a checkpoint series, ranked by the integral of PR over ``steps``)."""

    models: NonEmpty[str] = ["smollm2"]
    steps: list[int] | None = None
    probe: Probe = "repeated_pair"
    N: PositiveInt = 64
    T: PositiveInt | None = None  # default: min(256, the model's context)
    seed: Seed = 0
    baseline: Baseline = "paper"
    bos: bool = False
    threshold: PositiveFloat = 30.0
    chunk: PositiveInt = 8


class ScreensConfig(ExperimentConfig):
    name: str = "screens"
    parts: NonEmpty[Part] = ["trajectory"]
    seed: Seed = 0
    seeds: SeedCount = 1  # training runs of the trajectory, seeds seed, seed + 1, ...; from 2, the seeds' statistics
    trajectory: TrajectoryConfig = TrajectoryConfig()
    bayes: BayesLensConfig = BayesLensConfig()
    model: ModelScreen = ModelScreen()
