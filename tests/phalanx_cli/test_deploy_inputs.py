"""Red team: ``phalanx deploy`` refuses bad input up front, in one line that names the option.

Before these fixes ``deploy admit`` exited 0 when the SuperLink was unreachable or its
CA file missing; ``--watch -1``/``nan``/``inf`` failed late in Python's words and
``--watch 0`` spun for ever; ``probe-superlink`` printed a bare ``FileNotFoundError``;
``deploy superlink`` answered a bad ``--tls-dir`` with Flower's ``--ssl-ca-certfile``
and a bad port with Flower's argparse usage; and ``deploy certs --name ''`` (or a
300-character name) failed after the CA was written, leaving a half-written directory.

Nothing here starts a process except the last test, which admits against a real
SuperLink so that the refusals above are seen to be refusals of bad input only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from cryptography import x509
from typer.testing import CliRunner

import phalanx_cli.client
import phalanx_cli.deploy
from phalanx.flower.deployment.certificates import TlsFiles, ensure_tls_files, server_names
from phalanx.flower.deployment.processes import free_port
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx.settings import get_settings
from phalanx.store import ClientStatus, clients, make_engine, session_factory
from phalanx_cli.main import app
from tests.support.deployment import add_client

WIDE = {"COLUMNS": "500"}
"""Click's error box wraps at the terminal's width; wide, each message stays on one line."""


def _deploy(*args: str) -> Result:
    return CliRunner().invoke(app, ["deploy", *args], env=WIDE)


def _one_line(result: Result) -> str:
    """The one line a refused or failed command printed (the test fails if it printed more)."""
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh data directory and SQLite database for ``deploy admit``."""
    monkeypatch.setenv("PHALANX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PHALANX_DATABASE_URL", f"sqlite:///{tmp_path / 'phalanx.db'}")
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


