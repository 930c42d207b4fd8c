"""The thread team's back-off rule (nt_team.h): which spinning jobs count as misses, three of which in a
row send GEMVs and packed products to the calling thread alone for a while."""

from __future__ import annotations

import pytest
from numtrace_cpu.isa import blocks


@pytest.mark.parametrize("mine,nunits,awake,work,wait,missed", [
    (3, 3, True, 10_000, 0, True),              # the workers ran nothing while awake: starved
    (3, 3, False, 10_000, 0, False),            # they were asleep: woken too late, not starved
    (4, 8, True, 400_000, 200_000, False),      # a worker that started late still took work off the caller
    (1, 3, True, 200_000, 190_000, False),      # the caller ran one unit of three, a worker two
    (4, 8, True, 400_000, 3_000_000, True),     # a worker preempted inside its unit for a time slice
    (2, 4, True, 2_000, 30_000, False),         # a small job's jitter
    (2, 4, True, 2_000, 60_000, True),          # a small job held up far beyond its own length
])
def test_team_miss_rule(mine, nunits, awake, work, wait, missed):
    """A spinning job counts toward a back-off when its workers were starved of cores, not when a
    worker merely finished its last unit a little after the caller: with a product's units of 100-250
    us, a fixed bound (1024 pauses, about 47 us) would count such jobs as misses even with both cores
    free, and three in a row would back the team off."""
    assert blocks.team_job_missed(mine, nunits, awake, work, wait) is missed

