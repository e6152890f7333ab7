"""`jobqueue types` against a real `jobqueue serve`: a type declared from the command
line, with a payload schema from a file, is accepted by POST /jobs and `jobqueue
enqueue` with no worker that runs it, and its payloads are held to the schema; bad
input is one line and exit 2, with nothing stored."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from tests.conftest import Spawn, jobqueue

SCHEMA = {
    "type": "object",
    "required": ["path"],
    "properties": {"path": {"type": "string"}, "width": {"type": "integer", "minimum": 1}},
}


def test_declared_from_the_command_line_and_held_to_its_schema(
    env: dict[str, str], spawn: Spawn, tmp_path: Path
) -> None:
    server = spawn(["serve"], env, name="serve")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    resize = {"type": "resize", "queue": "images", "payload": {"path": "a.png", "width": 2}}
    assert httpx.post(f"{base}/jobs", json=resize).status_code == 422  # nothing runs it

    schema_file = tmp_path / "resize.json"
    schema_file.write_text(json.dumps(SCHEMA))
    added = jobqueue(env, "types", "add", "resize", "--payload-schema", str(schema_file))
    assert (added.returncode, added.stdout) == (
        0,
        "Type 'resize' declared: checked by its schema.\n",
    )
    # The API process sees it within a second (jobqueue.job_types.REFRESH_SECONDS).
    deadline = time.monotonic() + 5
    while (accepted := httpx.post(f"{base}/jobs", json=resize)).status_code != 201:
        assert accepted.status_code == 422, accepted.text
        assert time.monotonic() < deadline, "the declared type was never accepted"
        time.sleep(0.1)
    off = httpx.post(f"{base}/jobs", json={**resize, "payload": {"width": "2"}})
    assert off.status_code == 422
    assert [(e["field"], e["msg"]) for e in off.json()["detail"]] == [
        ("payload", "'path' is a required property"),
        ("payload.width", "'2' is not of type 'integer'"),
    ]

    by_cli = jobqueue(env, "enqueue", "resize", '{"path": "b.png"}', "--queue", "images")
    assert by_cli.returncode == 0, by_cli.stderr
    refused = jobqueue(env, "enqueue", "resize", '{"path": 3}', "--queue", "images")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "jobqueue: error: payload.path: 3 is not of type 'string'\n"

    listed = json.loads(jobqueue(env, "types", "list", "--json").stdout)
    assert [(t["name"], t["payload_schema"]) for t in listed] == [("resize", SCHEMA)]
    removed = jobqueue(env, "types", "remove", "resize")
    assert (removed.returncode, removed.stdout) == (0, "Type 'resize' removed; its jobs stay.\n")
    jobs = httpx.get(f"{base}/jobs?type=resize").json()["jobs"]
    assert [(j["status"], j["payload"]) for j in jobs] == [
        ("pending", {"path": "b.png"}),
        ("pending", {"path": "a.png", "width": 2}),
    ]
    assert server.stop() == 0


def test_bad_input_is_one_line_and_exit_2(env: dict[str, str], tmp_path: Path) -> None:
    not_json = tmp_path / "schema.json"
    not_json.write_text("{type: object}")
    a_list = tmp_path / "list.json"
    a_list.write_text("[1]")
    for args, message in [
        (["--payload-schema", str(not_json)], f"--payload-schema: {not_json} is not JSON: "),
        (["--payload-schema", str(tmp_path / "none.json")], "--payload-schema: cannot read "),
        (["--payload-schema", str(a_list)], f"--payload-schema: {a_list} must hold a JSON object"),
        (["--payload-schema", "-"], "--payload-schema: standard input is not JSON"),
    ]:
        r = jobqueue(env, "types", "add", "resize", *args)
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        assert r.stderr.startswith(f"jobqueue: error: {message}"), r.stderr
        assert r.stderr.count("\n") == 1
    not_schema = tmp_path / "bad.json"
    not_schema.write_text('{"type": "whole number"}')
    r = jobqueue(env, "types", "add", "resize", "--payload-schema", str(not_schema))
    assert (r.returncode, r.stderr) == (
        2,
        "jobqueue: error: --payload-schema: not a JSON Schema at type: "
        "'whole number' is not valid under any of the given schemas\n",
    )
    gone = jobqueue(env, "types", "remove", "resize")
    assert (gone.returncode, gone.stderr) == (
        2,
        "jobqueue: error: no type is declared as 'resize'\n",
    )
    assert jobqueue(env, "types", "list").stdout == "no declared types\n"