@pytest.fixture
def exec_recorder(no_exec: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """``no_exec``'s test double of Flower's exec (records, runs nothing), for deploy too."""
    recorder = vars(phalanx_cli.client)["exec_flower"]  # what no_exec put in Flower's place
    monkeypatch.setattr(phalanx_cli.deploy, "exec_flower", recorder)
    return no_exec


def _bad_ca(tmp_path: Path, kind: str) -> Path:
    """A --root-certificates value that names no CA certificate file."""
    path = tmp_path / f"ca-{kind}"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # reading it would block for ever
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("not a certificate\n")
    elif kind == "private-key":
        path.write_bytes(ensure_tls_files(tmp_path / "tls").ca_key.read_bytes())
    return path


BAD_CA = {
    "missing": "does not exist",
    "directory": "is a directory",
    "fifo": "is not a regular file",
    "empty": "holds no PEM certificate",
    "text": "holds no PEM certificate",
    "private-key": "holds no PEM certificate",
}
"""Each kind of bad CA file, and the words that say what is wrong with it."""


# 1 and 3. deploy admit and probe-superlink: a bad CA file is refused naming the option
# and the path; a SuperLink that cannot be reached is an error naming its address


@pytest.mark.parametrize("kind", BAD_CA)
@pytest.mark.parametrize("command", ["admit", "probe-superlink"])
def test_a_ca_file_that_is_no_certificate_is_refused_before_anything_starts(
    data_dir: Path, command: str, kind: str
) -> None:
    ca = _bad_ca(data_dir, kind)
    args = ["--superlink", f"127.0.0.1:{free_port()}", "--root-certificates", str(ca)]
    result = _deploy(command, *args)
    assert result.exit_code == 2
    line = _one_line(result)
    assert "--root-certificates" in line and f"{ca} {BAD_CA[kind]}" in line
    assert not (data_dir / "phalanx.db").exists()


@pytest.mark.parametrize("command", ["admit", "probe-superlink"])
def test_a_superlink_that_cannot_be_reached_fails_in_one_line_naming_it(
    data_dir: Path, tls: TlsFiles, command: str
) -> None:
    address = f"127.0.0.1:{free_port()}"
    result = _deploy(
        command, "--superlink", address, "--root-certificates", str(tls.ca_certificate)
    )
    assert result.exit_code == 1
    assert f"cannot reach the SuperLink at {address}" in _one_line(result)


# 2. --watch and every other number of seconds: a finite number above 0, named


@pytest.mark.parametrize("watch", ["-1", "0", "nan", "inf", "1e308"])
def test_admit_refuses_a_watch_interval_that_is_no_wait_or_never_ends(
    data_dir: Path, tls: TlsFiles, watch: str
) -> None:
    args = ["--superlink", f"127.0.0.1:{free_port()}", "--root-certificates"]
    result = _deploy("admit", *args, str(tls.ca_certificate), f"--watch={watch}")
    assert result.exit_code == 2
    assert "Invalid value for --watch: takes a number of seconds above 0" in result.output
    assert not (data_dir / "phalanx.db").exists()


@pytest.mark.parametrize("max_age", ["1e308", "-inf"])
def test_probe_alive_takes_the_same_seconds_as_every_other_interval(
    tmp_path: Path, max_age: str
) -> None:
    alive = tmp_path / "alive"
    alive.touch()
    result = _deploy("probe-alive", str(alive), f"--max-age={max_age}")
    assert result.exit_code == 2
    assert "Invalid value for --max-age: takes a number of seconds above 0" in result.output


@pytest.mark.parametrize(
    "address", ["superlink", "superlink:0", "superlink:65536", "superlink:8O", "::1:8000", "a b:1"]
)
def test_a_superlink_address_that_is_no_host_and_port_is_refused_by_its_option(
    data_dir: Path, tls: TlsFiles, address: str
) -> None:
    args = ["--superlink", address, "--root-certificates", str(tls.ca_certificate)]
    for command in ("probe-superlink", "admit"):
        result = _deploy(command, *args)
        assert result.exit_code == 2, (command, result.output)
        assert "Invalid value for --superlink" in result.output


# 4. deploy superlink: Phalanx's options, checked before Flower starts


def test_superlink_names_a_tls_dir_that_does_not_exist(
    tmp_path: Path, exec_recorder: list[list[str]]
) -> None:
    missing = tmp_path / "nonexist"
    result = _deploy("superlink", "--tls-dir", str(missing), "--database", str(tmp_path / "s.db"))
    assert exec_recorder == []
    assert result.exit_code == 2
    line = _one_line(result)
    assert "--tls-dir" in line and str(missing) in line and "--ssl" not in line


def test_superlink_names_every_file_missing_from_the_tls_dir(
    tmp_path: Path, exec_recorder: list[list[str]]
) -> None:
    tls_dir = tmp_path / "tls"
    tls_dir.mkdir()
    (tls_dir / "ca.pem").write_bytes(
        ensure_tls_files(tmp_path / "other").ca_certificate.read_bytes()
    )
    result = _deploy("superlink", "--tls-dir", str(tls_dir), "--database", str(tmp_path / "s.db"))
    assert exec_recorder == []
    assert result.exit_code == 2
    line = _one_line(result)
    assert "--tls-dir" in line and "server.pem" in line and "server.key" in line


@pytest.mark.parametrize("broken", ["ca.pem", "server.pem", "server.key"])
def test_superlink_names_a_tls_file_that_holds_no_pem(
    tmp_path: Path, tls: TlsFiles, exec_recorder: list[list[str]], broken: str
) -> None:
    (tls.directory / broken).write_text("garbage\n")
    result = _deploy(
        "superlink", "--tls-dir", str(tls.directory), "--database", str(tmp_path / "s.db")
    )
    assert exec_recorder == []
    assert result.exit_code == 2
    line = _one_line(result)
    assert "--tls-dir" in line and broken in line


def test_superlink_refuses_a_server_key_that_is_not_the_certificate_s(
    tmp_path: Path, tls: TlsFiles, exec_recorder: list[list[str]]
) -> None:
    other = ensure_tls_files(tmp_path / "other")
    tls.server_key.write_bytes(other.server_key.read_bytes())
    result = _deploy(
        "superlink", "--tls-dir", str(tls.directory), "--database", str(tmp_path / "s.db")
    )
    assert exec_recorder == []
    assert result.exit_code == 2
    assert "server.key" in _one_line(result)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--port", "0"),
        ("--port", "65536"),
        ("--port", "-1"),
        ("--port", "http"),
        ("--host", ""),
        ("--host", "a b"),
        ("--host", "0.0.0.0:8000"),
        ("--host", "http://0.0.0.0"),
    ],
)
def test_superlink_refuses_a_bad_port_or_host_by_phalanx_s_option(
    tmp_path: Path, tls: TlsFiles, exec_recorder: list[list[str]], option: str, value: str
) -> None:
    args = ["--tls-dir", str(tls.directory), "--database", str(tmp_path / "s.db")]
    result = _deploy("superlink", *args, f"{option}={value}")
    assert exec_recorder == []
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.output or (
        f"Invalid value for {option}" in result.output
    )
    assert "flower-superlink" not in result.output


def test_superlink_refuses_a_database_path_that_is_a_directory(
    tmp_path: Path, tls: TlsFiles, exec_recorder: list[list[str]]
) -> None:
    database = tmp_path / "state.db"
    database.mkdir()
    args = ["--tls-dir", str(tls.directory), "--database", str(database)]
    result = _deploy("superlink", *args)
    assert exec_recorder == []
    assert result.exit_code == 2
    line = _one_line(result)
    assert "--database" in line and str(database) in line


def test_superlink_with_good_inputs_goes_through_to_flower(
    tmp_path: Path, tls: TlsFiles, exec_recorder: list[list[str]]
) -> None:
    # The refusals above must be able to fail: good inputs reach the exec (recorded here).
    args = ["--tls-dir", str(tls.directory), "--database", str(tmp_path / "db" / "s.db")]
    result = _deploy("superlink", *args, "--host", "::", "--port", "65535")
    assert result.exit_code == 0, result.output
    [command] = exec_recorder
    assert command[command.index("--port") + 1] == "65535"
    assert command[command.index("--host") + 1] == "::"


