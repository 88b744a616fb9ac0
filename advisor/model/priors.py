"""Constants measured on real runs that the model carries where one log cannot measure them.

Each says what it is, where it was measured and how it was checked; BENCHMARKS.md section 9
holds the sweeps (fixtures/sweep/) and the held-out tests. They set the centre and the width of
what a projection assumes about step times that change with the split (contention on a shared
host, the lone-worker regime), with another token budget, and from run to run.
"""

from __future__ import annotations

import math

DEFAULT_SCV = 0.05  # GPU step times: SCV 0.01-0.1 is typical
# Contention prior (one split seen): a worker's step time may change by this much (one standard
# error, relative, per producer added at a fixed G) because workers share a host resource (memory
# bandwidth, PCIe, host CPU, the loader). From the real CPU sweeps in fixtures/sweep/: the RMS
# difference of a target's log step time between logs d splits apart, less the run-to-run part
# (RUN_SE), grew by 2.6-3.8% per worker on the 32-core host and 7-10% on the 16-core host (drafters:
# 1.5-2.5%); pooled, 4.5%. The sweeps that ran one split at a time agree (targets 4.7% on the
# 32-core host; drafters 5.3% on the 16-core host, where targets showed none). Beyond the logged
# splits the step time moves from the nearest logged split's by the prior's centre (below) and this
# much per worker of distance is carried, instead of extrapolating a fitted slope (adjacent splits
# gave slopes of up to 14% per worker that did not continue; a fitted slope shrunk towards 0 by
# this prior and carried over the whole range was tried on the five sweeps' pairs and rejected:
# G = 12 pairs' worst error went from 25.7% to 39.3% and their coverage from 80% to 68%).
CONTENTION_PRIOR_SE = 0.045  # carried only where workers share a host's compute (see shares_compute)
# A host with fewer CPU cores than workers (header `cores`): a busy worker's step time is set by how
# many others are busy with it, which the split changes. Processor sharing bounds the move between
# two splits by a factor workers/cores (1.5 for 3 workers on 2 cores). Measured on real pairs of
# 3 workers of examples/instrumented_loop.py on 2 cores, 30 s each (fixtures/oversub2/, this dev
# host, two repeats): between 1-2 and 2-1 a drafter's mean step moved by a factor 1.43 and 1.48, a
# target's by 1.40 and 1.30; a pair on the device host pinned to 2 cores (BENCHMARKS.md section 18)
# moved a drafter's by 1.63, beyond the bound. So ln(workers / cores) is carried as one standard
# error per worker moved (95%: a factor (workers/cores)^+-1.96), not as a limit, in place of
# CONTENTION_PRIOR_SE where it is larger.
OVERSUBSCRIBED_SOURCE = (
    "3 workers on 2 cores moved their steps by a factor 1.30-1.63 between 1-2 and 2-1: "
    "fixtures/oversub2, BENCHMARKS.md section 18"
)


def oversubscribed_se(workers: int, cores: int) -> float:
    """The per-worker standard error of a step time on a host of ``cores`` cores for ``workers``
    workers.
    """
    return math.log(workers / cores) if 0 < cores < workers else 0.0


