"""deploy/prometheus: the alert rules are valid (`promtool check rules`), each has a unit test in which it
fires (and `promtool test rules` passes them all), and they read only metrics that jobmesh serves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.metric_names import EXPOSED, names_in
from tests.support import prometheus_tools

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "jobmesh-alerts.yml"
RULE_TESTS = RULES_DIR / "jobmesh-alerts.test.yml"
ALERTS = (
    "JobmeshRunsLate",
    "JobmeshBacklogOld",
    "JobmeshNoWatcherLease",
    "JobmeshNoExecutors",
    "JobmeshDeadLettersRising",
)


def rules() -> list[dict[str, object]]:
    loaded = yaml.safe_load(RULES.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def test_the_issues_alerts_are_all_there() -> None:
    assert [rule["alert"] for rule in rules()] == list(ALERTS)
    late = next(rule for rule in rules() if rule["alert"] == "JobmeshRunsLate")
    assert "histogram_quantile(0.99" in str(late["expr"])
    assert "> 2" in str(late["expr"])
    assert late["for"] == "5m"


def test_rules_read_only_metrics_that_exist() -> None:
    for rule in rules():
        named = names_in(str(rule["expr"]))
        assert named, rule["alert"]
        assert named <= EXPOSED, (rule["alert"], named - EXPOSED)


def test_every_rule_has_a_unit_test_where_it_fires_and_one_where_it_does_not() -> None:
    cases = [
        case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"] for case in test["alert_rule_test"]
    ]
    for alert in ALERTS:
        mine = [case for case in cases if case["alertname"] == alert]
        assert any(case["exp_alerts"] for case in mine), f"no test where {alert} fires"
        assert any(not case["exp_alerts"] for case in mine), f"no test where {alert} stays quiet"


@pytest.mark.processes
def test_promtool_checks_and_unit_tests_the_rules() -> None:
    promtool = str(prometheus_tools() / "promtool")
    checked = subprocess.run(
        [promtool, "check", "rules", RULES.name], cwd=RULES_DIR, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name],
        cwd=RULES_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


@pytest.mark.processes
def test_promtool_unit_tests_fail_on_a_broken_rule(tmp_path: Path) -> None:
    """The unit tests catch a rule that no longer fires: the lateness threshold moved to 20 s fails them."""
    broken = RULES.read_text().replace(") > 2\n", ") > 20\n")
    assert broken != RULES.read_text()
    (tmp_path / RULES.name).write_text(broken)
    (tmp_path / RULE_TESTS.name).write_text(RULE_TESTS.read_text())
    tested = subprocess.run(
        [str(prometheus_tools() / "promtool"), "test", "rules", RULE_TESTS.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode != 0
    assert "JobmeshRunsLate" in tested.stdout + tested.stderr