# 5. deploy certs: names checked before anything is written; all files or none


@pytest.mark.parametrize(
    "name",
    [
        "",
        " ",
        "a" * 300,
        ".".join(["a" * 63] * 4) + ".b",  # 254 characters, labels of 63
        "a" * 64 + ".example",
        "a b",
        "-lead.example",
        "trail-.example",
        "a..b",
        "link.example.",
        "under_score",
        "link/example",
        "300.1.1.1",
        "*.example.org",
        "bücher.example",
    ],
)
def test_certs_refuses_a_name_no_certificate_can_cover_before_writing_anything(
    tmp_path: Path, name: str
) -> None:
    target = tmp_path / "tls"
    result = _deploy("certs", "--dir", str(target), "--name", "link.example", "--name", name)
    assert result.exit_code == 2
    assert "Invalid value for --name" in result.output
    assert "letters, digits and hyphens" in result.output  # what is allowed
    assert list(tmp_path.iterdir()) == []  # not even an empty directory or a staged file


def test_certs_keeps_an_existing_directory_as_it_was_when_a_name_is_refused(
    tmp_path: Path, tls: TlsFiles
) -> None:
    before = {p.name: p.read_bytes() for p in tls.directory.iterdir()}
    result = _deploy("certs", "--dir", str(tls.directory), "--name", "")
    assert result.exit_code == 2
    assert {p.name: p.read_bytes() for p in tls.directory.iterdir()} == before


def test_certs_writes_nothing_when_one_of_its_files_cannot_be_written(tmp_path: Path) -> None:
    target = tmp_path / "tls"
    (target / "server.pem").mkdir(parents=True)  # in the way of the last file written
    result = _deploy("certs", "--dir", str(target))
    assert result.exit_code == 2
    line = _one_line(result)
    assert "--dir" in line and "server.pem" in line
    assert [p.name for p in target.iterdir()] == ["server.pem"]


def test_certs_refuses_a_dir_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "tls"
    target.write_text("a file")
    result = _deploy("certs", "--dir", str(target))
    assert result.exit_code == 2
    line = _one_line(result)
    assert "--dir" in line and str(target) in line


@pytest.mark.parametrize(
    "name",
    [
        ".".join(["a" * 63] * 3) + ".example",  # 199 characters: a host name, too long for a CN
        "xn--bcher-kva.example",
        "10.0.0.7",
        "fd00::7",
        "LINK-1.Example.org",
    ],
)
def test_certs_covers_every_host_name_and_ip_a_client_may_use(tmp_path: Path, name: str) -> None:
    result = _deploy("certs", "--dir", str(tmp_path / "tls"), "--name", name)
    assert result.exit_code == 0, result.output
    certificate = x509.load_pem_x509_certificate((tmp_path / "tls" / "server.pem").read_bytes())
    assert name in server_names(certificate)


def test_certs_repairs_a_server_key_that_is_not_its_certificate_s(
    tmp_path: Path, tls: TlsFiles, exec_recorder: list[list[str]]
) -> None:
    # As a crash between renaming the new key and the new certificate would leave them.
    tls.server_key.write_bytes(ensure_tls_files(tmp_path / "other").server_key.read_bytes())
    ca = tls.ca_certificate.read_bytes()
    assert _deploy("certs", "--dir", str(tls.directory)).exit_code == 0
    args = ["--tls-dir", str(tls.directory), "--database", str(tmp_path / "s.db")]
    result = _deploy("superlink", *args)
    assert result.exit_code == 0, result.output
    assert len(exec_recorder) == 1
    assert tls.ca_certificate.read_bytes() == ca


# The one real SuperLink: with a good CA and a live SuperLink, admit succeeds


def test_admit_against_a_live_superlink_exits_0(
    tmp_path: Path,
    superlink: tuple[RunningSuperLink, object],
    migrated_sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    link, _ = superlink
    monkeypatch.setenv("PHALANX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PHALANX_DATABASE_URL", migrated_sqlite_url)
    get_settings.cache_clear()
    sessions = session_factory(make_engine(migrated_sqlite_url))
    client_id, _ = add_client(sessions, "edge")
    try:
        args = ["--superlink", link.address, "--root-certificates", str(link.tls.ca_certificate)]
        result = _deploy("admit", *args)
        probe = _deploy("probe-superlink", *args)
        # Banned, then approved again: Flower never registers a key twice.
        for status in (ClientStatus.BANNED, ClientStatus.APPROVED):
            with sessions.begin() as session:
                clients.set_client_status(session, client_id, status)
            again = _deploy("admit", *args)
    finally:
        get_settings.cache_clear()
    assert (result.exit_code, probe.exit_code) == (0, 0), result.output + probe.output
    assert f"client {client_id} admitted to the SuperLink" in result.output
    assert again.exit_code == 1
    assert "enroll a new key" in again.output
    assert "error: not every client could be brought in line" in again.output