# The prior's centre: a producer's step grows by CONTENTION_PRIOR_K_PRODUCER (log, per producer
# added) on a shared host. The slope of a target's log step time on the target count, fitted over
# all runs of each real sweep, was +6.9% (cpu16), +3.4% (cpu32), +3.4% (cpu32g12), +2.3% (ded16)
# and +4.6% (ded32): of one sign on every host; the drafters' went either way (-4.1% to +2.3%, mean
# 0.0%: CONTENTION_PRIOR_K_CONSUMER). A centre of 4% (those five's mean), left out one sweep at a
# time (3.4-4.6%), cut the single-log mean error on four sweeps (cpu32 6.7% -> 4.2%, cpu16 7.3% ->
# 5.8%, cpu32g12 9.9% -> 8.3%, ded32 8.4% -> 4.5%) and raised it on ded16 (8.2% -> 9.0%). Two
# sweeps recorded afterwards as held-out tests showed +2.0% (hold16: 6.1% -> 5.8%) and +0.8%
# (hold16g10: 11.4% -> 13.1%). The centre is the mean over all seven, 0.033 (+3.4% a target).
# Checked on every CPU sweep since (benchmarks/target_slope.py, BENCHMARKS.md 19.14): the 22 of
# 19.13 mean +3.39% (sd 2.20% between sweeps), with three held-out ones +3.06% over 25; kept.
CONTENTION_PRIOR_K_PRODUCER = 0.033
CONTENTION_PRIOR_K_CONSUMER = 0.0
# A role with one worker is another regime (a lone drafter never waits for its peers' all-reduce
# and, feeding on a full queue, never idles): its step time may jump against the same role's at
# two or more workers. The lone drafter's mean step against the two drafters' (mean of repeats, log)
# was +0.2% (cpu32), -3.1% (cpu16), +1.7% (cpu32g12), +5.1% (ded32), -15.8% (ded16), -8.6%
# (hold16) and -19.7% (hold16g10): 11.3% RMS, 8.7% beyond the repeats' noise (RUN_SE / sqrt(2) of
# the drafters) and one worker of CONTENTION_PRIOR_SE. Carried where a split's count of a role is
# 1 on one side of the logged one(s) and not the other, as one unknown shared by every such split
# (no sweep ran a lone target; the producers carry the same by symmetry).
CONTENTION_SINGLE_SE = 0.087
# Token budget with one budget seen and a step-time line the log cannot pin down: busy ~ tokens^p,
# p between 0.35 (a large fixed cost per batch, utilisation still rising) and 0.95 (nearly
# saturated, compute-bound). The centre is what real runs showed: the local elasticity
# b*T/(a + b*T) of the budget lines measured on H200s was 0.52, 0.68 and 0.76 at 16K, 32K and 48K
# tokens (234m target, five budgets) and 0.53 and 0.71 at 16K and 32K (1b target); it is moved
# towards the in-log line's elasticity by the share of variance the line explains, and the range
# is carried as a 95% interval.
TOKEN_EXPONENT_PRIOR = 0.65
TOKEN_EXPONENT_PRIOR_HALF95 = 0.3
# With two or more budgets step time is a line through the budgets' means, busy = a + b*tokens
# (a fixed cost per batch plus a per-token cost; on two H200s, 234m target, five budgets from 16K
# to 48K tokens lay within 1.5% of one line, where a power law through two of them erred by up to
# 8.7% in between). Each budget's mean carries its sampling error and TOKEN_RUN_SE, the run-to-run
# spread of one budget's mean step time between repeats (6.3% pooled over 12 runs at 5 budgets on
# dedicated H200s: a run at another budget is another run). The line's elasticity at the budgets'
# mid-point gets the one-budget prior above (`budget_line`): least squares alone let two close
# budgets, each a run off by up to 10%, set a slope that extrapolation amplified (up to 48% off
# on the 234m sweep; with the prior 15%). Its curvature is unknown (a 1b target on one shared H200
# bent upwards at 64K tokens: attention grows with sequence length): TOKEN_LINE_CURVATURE_HALF95 of
# log step time (95% half-width) is carried per e-fold of extrapolation beyond the logged budgets.
TOKEN_RUN_SE = 0.063
TOKEN_LINE_CURVATURE_HALF95 = 0.2
# A run's level shifts from run to run in ways one log cannot show (neither its drift nor its
# regimes predict it): the RMS difference of log mean step time between two repeats of one split on
# the same host was 3.2% (targets) / 2.4% (drafters) on a 32-core host running three lanes side by
# side, 10.4% / 9.6% on a 16-core host with two lanes, 6.4% / 6.9%, 11.6% / 9.6%, 5.5% / 8.4% and
# 14.5% / 9.3% on a 32-core host and on 16-core hosts running one split at a time (fixtures/sweep/
# cpu32, cpu16, ded32, ded16, hold16, hold16g10: 31 pairs of repeats). A projection predicts another
# run, so it carries the difference between two runs, pooled over the six (targets 9.0%, drafters
# 7.9%; over the first four, before hold16 and hold16g10 were recorded, 8.0% / 7.3%, which those
# two then tested: BENCHMARKS.md section 9): relative standard error per role. The G = 12 sweep
# (cpu32g12, a host whose pace moved by up to 25% within minutes: 16.5% / 17.5%) is kept out of the
# pool as a test of it.
RUN_SE = 0.09  # carried where workers share a host's compute, like the contention prior


# ---------------------------------------------------------------- real GPUs, no step log
# Bare numbers (`what-if`) and rates-only logs of a GPU run carry the terms a step log of one split
# cannot measure either, from priors: a role's per-GPU rate changes with its own count and with the
# other role's on one host (shared PCIe, host CPU, NIC, NVLink), and another run differs from this
# one. Published split tables of other stacks (benchmarks/published_runs.json, with each source's
# repository, commit and path; BENCHMARKS.md section 17):
#
# - SpecForge, Qwen3-8B Domino/DFlash on one 8xH200 node (sgl-project/SpecForge @ a6b6b023,
#   docs/benchmarks/domino-disaggregated-performance.md, "The pipeline is a supply/demand
#   seesaw"): 1 capture server + 7 FSDP trainers 50.1 samples/s (supply-bound: each trainer's
#   capacity at least 7.16), 2 + 6 39.0/s (demand-bound: 6.50 a trainer). Moving one GPU from the
#   trainers to a second server raised each trainer's step time by at least ln(7.16 / 6.50) = 9.7%,
#   although there was one trainer rank fewer.
#
# That is the one split pair of one GPU total found published (TorchSpec's tables, with FSDP trainers
# losing per-GPU rate with more ranks, could not be located; verl's give one split per GPU total).
# It sets the width, not the centre: one pair, which is also the benchmark's own test, would fit the
# centre to the test; and our own sweeps' drafter slopes went either way (mean 0.0%,
# CONTENTION_PRIOR_K_CONSUMER). So the consumer's step time per GPU moved has centre 0 and a
# standard error of 10% (the one published departure, at least 9.7%, as one draw's RMS):
# GPU_SPLIT_SE_CONSUMER. No published table measures a producer's per-GPU rate at two counts; its
# width is our sweeps' per-worker figure for targets (CONTENTION_PRIOR_SE, 4.5%): GPU_SPLIT_SE_PRODUCER.
# Carried per GPU of distance from the given split, for each role by its own count (at any G).
GPU_PRIOR_K_CONSUMER = 0.0
GPU_PRIOR_K_PRODUCER = 0.0
GPU_SPLIT_SE_CONSUMER = 0.10
GPU_SPLIT_SE_PRODUCER = CONTENTION_PRIOR_SE
# Run to run on dedicated GPUs: TOKEN_RUN_SE (12 runs at 5 budgets on dedicated H200s) is the one
# measured spread of a repeat's mean step time on real GPUs; carried per role.
GPU_RUN_SE = TOKEN_RUN_SE
