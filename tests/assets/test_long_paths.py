"""Files deeper than PATH_MAX (4,096 bytes) below a source root (trial 23i): the kernel refuses
such a path in one call (``ENAMETOOLONG``), though every folder on the way opens."""

from __future__ import annotations

import errno
import os

import pytest

from fabric_resources.long_paths import open_path

_NAME = "d" * 250


def _deep(parent, levels: int, file_name: str, text: str) -> str:
    """``levels`` folders of 250-character names under ``parent`` (opened name by name, as no single
    path reaches them) and a file in the last; its full path."""
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        try:
            os.mkdir(_NAME, dir_fd=fd)
        except FileExistsError:
            pass
        fd, previous = os.open(_NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(previous)
    out = os.open(file_name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, text.encode())
    os.close(out)
    os.close(fd)
    return os.path.join(str(parent), *[_NAME] * levels, file_name)


def test_open_path_opens_a_path_past_path_max_and_refuses_what_one_call_would(tmp_path) -> None:
    """guards against: a file whose path is past PATH_MAX being unreadable (``os.open`` fails
    ``ENAMETOOLONG``), and the piecewise open reaching more than one call would: a symbolic link as
    the last name is still refused under ``O_NOFOLLOW``, a name past NAME_MAX still fails."""
    path = _deep(tmp_path, 17, "deep.txt", "Tide tables were pinned up.")
    assert len(os.fsencode(path)) > 4096
    with pytest.raises(OSError) as refused:
        os.open(path, os.O_RDONLY)
    assert refused.value.errno == errno.ENAMETOOLONG
    fd = open_path(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        assert fh.read() == b"Tide tables were pinned up."
    folder = open_path(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    os.symlink("deep.txt", "link", dir_fd=folder)
    os.close(folder)
    with pytest.raises(OSError) as loop:
        open_path(os.path.join(os.path.dirname(path), "link"), os.O_RDONLY | os.O_NOFOLLOW)
    assert loop.value.errno == errno.ELOOP
    with pytest.raises(OSError) as long_name:
        open_path(os.path.join(os.path.dirname(path), "x" * 256), os.O_RDONLY)
    assert long_name.value.errno == errno.ENAMETOOLONG


def test_a_file_past_path_max_under_a_root_is_read_and_cited_and_one_past_the_key_limit_is_skipped(tmp_path) -> None:
    """guards against (trial 23i): a file whose full path is past PATH_MAX was skipped
    ``unreadable: OSError: File name too long`` and a folder past it ``unreadable-folder``, though
    both open name by name. They are read (folders listed, files stored and hashed, the source's
    bytes read again by ``resolve``, which says ``verified``); a file whose source key would be
    longer than a citation may carry (4,096 characters) is skipped ``key-too-long``, and the other
    files of the root are read as ever."""
    from conftest import ingest
    from fabric_assets.sources.scan import scan
    from fabric_query import Fabric
    from fabric_resources.home import FabricHome

    root = tmp_path.joinpath(*["r" * 250] * 12)  # a root ~3,100 bytes deep: its own path opens
    root.mkdir(parents=True)
    (root / "near.txt").write_text("The harbour master counted the herring boats at dawn.\n")
    far = _deep(root, 4, "x" * 200 + ".txt", "Lanterns swung above the quay while the gulls argued.\n")
    _deep(root, 5, "deeper.txt", "Tide tables for the coming week were pinned up by the door.\n")
    _deep(root, 17, "too-far.txt", "Nobody can cite this line about the weather vane.\n")
    assert len(os.fsencode(far)) > 4096 and len(os.fsencode(str(root))) + 5 * 251 > 4096
    home = FabricHome(tmp_path / "home")
    ingest(root, home)
    skipped = dict(scan(home).skipped)
    assert [reason.split(":")[0] for key, reason in skipped.items()] == ["key-too-long"], skipped
    states = {s.rel_path.rpartition("/")[2]: s.state for s in home.catalog.sources()}
    assert states == {"near.txt": "present", "x" * 200 + ".txt": "present", "deeper.txt": "present"}, states
    fabric = Fabric(home.root)
    for query in ("lanterns quay gulls", "tide tables pinned"):
        hit = fabric.search(query, limit=1).results[0]
        assert hit.text.startswith(("Lanterns", "Tide")) and fabric.resolve(hit.citation).status == "verified"
    assert {s.rel_path.rpartition("/")[2]: s.state for s in home.catalog.sources()} == states  # nothing lost
