"""`patchit worker [--once]`: heal what the Airflow callback and `patchit airflow scan` spooled."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click

from patchit.cli.context import home_of, say, say_text


@click.command("worker")
@click.option("--once", is_flag=True, help="Exit when the spool is empty.")
@click.option(
    "--poll-s", type=float, default=2.0, show_default=True, help="Sleep between empty polls."
)
@click.option(
    "--batch-size", type=int, default=50, show_default=True, help="Events claimed at a time."
)
@click.pass_context
def worker(ctx: click.Context, once: bool, poll_s: float, batch_size: int) -> None:
    """Take spooled events, group them into incidents and heal them.

    With --once, exit when the spool is empty: 0, or 1 if an event could not be processed
    (it stays in the spool marked `bad`, with the reason). Without it, poll until SIGTERM or
    SIGINT, then finish the current batch and exit 0.
    """
    stopping: list[int] = []

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        say(f"signal {signum}: stopping after the current batch")

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        from patchit.worker.worker import Worker  # loads the loop: only when the worker runs

        runner = Worker(home_of(ctx), say=say_text, batch_size=batch_size)
        stats = runner.run(once=once, poll_s=poll_s, stop=lambda: bool(stopping))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    click.echo(
        f"processed {stats.processed} event(s), {stats.bad} bad, {len(stats.incidents)} incident(s)"
    )
    sys.exit(1 if once and stats.bad else 0)
