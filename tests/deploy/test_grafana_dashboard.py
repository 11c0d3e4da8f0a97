"""deploy/grafana: the dashboard is valid JSON that Grafana imports (panels with unique ids, targets with
PromQL), every expression parses (`promtool check rules`, as recording rules) and names only metrics that
`core.metrics` defines."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.metric_names import EXPOSED, names_in
from tests.support import prometheus_tools

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "jobmesh-dashboard.json"
# Grafana's own variables, as Prometheus would see them once Grafana has put their values in.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$queue": ".*"}


def targets() -> list[tuple[str, str]]:
    """(panel title, expression) of every target."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(panel["title"], target["expr"]) for panel in panels for target in panel["targets"]]


def as_prometheus_sees_it(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"]
    assert dashboard["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        assert {"h", "w", "x", "y"} <= panel["gridPos"].keys()
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    used = {word for _, expr in targets() for word in GRAFANA_VARIABLES if word in expr}
    assert {word.removeprefix("$") for word in used if not word.startswith("$__")} <= variables


def test_it_shows_what_an_operator_asks() -> None:
    """Is it on time (the lateness p99), where is it stuck (the backlog), is anything connected."""
    exprs = " ".join(expr for _, expr in targets())
    assert "histogram_quantile(0.99, sum by (queue, le) (rate(jobmesh_run_lateness_seconds_bucket" in exprs
    for name in (
        "jobmesh_runs_waiting_oldest_seconds",
        "jobmesh_executors_connected",
        "jobmesh_watcher_leading",
    ):
        assert name in exprs


def test_every_expression_names_metrics_that_exist() -> None:
    for title, expr in targets():
        named = names_in(expr)
        assert named, (title, expr)
        assert named <= EXPOSED, (title, named - EXPOSED)


@pytest.mark.processes
def test_every_expression_parses(tmp_path: Path) -> None:
    rules = [
        {"record": f"jobmesh:dashboard_target_{index}", "expr": as_prometheus_sees_it(expr)}
        for index, (_, expr) in enumerate(targets())
    ]
    path = tmp_path / "dashboard-exprs.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(
        [str(prometheus_tools() / "promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
