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


def test_a_worker_without_tracing_in_use_never_imports_opentelemetry() -> None:
    """OpenTelemetry is installed here (the `otel` extra), yet a worker whose process has
    not loaded it, under the default JOBQUEUE_TRACING=auto, builds its attempt observers
    and records enqueues without importing it; JOBQUEUE_TRACING=on does import it."""
    import subprocess
    import sys

    code = (
        "import importlib.metadata, sys, jobqueue, jobqueue.cli, jobqueue.worker, jobqueue.demo\n"
        "from jobqueue.config import load\n"
        "from jobqueue.observability import observers, trace_context\n"
        "assert importlib.metadata.version('opentelemetry-sdk')\n"
        "settings = load({'JOBQUEUE_TRACING': sys.argv[1]})\n"
        "found = observers(settings, jobqueue.demo.jq.tasks, worker_id='w')\n"
        "recorded = trace_context.recorded()\n"
        "print(','.join(type(o).__name__ for o in found), recorded, 'opentelemetry' in sys.modules)"
    )

    def run(mode: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", code, mode], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    # Lifecycle: the info log events (observability/lifecycle.py), never OpenTelemetry.
    assert run("auto") == "Lifecycle None False"
    assert run("off") == "Lifecycle None False"
    assert run("on") == "Tracing,Lifecycle None True"
