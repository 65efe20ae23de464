"""The Python API's argument checks that need no home: a wrong type is a typed error, never an
AttributeError from inside."""

from __future__ import annotations

import pytest

from fabric_query import Fabric
from fabric_query.errors import InvalidArgumentError


@pytest.mark.parametrize("text", [None, 5, b"notes", ["a.txt"]])
def test_source_partitions_refuses_a_text_that_is_not_a_string(text):
    fabric = object.__new__(Fabric)  # the check comes before the home is read
    with pytest.raises(InvalidArgumentError, match=f"as a string, got {type(text).__name__}"):
        fabric.source_partitions(text)


def test_a_forked_child_is_refused_a_fabric_rather_than_left_to_hang(tmp_path, monkeypatch):
    """guards against (trial 17d): a process forked from one that had opened a ``Fabric``, using it
    or opening another, hanging for ever (Lance's runtime, or a read-side lock another thread held
    at the fork: 9 of 15 forked children hung while the parent searched on a thread)."""
    import os

    from fabric_query import api
    from fabric_query.errors import ForkedProcessError

    carried = object.__new__(Fabric)
    carried._pid = os.getpid()  # as Fabric() records it
    monkeypatch.setattr(api, "_OPENED_IN", os.getpid())
    calls = [lambda: Fabric(tmp_path / "home"), lambda: carried.search("lighthouse"),
             lambda: carried.resolve({}), lambda: carried.status(), lambda: carried.source_partitions("a")]
    for call in calls:
        pid = os.fork()
        if pid == 0:  # the child only ever reaches the check, before any lock or Lance call
            try:
                call()
            except ForkedProcessError:
                os._exit(0)
            except BaseException:  # noqa: BLE001 - any other outcome fails the test
                os._exit(1)
            os._exit(2)
        assert os.waitpid(pid, 0)[1] == 0
    assert object.__new__(Fabric)._pid is None  # a Fabric never opened checks nothing


def test_a_forked_child_is_refused_the_models_a_fabric_loaded_rather_than_left_to_hang(tmp_path):
    """guards against (trial 20c): ``Fabric.encoder`` and ``Fabric.reranker`` were cached
    properties, so once loaded in the parent a forked child read them past the fork guard, and its
    ``encoder.encode_queries`` hung in 3 of 4 children while the parent encoded on threads (the
    ONNX session, or the embedder's lock, held at the fork). The child only reaches the check."""
    import os

    from conftest import ingest
    from fabric_query.errors import ForkedProcessError
    from fabric_resources.home import FabricHome

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(folder, FabricHome(tmp_path / "home"))
    fabric = Fabric(tmp_path / "home")
    assert fabric.encoder is fabric.encoder and fabric.reranker is None  # loaded in the parent
    for name in ("encoder", "reranker"):
        pid = os.fork()
        if pid == 0:
            try:
                getattr(fabric, name)
            except ForkedProcessError:
                os._exit(0)
            except BaseException:  # noqa: BLE001 - any other outcome fails the test
                os._exit(1)
            os._exit(2)
        assert os.waitpid(pid, 0)[1] == 0, name


@pytest.mark.parametrize("home", [b"/tmp/home", 5, ["/tmp/home"], "", "   ", "/tmp/ho\x00me"])
def test_a_home_that_is_no_folder_path_is_an_invalid_argument(home, tmp_path, monkeypatch):
    """guards against (trial 17d): ``Fabric(b"...")`` or ``Fabric(5)`` a ``TypeError`` from pathlib, a
    NUL a ``ValueError``, and ``Fabric("")`` opening ``$FABRIC_HOME`` (another home) in its place."""
    monkeypatch.setenv("FABRIC_HOME", str(tmp_path / "not-this-one"))
    with pytest.raises(InvalidArgumentError, match="home must"):
        Fabric(home)


def test_a_fabric_pickles_as_its_home_and_opens_it_again_in_a_spawned_process(tmp_path):
    """guards against (trial 17d): ``pickle.dumps(fabric)`` after a search an ``AttributeError``
    ("Can't pickle local object 'FabricHome.tables.<locals>.<lambda>'"), so a ``Fabric`` could not
    be handed to a ``spawn`` pool's worker."""
    import multiprocessing as mp
    import pickle

    from conftest import ingest
    from fabric_resources.home import FabricHome

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(folder, FabricHome(tmp_path / "home"))
    fabric = Fabric(tmp_path / "home")
    pack = fabric.search("lighthouse")
    again = pickle.loads(pickle.dumps(fabric))
    assert again.home.root == fabric.home.root and again.search("lighthouse").results == pack.results
    with mp.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_resolve_in_child, (fabric, pack.results[0].citation)) == "verified"


def _resolve_in_child(fabric, citation) -> str:
    return fabric.resolve(citation).status


def test_a_path_that_holds_no_usable_home_is_a_typed_read_error_and_a_bad_config_stays_a_config_error(
        tmp_path, monkeypatch):
    """guards against (trial 21b): ``Fabric("/etc/passwd")`` (a file) raised ``ConfigError``, as if a
    home's config were wrong, and an unreadable folder a bare ``PermissionError``: the read side's
    own typed errors (``FabricQueryError``) name each case; a config.json really wrong inside a home
    stays a ``ConfigError``."""
    import errno
    import os

    from fabric_query.errors import FabricQueryError, HomeNotFoundError, HomeUnusableError
    from fabric_resources.config import ConfigError
    from fabric_resources.home import FabricHome
    from fabric_resources.home import HomeUnusableError as ResourcesHomeUnusableError

    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a home\n")
    (tmp_path / "plain").mkdir()
    cases = {
        "a file": (a_file, HomeUnusableError, f"{a_file} is a file: a Fabric home is a folder"),
        "under a file": (a_file / "home", HomeUnusableError, f"{a_file} is a file, so {a_file / 'home'} cannot be"),
        "no such path": (tmp_path / "missing", HomeNotFoundError, "no such folder"),
        "not a home": (tmp_path / "plain", HomeNotFoundError, "run `fabric ingest PATH` first"),
    }
    for case, (path, kind, said) in cases.items():
        with pytest.raises(FabricQueryError) as raised:
            Fabric(path)
        assert type(raised.value) is kind and said in str(raised.value), (case, raised.value)
    assert isinstance(HomeUnusableError("x"), ResourcesHomeUnusableError)  # what it was before, for its callers

    locked = tmp_path / "locked"
    FabricHome(locked).catalog  # a home, then unreadable to this user
    locked.chmod(0)
    try:
        if os.geteuid() == 0:  # root reads any folder: the refusal an unprivileged user gets, inside it
            real_stat = os.stat

            def stat(path, *args, **kwargs):
                if str(path).startswith(f"{locked}{os.sep}"):
                    raise PermissionError(errno.EACCES, "Permission denied", str(path))
                return real_stat(path, *args, **kwargs)

            monkeypatch.setattr(os, "stat", stat)
        with pytest.raises(HomeUnusableError, match=f"the Fabric home folder {locked} cannot be read "
                                                    r"\(Permission denied\)"):
            Fabric(locked)
    finally:
        monkeypatch.undo()
        locked.chmod(0o700)
    (locked / "config.json").write_text('{"no_such_section": 1}')
    with pytest.raises(ConfigError):
        Fabric(locked)
