"""dflash-train: a small but real asynchronous DFlash drafter-training pipeline that writes rate logs.

Modules, one job each: config (settings, presets), corpus (synthetic data), batching (token-budget
bucketed batches), models (target backbone, block drafter, loss), compute (one batch per role),
handoff (hidden states across processes), sync (drafter weight averaging), clock (time base),
loader (prefetch placement), workers (worker processes and step timing), rates (snapshots),
logwriter (the JSONL writer and the output-path check), progress (terminal line), emulate
(service-time emulation), lifeline (workers die with the main process), run (orchestration),
cli (typer command), bench (solo service times of each role), fidelity (an emulated split
against the zero-overhead simulation of the same model).
"""
