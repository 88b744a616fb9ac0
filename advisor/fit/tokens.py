"""How step time follows the batch's tokens: the in-log line, a power law, or a line through budgets."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from advisor.fit.roles import drift, log_mean_var
from advisor.model.params import RoleFit
from advisor.model.priors import TOKEN_EXPONENT_PRIOR, TOKEN_EXPONENT_PRIOR_HALF95, TOKEN_RUN_SE
from advisor.settings import SAME_SIZE_TOL
from advisor.stats import Z_95

TOKEN_LINE_GRID = 101  # grid points of the line's elasticity posterior, 0..1
LINE_MIN_SPREAD = 1.5  # q98/q02 of batch tokens needed to trust the in-log step-time line
LINE_MIN_R2 = 0.3


def budget_line(rf: RoleFit, tokens_mean: float, per_log, per_log_tokens, groups: list[list[int]]) -> RoleFit:
    """The line busy(T) = L (1 - e + e T / T_mid) through the budgets' means (T_mid their weighted
    geometric mid-point, 0 <= e <= 1 the elasticity there). Each budget's log mean z_i has variance
    v_i (sampling, drift, ``TOKEN_RUN_SE``); with a flat prior on log L and N(TOKEN_EXPONENT_PRIOR,
    (TOKEN_EXPONENT_PRIOR_HALF95 / 1.96)^2) on e, e's posterior is computed on a grid (log L given e
    Gaussian: the weighted mean, variance 1 / sum(1 / v_i)).
    """
    x, z, var = [], [], []
    for gr in groups:
        busy = np.concatenate([per_log[i][rf.role]["busy"].to_numpy() for i in gr])
        var.append(log_mean_var(busy, max(drift(per_log[i][rf.role]) for i in gr), TOKEN_RUN_SE**2 / len(gr)))
        x.append(float(np.mean([per_log_tokens[i] for i in gr])))
        z.append(math.log(float(busy.mean())))
    xa, za, w = np.array(x), np.array(z), 1.0 / np.array(var)
    mid = float(math.exp(np.sum(w * np.log(xa)) / np.sum(w)))
    e = np.linspace(0.0, 1.0, TOKEN_LINE_GRID)
    g = np.log(np.maximum(1.0 - e[:, None] + e[:, None] * (xa / mid)[None, :], 1e-12))  # grid x budgets
    lam = ((za[None, :] - g) * w).sum(axis=1) / w.sum()
    chi2 = (((za[None, :] - g - lam[:, None]) ** 2) * w).sum(axis=1)
    sd0 = TOKEN_EXPONENT_PRIOR_HALF95 / Z_95
    logp = -0.5 * chi2 - 0.5 * ((e - TOKEN_EXPONENT_PRIOR) / sd0) ** 2
    post = np.exp(logp - logp.max())
    post /= post.sum()
    keep = post > 1e-9
    e_mean = float(np.sum(post * e))
    level = float(np.exp(np.sum(post * lam)))
    # the budget group tokens_ref falls in (the anchor): its observed mean is what busy_mean_s stands for
    anchor = int(np.argmin(np.abs(np.log(xa / tokens_mean))))
    return replace(
        rf,
        token_model="budgets",
        tokens_ref=tokens_mean,
        budget_line=(level * (1.0 - e_mean), level * e_mean / mid),
        budget_posterior=tuple(zip(e[keep].tolist(), lam[keep].tolist(), post[keep].tolist())),
        budget_tokens_mid=mid,
        budget_level_var=float(1.0 / w.sum()),
        budget_anchor_s=float(math.exp(za[anchor])),
        token_range=(float(xa.min()), float(xa.max())),
    )


def token_model(rf: RoleFit, tokens_mean: float, per_log, per_log_tokens, tok: np.ndarray) -> RoleFit:
    """Choose how step time follows the batch's tokens (see RoleFit.busy_at); ``tok``: the consumer's
    batch tokens of every log."""
    groups: list[list[int]] = []
    for i in sorted(per_log_tokens, key=lambda j: per_log_tokens[j]):
        if groups and per_log_tokens[i] / per_log_tokens[groups[-1][0]] - 1.0 <= SAME_SIZE_TOL:
            groups[-1].append(i)
        else:
            groups.append([i])
    if len(groups) >= 2:
        return budget_line(rf, tokens_mean, per_log, per_log_tokens, groups)
    spread = float(np.quantile(tok, 0.98) / max(np.quantile(tok, 0.02), 1e-9))
    if spread >= LINE_MIN_SPREAD and rf.r2 >= LINE_MIN_R2 and rf.c_s_per_tok > 0:
        return replace(rf, token_model="line", tokens_ref=tokens_mean, token_range=(tokens_mean, tokens_mean))
    # the in-log line's elasticity at the mean batch, c*T/(t0 + c*T), moves the prior by as much as
    # the line explains (r2): a narrow token range leaves the prior nearly as it is
    elast = rf.c_s_per_tok * tokens_mean / max(rf.t0_s + rf.c_s_per_tok * tokens_mean, 1e-12)
    lo_p, hi_p = TOKEN_EXPONENT_PRIOR - TOKEN_EXPONENT_PRIOR_HALF95, TOKEN_EXPONENT_PRIOR + TOKEN_EXPONENT_PRIOR_HALF95
    w = min(max(rf.r2, 0.0), 1.0)
    p = TOKEN_EXPONENT_PRIOR + w * (min(max(elast, lo_p), hi_p) - TOKEN_EXPONENT_PRIOR)
    return replace(
        rf,
        token_model="power",
        tokens_ref=tokens_mean,
        token_exponent=p,
        token_exponent_half95=TOKEN_EXPONENT_PRIOR_HALF95,
        token_range=(tokens_mean, tokens_mean),
    )
