"""``gpumosaic extender``: user mistakes are one line and exit code 2, never a traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app


def _capture_server(monkeypatch) -> dict:
    """Stand in for uvicorn's server: what the command would serve, without serving it
    (the command binds its own socket and hands it to ``uvicorn.Server.run``)."""
    import uvicorn

    served: dict = {}

    def run(server, sockets=None) -> None:  # type: ignore[no-untyped-def]
        config = server.config
        served.update(
            app=config.app,
            host=config.host,
            port=config.port,
            ssl_certfile=config.ssl_certfile,
            ssl_keyfile=config.ssl_keyfile,
            bound=[sock.getsockname()[1] for sock in sockets or []],
        )

    monkeypatch.setattr(uvicorn.Server, "run", run)
    return served


def _run(*args: str):
    # Any free port unless the test names one: the extender binds before it builds
    # anything, and two tests (or two test workers) must not meet on the default 8888.
    port = [] if "--port" in args else ["--port", "0"]
    return CliRunner().invoke(app, ["extender", *port, *args])


def test_tls_needs_both_files() -> None:
    out = _run("--cluster", "v100:2", "--tls-cert", "cert.pem")
    assert out.exit_code == 2 and "give both --tls-cert and --tls-key" in out.output


def test_unknown_placement_is_named(tmp_path) -> None:
    out = _run("--cluster", "v100:2", "--db", str(tmp_path / "s.db"), "--placement", "fgdd")
    assert out.exit_code == 2 and "unknown placement" in out.output and "fgdd" in out.output


def test_no_api_server_points_to_the_standalone_mode(tmp_path) -> None:
    out = _run("--kubeconfig", str(tmp_path / "none"))
    assert out.exit_code == 2 and "use --cluster for the standalone mode" in out.output


def test_a_state_database_keeps_its_cluster(tmp_path) -> None:
    from gpumosaic.apps.extender.sqlite_store import SqliteBackend
    from gpumosaic.workloads.spec import parse_cluster

    SqliteBackend(parse_cluster("v100:2"), tmp_path / "s.db", "v100:2").close()
    out = _run("--cluster", "t4:2", "--db", str(tmp_path / "s.db"))
    assert out.exit_code == 2 and "belongs to --cluster 'v100:2'" in out.output


def test_a_missing_extra_is_named(monkeypatch) -> None:
    import gpumosaic.cli.extender as command

    def import_module(name: str):
        raise ImportError(name)

    monkeypatch.setattr(command.importlib, "import_module", import_module)
    out = _run("replay")
    assert out.exit_code == 2 and "needs the 'kube' extra (fastapi is not installed)" in out.output


@pytest.mark.slow
def test_serve_builds_the_standalone_extender_with_tls(tmp_path, monkeypatch) -> None:
    """The command wires flags through to uvicorn; the app it built answers the verbs."""
    from extender_builders import args, v1_pod
    from fastapi.testclient import TestClient

    served = _capture_server(monkeypatch)
    out = _run(
        "--cluster", "v100:2", "--db", str(tmp_path / "s.db"), "--placement", "pwr",
        "--tls-cert", "c.pem", "--tls-key", "k.pem", "--port", "9443", "--url-prefix", "x",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert (served["ssl_certfile"], served["ssl_keyfile"], served["port"]) == (
        "c.pem",
        "k.pem",
        9443,
    )
    assert served["host"] == "127.0.0.1"
    assert served["bound"] == [9443]  # the command's own listening socket, bound first
    client = TestClient(served["app"])
    pod = v1_pod(milli=300)
    r = client.post("/x/filter", json=args(pod, ["v100-0000", "v100-0001"]))
    assert r.json()["NodeNames"] == ["v100-0000", "v100-0001"]
    assert client.get("/state").json()["placement"] == "pwr"


def test_the_token_is_wired_and_checked(tmp_path, monkeypatch) -> None:
    from fastapi.testclient import TestClient

    out = _run("--cluster", "v100:2", "--db", str(tmp_path / "a.db"), "--token", "bad token")
    assert out.exit_code == 2 and "--token" in out.output and "printable ASCII" in out.output
    served = _capture_server(monkeypatch)
    monkeypatch.setenv("GPUMOSAIC_EXTENDER_TOKEN", "t0k")
    out = _run("--cluster", "v100:2", "--db", str(tmp_path / "b.db"))
    assert out.exit_code == 0, out.output
    client = TestClient(served["app"])
    assert client.get("/state").status_code == 401
    assert client.get("/state", headers={"Authorization": "Bearer t0k"}).status_code == 200
