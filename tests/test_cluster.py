"""`reportgen build --scheduler`: one task per (model, step) on a real Dask LocalCluster of two
worker processes, the store shared through a URL; the site equals the in-process build's byte
for byte; a rebuild sends nothing to the cluster; options that cannot work are one line."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from cluster_fixture import BUILD, BUILD_DATE, computed, reference, run, trained_models, tree

MARKER = ".reportgen-site.json"


def assert_same_site(built: dict[str, bytes], expected: dict[str, bytes]) -> None:
    """Every file byte for byte; the site marker by the files it lists, each with its sha256
    (which covers every other file's bytes)."""
    assert sorted(built) == sorted(expected)
    differ = [name for name in expected if name != MARKER and built[name] != expected[name]]
    assert differ == [], _first_difference(built, expected, differ)
    assert json.loads(built[MARKER])["files"] == json.loads(expected[MARKER])["files"]


def _first_difference(built, expected, differ) -> str:
    import difflib

    name = differ[0]
    try:
        lines = difflib.unified_diff(expected[name].decode().splitlines(),
                                     built[name].decode().splitlines(), lineterm="", n=0)
        return f"{name}:\n" + "\n".join(list(lines)[:12])
    except UnicodeDecodeError:
        return f"{name} (binary) differs"


@pytest.fixture
def s3(monkeypatch):
    """A bucket on a local S3-compatible server; the build's processes reach it through the
    environment (AWS_ENDPOINT_URL)."""
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    pytest.importorskip("s3fs", reason="s3fs is not installed")
    from s3_server import start_s3

    endpoint, stop = start_s3(server_module)
    settings = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    import boto3

    boto3.client("s3").create_bucket(Bucket="reportgen")
    yield settings
    stop()


@pytest.mark.slow
def test_a_cluster_build_with_the_store_on_s3_equals_the_in_process_build(
        tmp_path, tmp_path_factory, s3):
    expected, reference_output = reference(tmp_path_factory)
    models = trained_models(tmp_path_factory)
    args = (*BUILD, "--scheduler", "local:2", "--cache-dir", "s3://reportgen/cache")

    proc = run(tmp_path, models, *args, **s3)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "2 workers" in out
    assert "build on the cluster: 4/4 step" in out and "Tiny_A 2/2 · Tiny_B 2/2" in out
    assert computed(out) == computed(reference_output) > 0
    assert_same_site(tree(tmp_path / "site"), expected)

    # everything stored: the plan sends no task, and the site is left as it was
    again = run(tmp_path, models, *args, **s3)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    assert "Nothing to compute on the cluster" in out and "build on the cluster" not in out
    assert computed(out) == 0 and "up to date" in out
    assert_same_site(tree(tmp_path / "site"), expected)


@pytest.mark.slow
def test_an_in_process_build_on_a_memory_store_equals_the_disk_build(
        tmp_path, tmp_path_factory, monkeypatch):
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build

    expected, reference_output = reference(tmp_path_factory)
    monkeypatch.chdir(tmp_path)
    for name, value in BUILD_DATE.items():
        monkeypatch.setenv(name, value)
    options = dict(steps="last", images="test:0", eval_images=10,
                   techniques=("predictions", "conv_kernels", "routing_entropy"),
                   cache_dir=f"memory://reportgen-{uuid.uuid4().hex}/cache")
    catalog = Catalog(trained_models(tmp_path_factory))
    summary = build(catalog, BuildOptions(**options))
    assert summary.ok and summary.computed == computed(reference_output)
    assert_same_site(tree(tmp_path / "site"), expected)
    assert build(catalog, BuildOptions(**options)).computed == 0


@pytest.mark.parametrize("args, message", [
    (("--scheduler", "local:0"), "Invalid --scheduler. Expected local:N with N >= 1"),
    (("--scheduler", "http://host:8786"), "Expected tcp://HOST:PORT"),
    (("--scheduler", "local:2", "--cache-dir", "memory://x/cache"),
     "lives in this process only; cluster workers cannot write into it"),
])
@pytest.mark.slow
def test_a_scheduler_that_cannot_work_is_one_line_before_any_model_loads(
        tmp_path, tmp_path_factory, monkeypatch, args, message):
    from reportgen.cli import main

    monkeypatch.chdir(tmp_path)
    models = trained_models(tmp_path_factory)
    result = CliRunner().invoke(main, ["--models-dir", str(models), "build", *args])
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("Error:")]
    assert message in line
    assert not (tmp_path / "site").exists()
