"""The ready-made operations files: the Prometheus alert rules pass `promtool check
rules`; the Grafana dashboard is one that Grafana imports. (That every metric they
query exists is checked against a real scrape, in tests/acceptance/test_metrics.py.)"""

from __future__ import annotations

import json
import subprocess

from tests.conftest import ROOT

ALERTS = ROOT / "examples" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "examples" / "grafana" / "jobqueue.json"


def test_the_alert_rules_pass_promtool() -> None:
    done = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout


def test_the_dashboard_queries_prometheus_through_its_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert "jobqueue_" in target["expr"], panel["title"]
