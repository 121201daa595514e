"""Property-based API tests generated from the extender's own OpenAPI schema
(schemathesis, in-process over ASGI): valid and invalid bodies for every route; no
answer is a 5xx, invalid data is refused (the schema and admission agree), answers
follow their schemas, and the books stay right. Bounded (100 cases per route; ~10 s on
an idle machine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from extender_builders import cluster, service
from hypothesis import HealthCheck, settings

from gpumosaic.apps.extender.app import create_app

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    negative_data_rejection,
    response_schema_conformance,
)

TOKEN = "fuzz-token"


def _app():  # built at import: schemathesis reads the schema when the module loads
    import atexit
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="extender-schema-"))
    atexit.register(shutil.rmtree, scratch, True)  # the test run leaves no folder behind
    svc = service(cluster(("V100", 2), ("T4", 1), ("A100", 8)), scratch / "s.db")
    return create_app(svc, token=TOKEN)


APP = _app()
schema = schemathesis.openapi.from_asgi(
    "/openapi.json", APP, headers={"Authorization": f"Bearer {TOKEN}"}
)


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_input_gives_a_server_error(case) -> None:
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {TOKEN}"}
    response = case.call()
    case.validate_response(
        response, checks=[not_a_server_error, response_schema_conformance, negative_data_rejection]
    )
    APP.state.service.check_invariants()
