"""What a worker process costs in memory: the modules it imports."""

from __future__ import annotations


def test_a_worker_process_loads_neither_pydantic_nor_the_http_stack() -> None:
    """What a `jobqueue worker` process imports; pydantic alone costs ~10 MiB each.
    Nor prometheus-client: only a process that exports metrics loads it."""
    import subprocess
    import sys

    code = (
        "import sys, jobqueue, jobqueue.cli, jobqueue.worker, jobqueue.demo\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'pydantic', 'fastapi', 'starlette', 'uvicorn', 'prometheus_client'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
