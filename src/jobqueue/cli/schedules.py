"""``schedules``: periodic jobs as data (docs/schedules.md): list, show, create,
update, delete, pause, resume and trigger them, each change one row of the audit log.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.cli.common import (
    Commands,
    UsageError,
    add_output_flags,
    client,
    key_values,
    with_jobqueue,
)
from jobqueue.cli.jobs import refuse_unrunnable
from jobqueue.cli.output import format_time, print_json, print_record, print_table
from jobqueue.model.schedule_timing import Missed, check_cron, check_zone, parse_every
from jobqueue.model.schedules import ScheduleConflict, ScheduleInfo, ScheduleNotFound
from jobqueue.schedules.control import Schedules

T = TypeVar("T")


def add_schedule_commands(commands: Commands) -> None:
    text = "periodic jobs: create, change, pause, trigger and delete them at run time"
    group = commands.add_parser("schedules", help=text, description=text)
    actions = group.add_subparsers(dest="action", required=True, metavar="COMMAND")

    listing = actions.add_parser("list", help="every schedule, with its next run")
    add_output_flags(listing)
    listing.set_defaults(run=run_list)

    get = actions.add_parser("get", help="one schedule, with its next five runs")
    add_output_flags(get)
    get.add_argument("name")
    get.set_defaults(run=run_get)

    create = actions.add_parser(
        "create",
        help="a schedule that enqueues a job at every tick",
        description="A schedule that enqueues a job of TYPE at every tick of --cron (read "
        "in --timezone) or of --every, exactly once across every process.",
    )
    add_output_flags(create)
    create.add_argument("name", help="unique: letters, digits and ._:@-")
    create.add_argument("type", help="the job type each tick enqueues")
    add_definition_flags(create, creating=True)
    create.set_defaults(run=run_create)

    update = actions.add_parser(
        "update",
        help="change a schedule; what is not given is kept",
        description="Change a schedule; a flag not given keeps its value. A changed "
        "timing starts from its next tick after now.",
    )
    add_output_flags(update)
    update.add_argument("name")
    update.add_argument("--type", help="the job type each tick enqueues")
    add_definition_flags(update, creating=False)
    update.set_defaults(run=run_update)

    for name, text in [
        ("delete", "delete a schedule; its jobs stay"),
        ("pause", "enqueue nothing until resumed; the ticks in between are skipped"),
        ("resume", "tick again, from the next tick after now"),
        ("trigger", "enqueue one job of the schedule now"),
    ]:
        command = actions.add_parser(name, help=text, description=text[0].upper() + text[1:])
        add_output_flags(command)
        command.add_argument("name")
        command.set_defaults(run=run_action, action_name=name)


def add_definition_flags(cmd: argparse.ArgumentParser, *, creating: bool) -> None:
    timing = cmd.add_mutually_exclusive_group(required=creating)
    timing.add_argument("--cron", metavar="EXPR", help='a cron expression, e.g. "0 3 * * *"')
    timing.add_argument("--every", metavar="N[smh]", help="an interval: 30s, 5m, 2h")
    cmd.add_argument("--timezone", metavar="ZONE", help="the zone --cron is read in (UTC)")
    cmd.add_argument("--payload", metavar="JSON", help="each job's payload, a JSON object")
    cmd.add_argument("--queue", help="the jobs' queue (default: the task's, else default)")
    cmd.add_argument("--priority", type=int, help="the jobs' priority (default: the task's)")
    cmd.add_argument(
        "--missed",
        choices=[m.value for m in Missed],
        help="ticks missed while nothing ran: skip (default), once, or all (at most 100)",
    )
    cmd.add_argument("--tag", action="append", metavar="TAG", help="its jobs' tags, all of them")
    cmd.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="its jobs' metadata, the whole of it"
    )
    cmd.add_argument(
        "--force",
        action="store_true",
        help="keep the schedule even if no live worker of its queue has a handler for its "
        "type and the type is not declared",
    )
    if creating:
        cmd.add_argument("--paused", action="store_true", help="create it paused")


def run_list(args: argparse.Namespace) -> int:
    found = _call(args, lambda jq: jq.schedules.list(limit=1000))
    if args.json:
        print_json([json.loads(_json(s)) for s in found])
        return 0
    rows = [
        (s.name, s.type, _timing(s), _state(s), s.source,
         format_time(s.next_run_at) if s.enabled else "-", _last(s))
        for s in found
    ]  # fmt: skip
    print_table(("NAME", "TYPE", "WHEN", "STATE", "SOURCE", "NEXT RUN", "LAST JOB"), rows,
                "no schedules")  # fmt: skip
    return 0


def run_get(args: argparse.Namespace) -> int:
    _show(args, _call(args, lambda jq: jq.schedules.get(args.name)))
    return 0


def run_create(args: argparse.Namespace) -> int:
    given = _definition(args)

    async def create(jq: JobQueue) -> ScheduleInfo:
        _check_timing(given)
        await refuse_unrunnable(
            jq, args.type, given.get("queue"), given.get("payload"), force=args.force
        )
        return await jq.schedules.create(
            args.name, args.type, by=Actor.cli(), enabled=not args.paused, **given
        )

    made = _call(args, create)
    _show(args, made, f"Schedule {made.name!r} created")
    return 0


def run_update(args: argparse.Namespace) -> int:
    given = _definition(args)
    if args.type is not None:
        given["type"] = args.type
    if not given:
        raise UsageError("name at least one thing to change (--cron, --every, --payload, ...)")

    async def update(jq: JobQueue) -> ScheduleInfo:
        _check_timing(given)
        if given.keys() & {"type", "queue", "payload"}:
            current = await jq.schedules.get(args.name)
            if current.source != "code":  # else the update says where it is defined
                await refuse_unrunnable(jq, given.get("type", current.type),
                                        given.get("queue", current.queue),
                                        given.get("payload", current.payload),
                                        force=args.force)  # fmt: skip
        return await jq.schedules.update(args.name, by=Actor.cli(), **given)

    changed = _call(args, update)
    _show(args, changed, f"Schedule {changed.name!r} updated")
    return 0


def run_action(args: argparse.Namespace) -> int:
    name, action = args.name, args.action_name
    by = Actor.cli()
    if action == "delete":
        _call(args, lambda jq: jq.schedules.delete(name, by=by))
        if args.json:
            print_json({"deleted": name})
        else:
            print(f"Schedule {name!r} deleted; its jobs stay.")
    elif action == "trigger":
        job = _call(args, lambda jq: jq.schedules.trigger(name, by=by))
        if args.json:
            print_record(job)
        else:
            print(f"Schedule {name!r} triggered: job {job.id} enqueued.")
    else:
        call = Schedules.pause if action == "pause" else Schedules.resume
        shown = _call(args, lambda jq: call(jq.schedules, name, by=by))
        _show(args, shown, f"Schedule {name!r} {action}d")
    return 0


# -- helpers ---------------------------------------------------------------------------


def _check_timing(given: dict[str, Any]) -> None:
    """The timing's flags checked before the type is: each mistake in the order the
    API names them (ValueError, naming the flag)."""
    if given.get("cron") is not None:
        check_cron(given["cron"])
    if given.get("every") is not None:
        parse_every(given["every"])
    if given.get("timezone") is not None:
        check_zone(given["timezone"])


def _call(args: argparse.Namespace, call: Callable[[JobQueue], Awaitable[T]]) -> T:
    """``call`` on the JobQueue (its schedules); its refusals as one line (UsageError)."""
    jq = client(args)

    async def migrated() -> T:
        try:
            return await call(jq)
        except asyncpg.UndefinedTableError:
            # A schema from before schedules, or none yet: schedules may come first.
            await jq.migrate()
            return await call(jq)

    try:
        return with_jobqueue(jq, migrated)
    except (ScheduleNotFound, ScheduleConflict) as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError) as exc:
        field, _, message = str(exc).partition(": ")
        raise UsageError(f"--{field.replace('_', '-')}: {message}" if message else field) from None


def _definition(args: argparse.Namespace) -> dict[str, Any]:
    given: dict[str, Any] = {
        key: getattr(args, key)
        for key in ("cron", "every", "timezone", "queue", "priority", "missed")
        if getattr(args, key) is not None
    }
    if args.payload is not None:
        try:
            payload = json.loads(args.payload)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--payload: not JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise UsageError("--payload: must be a JSON object")
        given["payload"] = payload
    if args.tag:
        given["tags"] = args.tag
    if args.meta:
        given["meta"] = key_values("--meta", args.meta)
    return given


def _show(args: argparse.Namespace, schedule: ScheduleInfo, done: str | None = None) -> None:
    if args.json:
        print(_json(schedule))
        return
    if done is not None:
        print(f"{done}.")
    payload = "{tick}" if schedule.payload is None else json.dumps(schedule.payload)
    fields = {
        "name": schedule.name, "type": schedule.type, "when": _timing(schedule),
        "payload": payload, "queue": schedule.queue or "(the task's, else default)",
        "priority": "(the task's)" if schedule.priority is None else str(schedule.priority),
        "tags": ", ".join(schedule.tags) or "-", "meta": json.dumps(schedule.meta),
        "missed": schedule.missed, "state": _state(schedule), "source": schedule.source,
        "next runs": ", ".join(format_time(t) for t in schedule.next_runs) or "-",
        "last job": _last(schedule),
    }  # fmt: skip
    for key, value in fields.items():
        print(f"{key:>9}: {value}")


def _json(schedule: ScheduleInfo) -> str:
    from jobqueue.encoding import to_json

    return to_json(schedule).decode()


def _timing(s: ScheduleInfo) -> str:
    return f"every {s.every}" if s.every else f"{s.cron} ({s.timezone})"


def _state(s: ScheduleInfo) -> str:
    return "active" if s.enabled else "paused"


def _last(s: ScheduleInfo) -> str:
    if s.last_job is None:
        return "-"
    return f"{s.last_job.id} ({s.last_job.status or 'gone'})"
