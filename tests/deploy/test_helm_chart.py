"""The Helm chart in deploy/helm/jobmesh, rendered by the pinned helm (tools/install_helm.sh): `helm lint
--strict` passes with the defaults and with every option on; the rendered objects are the mesh (a server,
watchers, executors, Envoy, the migration Job); every process is probed on its health port, which the scrape
settings name; every flag and JOBMESH_* variable a container is given is one that processes/settings.py
takes for that command, with a value its parser accepts; every file a setting names lies in a mounted
Secret holding that key; and Envoy's config, made from deploy/envoy/dashboard.yaml, validates."""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobmesh.processes import setting_parsers, settings
from tests.acceptance.processes import BIN, REPO
from tests.support import missing
from tests.support_certificates import CertificateAuthority

pytestmark = pytest.mark.processes

CHART = REPO / "deploy" / "helm" / "jobmesh"
HELM = REPO / ".jobmesh" / "tools" / "bin" / "helm"
RELEASE = "mesh"
FULLNAME = f"{RELEASE}-jobmesh"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]

# Every option on: TLS with executors on mutual TLS, tokens and JWT keys, the Prometheus Operator's monitor.
EVERYTHING = {
    "tls.enabled": "true",
    "tls.serverSecret": "jobmesh-server-tls",
    "tls.executorSecret": "jobmesh-executor-tls",
    "auth.enabled": "true",
    "auth.tokenHashes": "hashes",
    "auth.executorToken": "token",
    "auth.jwksSecret": "jobmesh-jwks",
    "auth.jwtIssuer": "https://issuer.example",
    "auth.jwtAudience": "jobmesh",
    "metrics.podMonitor.enabled": "true",
    "executor.allowedCommands": "{/usr/bin/*,/opt/jobs/**}",
}

# Parsers that read the file system: a path in the manifests names a file in the pod, not here.
LOCAL = {
    setting_parsers.readable_file,
    setting_parsers.existing_file,
    setting_parsers.existing_files,
    setting_parsers.secret_source,
    setting_parsers.user,
}
# Parsers of a setting that names one file.
FILES = {setting_parsers.readable_file, setting_parsers.existing_file}


