"""``serve --sharing``: the spec, its checks (one line naming the flag, exit 2) and the
variables a shared job gets."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.errors import InputError
from gpumosaic.run.serve import ServeDescription
from gpumosaic.runtime.share.supervisor import is_shared, parse_sharing, share_socket_dir
from gpumosaic.sharing.lock import AntiThrashing

runner = CliRunner()


def test_the_spec_fills_the_daemon_settings() -> None:
    sharing = parse_sharing("nvshare:tq=2.5,anti_thrashing=on,mem_cap=on")
    assert sharing is not None
    assert sharing.settings.tq_s == 2.5
    assert sharing.settings.anti_thrashing is AntiThrashing.ON
    assert sharing.mem_cap_share and sharing.mem_cap_mib is None
    default = parse_sharing("nvshare")
    assert default is not None
    assert default.settings.anti_thrashing is AntiThrashing.AUTO
    assert not default.mem_cap_share
    assert parse_sharing(None) is None and parse_sharing("none") is None


def test_a_job_gets_its_socket_name_and_cap() -> None:
    share = parse_sharing("nvshare:tq=1,mem_cap=on")
    assert share is not None
    env = share.job_env(7, 250, Path("/run/s/gpu3.sock"), "/lib/x.so")
    assert env == {
        "GPUMOSAIC_SHARE_SOCKET": "/run/s/gpu3.sock",
        "GPUMOSAIC_SHARE_NAME": "job-7",
        "GPUMOSAIC_SHARE_MEM_CAP_MILLI": "250",
    }
    mib = parse_sharing("nvshare:tq=1,mem_cap=512")
    assert mib is not None
    assert mib.job_env(7, 250, Path("/s"), "")["GPUMOSAIC_SHARE_MEM_CAP_MIB"] == "512"
    off = parse_sharing("nvshare:tq=1")
    assert off is not None
    assert not any("MEM_CAP" in k for k in off.job_env(7, 250, Path("/s"), ""))


def test_only_fractions_of_one_gpu_are_shared() -> None:
    assert is_shared(500, 1) and is_shared(1, 1)
    assert not is_shared(1000, 1) and not is_shared(1000, 2) and not is_shared(0, 1)


def test_two_services_never_share_a_socket_dir(tmp_path: Path) -> None:
    a = share_socket_dir(str(tmp_path / "a" / "state.db"))
    assert a != share_socket_dir(str(tmp_path / "b" / "state.db"))
    assert len(str(a / "gpu1023.sock")) < 108  # sun_path


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nvshare:tq=nan", "finite number"),
        ("nvshare:tq=inf", "finite number"),
        ("nvshare:tq=0.001", "tq must be between 0.01 and 86400"),
        ("nvshare:tq=1e9", "tq must be between"),
        ("nvshare:tq=abc", "tq: expected a number"),
        ("nvshare:anti_thrashing=maybe", "expected one of auto, on, off"),
        ("nvshare:mem_cap=lots", "mem_cap must be on, off or a number of MiB"),
        ("nvshare:mem_cap=-5", "mem_cap must be on, off or a number of MiB"),
        ("nvshare:mem_cap=nan", "mem_cap must be on, off or a number of MiB"),
        ("nvshare:grace=-1", "grace must be a finite number of seconds >= 0"),
        ("nvshare:quantum=3", "'quantum' is not an option"),
        ("nvshare:tq", "expected key=value"),
        ("mps:tq=3", "nvshare:tq=S"),
    ],
)
def test_a_bad_spec_is_one_error_naming_the_flag(spec: str, says: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_sharing(spec)
    assert caught.value.field == "--sharing"
    assert says in str(caught.value)
    with pytest.raises(InputError):
        ServeDescription(sharing=spec)


def test_serve_refuses_a_bad_spec_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    state = tmp_path / "st" / "state.db"
    result = runner.invoke(
        app,
        ["serve", "--cluster", "v100:1", "--state", str(state), "--sharing", "nvshare:tq=-1"],
    )
    assert result.exit_code == 2
    out = result.output.strip()
    assert "--sharing" in out and "tq must be" in out
    assert "Traceback" not in out
    assert not state.parent.exists()  # refused before the state or Ray
