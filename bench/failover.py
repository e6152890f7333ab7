"""Time to resume after a failover, against a crash and restart of a lone server.

    python bench/failover.py              # 3 runs of each, medians
    python bench/failover.py --runs 5 --outage 5

Each run builds a primary and a synchronous standby from the embedded PostgreSQL
binaries, runs ``jobqueue worker --processes 2`` and ``jobqueue api`` on both hosts
(target_session_attrs=read-write) under HTTP load, crashes the primary and promotes
the standby ``--outage`` seconds later (tests/faults/failover_scenario.py, the same
run tests/faults/test_failover.py checks). The reference: one server, crashed the
same way and started again after the same outage. Printed: from the crash and from
the promotion (or the restart), the first 201 and the first job completed; medians,
and the failover's over the reference's. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from jobqueue import logs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.faults.failover_scenario import FailoverRun, fail_over_under_load  # noqa: E402
from tests.faults.replication import Lone, Replicated  # noqa: E402

FIGURES: dict[str, Callable[[FailoverRun], float | None]] = {
    "first 201 after the crash": lambda run: run.first_201,
    "first job completed after the crash": lambda run: run.first_completion,
    "first 201 after the recovery": lambda run: run.since_promotion(run.first_201),
    "first job completed after the recovery": lambda run: run.since_promotion(run.first_completion),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--outage", type=float, default=2.0, help="seconds from crash to recovery")
    args = parser.parse_args()
    logs.configure("warning")  # not a line per migration applied to each new server
    measured: dict[str, list[FailoverRun]] = {"failover": [], "restart": []}
    for i in range(args.runs):
        for kind, make in (("failover", Replicated.make), ("restart", Lone.make)):
            with (
                tempfile.TemporaryDirectory(prefix=f"jqbench-failover-{kind}-") as tmp,
                make(Path(tmp) / "pg") as servers,
            ):
                run = fail_over_under_load(servers, Path(tmp), outage=args.outage)
            measured[kind].append(run)
            lost = sum(1 for s in run.statuses.values() if s != "completed")
            lost += len(set(run.accepted) - set(run.statuses))
            print(
                f"run {i + 1} {kind:8}: "
                + ", ".join(f"{name} {show(figure(run))}" for name, figure in FIGURES.items())
                + f"; {len(run.accepted)} jobs acknowledged, {lost} not completed",
                flush=True,
            )
    print(f"\nmedians of {args.runs} runs, outage {args.outage:g} s (crash to recovery):")
    print(f"{'':40} {'failover':>9} {'restart':>9} {'ratio':>6}")
    for name, figure in FIGURES.items():
        failover = median(figure(run) for run in measured["failover"])
        restart = median(figure(run) for run in measured["restart"])
        ratio = f"{failover / restart:.2f}" if failover and restart else "-"
        print(f"{name:40} {show(failover):>9} {show(restart):>9} {ratio:>6}")


def median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def show(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.2f}s"


if __name__ == "__main__":
    main()