def helm(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    if not HELM.is_file():
        missing(f"{HELM} is missing: `make install` builds it (tools/install_helm.sh)")
    return subprocess.run(
        [str(HELM), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd
    )


def render(values: dict[str, str] | None = None) -> list[dict[str, Any]]:
    sets = [f"--set={name}={value}" for name, value in (values or {}).items()]
    done = helm("template", RELEASE, str(CHART), "--namespace", "jobs", *sets)
    assert done.returncode == 0, done.stderr[-3000:]
    return [item for item in yaml.safe_load_all(done.stdout) if item]


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module")
def everything() -> list[dict[str, Any]]:
    return render(EVERYTHING)


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def pods(objects: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(object, pod template) of each workload."""
    for item in objects:
        if item["kind"] in ("Deployment", "Job"):
            yield item, item["spec"]["template"]


def containers(objects: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) of each container of the mesh's own command."""
    for _, template in pods(objects):
        for container in template["spec"]["containers"]:
            if container["command"] == ["jobmesh"]:
                yield template["spec"], container


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item for item in container.get("env", [])}


def test_helm_is_the_pinned_version() -> None:
    pinned = next(
        line.split("=", 1)[1]
        for line in (REPO / "tools" / "install_helm.sh").read_text().splitlines()
        if line.startswith("HELM=")
    )
    done = helm("version", "--template", "{{.Version}}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == pinned


@pytest.mark.parametrize("values", [{}, EVERYTHING], ids=["defaults", "everything"])
def test_helm_lint_strict_passes(values: dict[str, str]) -> None:
    sets = [f"--set={name}={value}" for name, value in values.items()]
    done = helm("lint", "--strict", str(CHART), *sets)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "0 chart(s) failed" in done.stdout


def test_the_defaults_render_the_whole_mesh(default: list[dict[str, Any]]) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in default}
    assert kinds == {
        ("Deployment", f"{FULLNAME}-server"),
        ("Deployment", f"{FULLNAME}-watcher"),
        ("Deployment", f"{FULLNAME}-executor"),
        ("Deployment", f"{FULLNAME}-envoy"),
        ("Service", f"{FULLNAME}-server"),
        ("Service", f"{FULLNAME}-envoy"),
        ("ConfigMap", f"{FULLNAME}-envoy"),
        ("Secret", f"{FULLNAME}-connections"),
        ("Job", f"{FULLNAME}-migrate"),
        ("PodDisruptionBudget", f"{FULLNAME}-server"),
        ("PodDisruptionBudget", f"{FULLNAME}-watcher"),
        ("PodDisruptionBudget", f"{FULLNAME}-executor"),
    }
    commands = {c["args"][0] for _, c in containers(default)}
    assert commands == {"server", "watcher", "executor", "migrate"}
    assert find(default, "Deployment", f"{FULLNAME}-watcher")["spec"]["replicas"] >= 2
    every = {(o["kind"], o["metadata"]["name"]) for o in render(EVERYTHING)} - kinds
    assert every == {
        ("Secret", f"{FULLNAME}-token-hashes"),
        ("Secret", f"{FULLNAME}-executor-token"),
        ("PodMonitor", FULLNAME),
    }


def test_options_reach_the_processes() -> None:
    objects = render(
        {"server.workers": "3", "watcher.replicas": "4", "server.replicas": "1", "image.tag": "1.2.3"}
    )
    server = find(objects, "Deployment", f"{FULLNAME}-server")
    args = server["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--workers") + 1] == "3"
    assert find(objects, "Deployment", f"{FULLNAME}-watcher")["spec"]["replicas"] == 4
    images = {c["image"] for _, t in pods(objects) for c in t["spec"]["containers"]}
    assert images == {"jobmesh:1.2.3"}
    budgets = {o["metadata"]["name"] for o in objects if o["kind"] == "PodDisruptionBudget"}
    assert budgets == {f"{FULLNAME}-watcher", f"{FULLNAME}-executor"}, "one server: nothing to keep up"
    without = render({"metrics.annotations": "false"})
    assert not [t for _, t in pods(without) if "prometheus.io/scrape" in t["metadata"].get("annotations", {})]


def test_every_image_is_the_charts_version(default: list[dict[str, Any]]) -> None:
    images = {c["image"] for _, t in pods(default) for c in t["spec"]["containers"]}
    assert images == {f"jobmesh:{APP_VERSION}"}


def test_the_migration_runs_before_install_and_upgrade_with_its_urls_there_first(
    default: list[dict[str, Any]],
) -> None:
    job = find(default, "Job", f"{FULLNAME}-migrate")
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert (container["command"], container["args"]) == (["jobmesh"], ["migrate"])
    hooks = job["metadata"]["annotations"]
    assert set(hooks["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    secret = find(default, "Secret", f"{FULLNAME}-connections")["metadata"]["annotations"]
    assert set(secret["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert int(secret["helm.sh/hook-weight"]) < int(hooks["helm.sh/hook-weight"])


@pytest.mark.parametrize("which", ["default", "everything"])
def test_every_flag_and_variable_is_a_setting_of_its_command(
    which: str, request: pytest.FixtureRequest
) -> None:
    assert check_settings(request.getfixturevalue(which)) > 20


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"server.env.JOBMESH_NO_SUCH_SETTING": "1"}, AssertionError),
        ({"watcher.env.JOBMESH_CONCURRENCY": "4"}, AssertionError),  # an executor's setting
        ({"server.env.JOBMESH_MAX_LOOP_LAG": "soon"}, ValueError),
        ({"server.workers": "0"}, ValueError),
    ],
    ids=["unknown", "another-command's", "bad-duration", "no-workers"],
)
def test_the_check_catches_what_a_process_would_refuse(
    values: dict[str, str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        check_settings(render(values))


def check_settings(objects: list[dict[str, Any]]) -> int:
    """Asserts that each jobmesh container's flags and variables are its command's settings, and parses each
    value as the process would; returns how many were checked."""
    checked = 0
    for _, container in containers(objects):
        command, *args = container["args"]
        assert command in settings.COMMANDS
        known = settings.settings_of(command)
        by_flag = {setting.flag: setting for setting in known}
        by_variable = {name: setting for setting in known for name in setting.variables}
        for index, arg in enumerate(args):
            if arg.startswith("--"):
                assert arg in by_flag, f"`jobmesh {command}` takes no {arg}"
                check_value(by_flag[arg].parse, args[index + 1])
                checked += 1
        for name, item in env_of(container).items():
            assert name in by_variable, f"`jobmesh {command}` reads no {name}"
            if "value" in item:
                check_value(by_variable[name].parse, item["value"])
            checked += 1
    return checked


def check_value(parse: Callable[[str], object], value: str) -> None:
    if parse not in LOCAL:
        parse(value)  # raises ValueError on what the process would refuse


@pytest.mark.parametrize("which", ["default", "everything"])
def test_each_process_is_probed_and_scraped_on_its_health_port(
    which: str, request: pytest.FixtureRequest
) -> None:
    objects: list[dict[str, Any]] = request.getfixturevalue(which)
    probed = set()
    for _, template in pods(objects):
        for container in template["spec"]["containers"]:
            if container["command"] != ["jobmesh"] or container["args"][0] == "migrate":
                continue
            listen = env_of(container)["JOBMESH_HEALTH_LISTEN"]["value"]
            port = int(listen.rsplit(":", 1)[1])
            assert listen.startswith("0.0.0.0:"), "the kubelet probes the pod's address"
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            assert ports["health"] == port
            for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
                assert container[probe]["httpGet"] == {"path": path, "port": "health"}
            assert container["startupProbe"]["httpGet"]["port"] == "health"
            annotations = template["metadata"]["annotations"]
            assert annotations["prometheus.io/scrape"] == "true"
            assert int(annotations["prometheus.io/port"]) == port
            assert annotations["prometheus.io/path"] == "/metrics"
            assert container["resources"]["requests"]
            assert container["resources"]["limits"]
            probed.add(container["args"][0])
    assert probed == {"server", "watcher", "executor"}
    if which == "everything":
        monitor = find(objects, "PodMonitor", FULLNAME)
        assert monitor["spec"]["podMetricsEndpoints"][0] == {
            "port": "health",
            "path": "/metrics",
            "interval": "30s",
        }


def test_every_file_a_setting_names_is_a_key_of_a_mounted_secret(everything: list[dict[str, Any]]) -> None:
    secrets = {o["metadata"]["name"]: o for o in everything if o["kind"] == "Secret"}
    files = 0
    for spec, container in containers(everything):
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        mounts = {Path(m["mountPath"]): m for m in container.get("volumeMounts", [])}
        command = container["args"][0]
        by_variable = {n: s for s in settings.settings_of(command) for n in s.variables}
        for name, item in env_of(container).items():
            if by_variable[name].parse not in FILES:
                continue
            path = Path(item["value"])
            assert path.parent in mounts, f"{name}={path} is in no mounted folder"
            mount = mounts[path.parent]
            assert mount.get("readOnly") is True
            secret = volumes[mount["name"]]["secret"]
            keys = [entry["key"] for entry in secret.get("items", [])] or [path.name]
            assert path.name in keys, f"{name}: {path.name} is not among {keys}"
            if secret["secretName"] in secrets:  # made by the chart: the key is there
                made = secrets[secret["secretName"]]
                assert path.name in made.get("stringData", made.get("data", {}))
            files += 1
        for item in env_of(container).values():
            if reference := item.get("valueFrom", {}).get("secretKeyRef"):
                assert reference["key"] in secrets[reference["name"]]["stringData"]
    # server: certificate, key, client CA, token hashes, JWKS; executor: CA, certificate, key, token.
    assert files == 9


def test_a_missing_certificate_secret_stops_the_render() -> None:
    done = helm("template", RELEASE, str(CHART), "--set", "tls.enabled=true")
    assert done.returncode != 0
    assert "tls.enabled needs tls.serverSecret" in done.stderr


def test_envoys_config_is_the_checked_in_one_pointed_at_the_server_and_validates(tmp_path: Path) -> None:
    objects = render({"envoy.webRoot": str(REPO), "envoy.hosts": "{jobs.example.com}"})
    config = yaml.safe_load(find(objects, "ConfigMap", f"{FULLNAME}-envoy")["data"]["dashboard.yaml"])
    checked_in = yaml.safe_load((REPO / "deploy" / "envoy" / "dashboard.yaml").read_text())
    routes = _routes(config)
    assert [route["match"] for route in routes] == [route["match"] for route in _routes(checked_in)]
    [cluster] = config["static_resources"]["clusters"]
    [[endpoint]] = [e["lb_endpoints"] for e in cluster["load_assignment"]["endpoints"]]
    service = find(objects, "Service", f"{FULLNAME}-server")
    assert endpoint["endpoint"]["address"]["socket_address"] == {
        "address": service["metadata"]["name"],
        "port_value": service["spec"]["ports"][0]["port"],
    }
    [host, _refused] = _manager(config)["route_config"]["virtual_hosts"]
    assert host["domains"] == ["jobs.example.com:8080", "jobs.example.com"]
    validate_envoy(config, tmp_path)


def validate_envoy(config: dict[str, Any], folder: Path) -> None:
    path = folder / "dashboard.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [str(BIN / "envoy"), "--mode", "validate", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_with_tls_envoy_verifies_the_server_by_its_service_name(tmp_path: Path) -> None:
    everything = render({**EVERYTHING, "envoy.webRoot": str(REPO)})
    config = yaml.safe_load(find(everything, "ConfigMap", f"{FULLNAME}-envoy")["data"]["dashboard.yaml"])
    [cluster] = config["static_resources"]["clusters"]
    context = cluster["transport_socket"]["typed_config"]
    assert context["sni"] == f"{FULLNAME}-server"
    validation = context["common_tls_context"]["validation_context"]
    assert validation["match_typed_subject_alt_names"] == [
        {"san_type": "DNS", "matcher": {"exact": f"{FULLNAME}-server"}}
    ]
    envoy = find(everything, "Deployment", f"{FULLNAME}-envoy")["spec"]["template"]["spec"]
    ca = Path(validation["trusted_ca"]["filename"])
    [mount] = [m for m in envoy["containers"][0]["volumeMounts"] if m["mountPath"] == str(ca.parent)]
    [volume] = [v for v in envoy["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == EVERYTHING["tls.serverSecret"]
    assert [item["path"] for item in volume["secret"]["items"]] == [ca.name]
    # Valid for Envoy, with a CA where the pod has its Secret.
    validation["trusted_ca"]["filename"] = str(CertificateAuthority().write(tmp_path / ca.name))
    validate_envoy(config, tmp_path)


def _manager(config: dict[str, Any]) -> dict[str, Any]:
    [listener] = config["static_resources"]["listeners"]
    manager: dict[str, Any] = listener["filter_chains"][0]["filters"][0]["typed_config"]
    return manager


def _routes(config: dict[str, Any]) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = _manager(config)["route_config"]["virtual_hosts"][0]["routes"]
    return routes


def test_the_readmes_install_command_renders_and_names_only_real_values(tmp_path: Path) -> None:
    """The README's `helm install`, run as `helm template` (files of its `--set-file`s made here); every
    value the README names is one of values.yaml's."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n### With Helm\n", 1)[1].split("\n### ", 1)[0]
    command = re.search(r"^helm install .*?[^\\]$", section, re.M | re.S)
    assert command is not None
    words = shlex.split(command.group(0).replace("\\\n", " "))
    assert words[:4] == ["helm", "install", "jobmesh", "deploy/helm/jobmesh"]
    for option, value in itertools.pairwise(words):
        if option == "--set-file":
            (tmp_path / value.split("=", 1)[1]).write_text("content\n")
    done = helm("template", words[2], str(CHART), *words[4:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    objects = [item for item in yaml.safe_load_all(done.stdout) if item]
    server = find(objects, "Deployment", "jobmesh-server")["spec"]["template"]["spec"]["containers"][0]
    assert {"JOBMESH_TLS_CERT", "JOBMESH_AUTHENTICATION"} <= set(env_of(server))
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    named = set(re.findall(rf"`((?:{'|'.join(values)})\.[\w.]+)`", section))
    named |= {word.split("=", 1)[0] for word in words if re.match(r"^[a-z]\w*\.[\w.]+=", word)}
    assert len(named) > 10
    for name in sorted(named):
        node: Any = values
        for part in name.split("."):
            assert isinstance(node, dict), name
            assert part in node, f"the README names {name}, not in values.yaml"
            node = node[part]


def test_the_notes_say_where_the_health_endpoints_and_the_dashboard_are() -> None:
    done = helm(
        "install", RELEASE, str(CHART), "--dry-run=client", "--namespace", "jobs", "--set", "healthPort=9100"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    notes = done.stdout.split("\nNOTES:\n", 1)[1]
    assert f"port-forward deploy/{FULLNAME}-server 9100" in notes
    assert f"port-forward svc/{FULLNAME}-envoy 8080" in notes
    assert "WARNING: the server serves plaintext" in notes
    secure = helm(
        "install", RELEASE, str(CHART), "--dry-run=client", *[f"--set={k}={v}" for k, v in EVERYTHING.items()]
    )
    assert "WARNING" not in secure.stdout.split("\nNOTES:\n", 1)[1]
