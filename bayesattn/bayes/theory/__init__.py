"""Order-parameter theory of the copy-head transition (docs/model.md section 4; derivation in docs/theory.md).

The closed-form posterior over the attention matrix L is reduced, at large n, to a density over the
order parameters. With beta = P d / (2 sigma2) and eps = lam / n (lam = d sigma2 / sigma_V2, n = P T_q,
T_q the number of query rows) the log density of the order parameters is -T_q Phi, with the per-row action

    Phi = beta_eff [1 - m^2 / (q + eps)] + (d^2 / (2 T_q)) log(1 + q / eps) + entropy term,
    beta_eff = beta - noise_fit * d^2 / (2 sigma2 T_q)   (the O(d^2/sigma^2) noise-fit term, off by default).

- softmax: the entropy term is the rate function I(m, q) of the row averages of a_t = alpha_{t,src} and
  b_t = sum_s alpha_ts^2 under the prior, exact over the T-1 other logits at finite T (prior samples of
  S1 = sum e^l, S2 = sum e^{2l}, a quadrature over the source logit). It is handled in its dual variables
  (h, g): a table of Lambda(h, g) = log E exp(h a + g b) and its gradient (m, q) is built once per
  (T, sigma_A2) and reused for every P, since P enters only through beta and eps.
- linear: the order parameters are the squared cosine u between L and the shift pattern and the radius;
  under the isotropic prior the cosine c = +-sqrt(u) has density (1 - c^2)^{(D-3)/2} (D = the number of
  free logits), exact at every T, and the radius is integrated exactly.

Covered: ``CopyTask`` with Gaussian tokens; softmax with the cyclic boundary; linear with cyclic or causal
boundary; one-hot tokens for softmax and linear with the cyclic boundary (``phase_curve``, ``phase_diagram``,
``loss_curve``; linear: ``linear_onehot``, the exact law of four frame variables); softmax with the causal
boundary, both token kinds (one row table per key count, averaged: ``causal.py``). H heads on K single
lags of ``MultiLagCopyTask`` (Gaussian tokens, cyclic; softmax and linear): ``heads_curve``, ``heads_energy``
(``heads.py``, docs/theory.md section 12). Everything here is float64 (posterior energies are O(n d / sigma2); float32 loses the O(1)
differences between phases).
"""

from .causal import causal_softmax_table
from .common import Attention, action, covered
from .curves import phase_curve
from .diagrams import PhaseDiagram, critical_exponent, finite_size_scaling, phase_diagram
from .entropy import entropy_curve, tilted_row_entropy
from .heads import HeadsCurve, heads_curve, heads_energy
from .landscape import landscape
from .linear import linear_log_density
from .losses import loss_curve
from .phase_curve import PhaseCurve
from .plateau import langevin_plateau, plateau_curve, small_init_transition
from .softmax_table import softmax_action_table
from .zero_temperature import MODE_OBJECTIVES, linear_mode_critical_P, mode_action, mode_curve

__all__ = [
    "action",
    "softmax_action_table",
    "causal_softmax_table",
    "linear_log_density",
    "phase_curve",
    "PhaseCurve",
    "heads_curve",
    "HeadsCurve",
    "heads_energy",
    "loss_curve",
    "entropy_curve",
    "tilted_row_entropy",
    "landscape",
    "phase_diagram",
    "PhaseDiagram",
    "critical_exponent",
    "finite_size_scaling",
    "covered",
    "Attention",
    "mode_curve",
    "plateau_curve",
    "langevin_plateau",
    "small_init_transition",
    "mode_action",
    "linear_mode_critical_P",
    "MODE_OBJECTIVES",
]
