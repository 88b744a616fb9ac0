"""The table's role-named column names, spelled in one place (`RoleColumns`).

`advisor.project.table` writes its per-split columns under these names, `advisor.project.rows`
reads them back into records, and the refinements between (`advisor.project.linked`,
`advisor.project.exact`) name them here too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RoleColumns:
    """The table's column names of one role (``target`` gives ``n_target``, ``cap_target_bps``)."""

    workers: str  # engines of the role
    cap_bps: str  # the pool's capacity, batches/s
    wait_share: str  # a producer's share blocked (``<role>_blocked``), a consumer's starved
    gpus: str  # GPUs the role's engines hold
    gpus_per_worker: str  # GPUs one engine holds
    engines_by_node: str  # engines per node (the table's placement columns)


def role_columns(roles: tuple[str, str]) -> tuple[RoleColumns, RoleColumns]:
    """The column names of the producer's and the consumer's role (`RoleColumns`), in that order."""
    return _columns(roles[0], "blocked"), _columns(roles[1], "starved")


def _columns(role: str, wait: str) -> RoleColumns:
    return RoleColumns(
        workers=f"n_{role}",
        cap_bps=f"cap_{role}_bps",
        wait_share=f"{role}_{wait}",
        gpus=f"gpus_{role}",
        gpus_per_worker=f"gpus_per_{role}",
        engines_by_node=f"nodes_{role}",
    )
