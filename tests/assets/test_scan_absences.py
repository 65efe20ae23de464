"""What a scan says of files that go away and come back (trial 22a): a drive mounted on a folder
inside a root, unmounted between two scans; a file deleted, or unreachable, that returns.

The real mount tests mount a tmpfs or bind-mount a folder, which needs root (and a kernel that
lets the test mount); elsewhere they are skipped with the reason. The others run anywhere.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

import pytest

from fabric_assets.sources import walk
from fabric_assets.sources.mounts import MAX_INNER_MOUNTS, mount_points_under
from fabric_assets.sources.scan import scan


def _states(home) -> dict[str, str]:
    return {s.source_key: s.state for s in home.catalog.sources()}


def _mount(how: str, source, target) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs or a bind mount inside a root needs root")
    args = ["mount", "-t", "tmpfs", "-o", "size=4M", "tmpfs", str(target)] if how == "tmpfs" else [
        "mount", "--bind", str(source), str(target)]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount ({how}) here: {done.stderr.strip() or done.returncode}")


@contextlib.contextmanager
def _mounts():
    """Every target mounted inside the block is unmounted after it, whatever the test did."""
    targets: list = []
    try:
        yield targets
    finally:
        for target in reversed(targets):
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


@pytest.mark.parametrize("how", ["tmpfs", "bind"])
def test_a_drive_unmounted_from_a_folder_inside_a_root_keeps_its_files(tmp_path, fabric_home, how):
    """guards against (trial 22a): a real tmpfs on `docs/inner`, unmounted, left `docs/inner` an
    empty folder; the scan recorded the drive's file deleted and `fabric ingest` published a release
    without it ("0 / 0 / 1 / 0"). Now it is `access_lost` (still searchable) with a
    `mount-unavailable` skip, scan after scan; once remounted nothing was lost. A file deleted
    on the mounted drive, or from the bare folder, is still a deletion."""
    docs, inner, elsewhere = tmp_path / "docs", tmp_path / "docs" / "inner", tmp_path / "elsewhere"
    parked = tmp_path / "parked"  # where the tmpfs waits while unmounted from the root (its files kept)
    for folder in (inner, elsewhere, parked):
        folder.mkdir(parents=True)

    def unmount():
        if how == "tmpfs":
            subprocess.run(["mount", "--move", str(inner), str(parked)], check=True)
            targets.append(parked)
        else:
            subprocess.run(["umount", str(inner)], check=True)
        targets.remove(inner)

    def remount():
        if how == "tmpfs":
            subprocess.run(["mount", "--move", str(parked), str(inner)], check=True)
            targets.remove(parked)
        else:
            _mount(how, elsewhere, inner)
        targets.append(inner)

    (docs / "top.txt").write_text("at the top of the root\n")
    with _mounts() as targets:
        _mount(how, elsewhere, inner)
        targets.append(inner)
        (inner / "x.txt").write_text("on the drive\n")
        (inner / "y.txt").write_text("also on the drive\n")
        fabric_home.catalog.register_root(docs)
        assert sorted(scan(fabric_home).new) == ["fs:docs/inner/x.txt", "fs:docs/inner/y.txt", "fs:docs/top.txt"]
        (inner / "y.txt").unlink()  # deleted on the mounted drive: a deletion, as before
        assert scan(fabric_home).deleted == ["fs:docs/inner/y.txt"]

        unmount()
        for _ in range(2):  # and it stays unmounted: not read as an empty folder the next time either
            away = scan(fabric_home)
            assert away.deleted == []
            ((key, reason),) = away.skipped
            assert key == "fs:docs/inner" and reason.startswith("mount-unavailable: ") and "unmounted" in reason
            assert _states(fabric_home) == {"fs:docs/inner/x.txt": "access_lost", "fs:docs/inner/y.txt": "deleted",
                                            "fs:docs/top.txt": "present"}

        remount()  # back: nothing was lost
        back = scan(fabric_home)
        assert back.skipped == [] and back.deleted == []
        assert _states(fabric_home)["fs:docs/inner/x.txt"] == "present"

        unmount()
        (inner / "z.txt").write_text("written into the bare folder\n")  # no drive: the folder is what it holds
        bare = scan(fabric_home)
        assert bare.new == ["fs:docs/inner/z.txt"] and bare.deleted == ["fs:docs/inner/x.txt"] and bare.skipped == []
        (inner / "z.txt").unlink()  # and the plain folder emptied is a deletion
        assert scan(fabric_home).deleted == ["fs:docs/inner/z.txt"]


def test_only_the_mount_points_under_a_root_are_recorded_and_boundedly(tmp_path):
    """guards against: recording mount points that lie outside the root, the root itself, a
    sibling sharing its name's prefix (`/r/docs2` is not under `/r/docs`), names the walk never
    takes in (hidden, when hidden files are ignored; not UTF-8), or a root over a container's
    hundreds of mounts recorded without bound."""
    root = tmp_path / "docs"
    base = os.fsencode(os.path.realpath(root))
    table = {b"/", base, base + b"2", base + b"2/x", base + b"/usb", base + b"/a/b c", base + b"/.snap/1",
             base + b"/caf\xe9"}
    assert mount_points_under(root, table, ignore_hidden=True) == ["a/b c", "usb"]
    assert mount_points_under(root, table, ignore_hidden=False) == [".snap/1", "a/b c", "usb"]
    many = {base + f"/m{i:04d}".encode() for i in range(MAX_INNER_MOUNTS + 50)}
    assert len(mount_points_under(root, many, ignore_hidden=True)) == MAX_INNER_MOUNTS


def test_an_inner_mount_point_named_by_the_mount_table_alone_keeps_its_files(tmp_path, fabric_home, monkeypatch):
    """guards against: the check resting on `os.path.ismount` (a bind mount from the same file
    system is the same device), and an unmounted folder that held no file being reported at
    every scan. Runs without root: the mount table is a file the test writes."""
    docs = tmp_path / "docs"
    (docs / "bound").mkdir(parents=True)
    (docs / "empty drive").mkdir()
    (docs / "bound" / "x.txt").write_text("on the bound folder\n")
    table = tmp_path / "mountinfo"
    real = os.path.realpath(docs)
    table.write_text("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n"
                     f"99 22 0:21 /src {real}/bound rw - ext4 /dev/sda1 rw\n"
                     f"98 22 0:30 / {real}/empty\\040drive rw - tmpfs tmpfs rw\n")
    monkeypatch.setattr(walk, "MOUNT_TABLE", str(table))
    fabric_home.catalog.register_root(docs)
    assert scan(fabric_home).new == ["fs:docs/bound/x.txt"]

    (docs / "bound" / "x.txt").unlink()
    table.write_text("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n")  # both unmounted
    away = scan(fabric_home)
    assert away.deleted == [] and away.access_lost == ["fs:docs/bound/x.txt"]
    assert [key for key, _ in away.skipped] == ["fs:docs/bound"]  # the empty drive held nothing to keep


def test_a_file_back_with_its_last_bytes_is_counted_as_returned_not_new(tmp_path, fabric_home):
    """guards against (trial 22a): a file deleted (or its folder unreachable) and then back with the
    same bytes was counted `new` in the ingest summary ("1 / 0 / 0 / 0", "parse partitions run 0")
    though its parse was reused; it is `returned`. Back with other bytes it is new, and a file
    never seen is new."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("the ferry left at noon\n")
    (docs / "b.txt").write_text("gulls over the pier\n")
    fabric_home.catalog.register_root(docs)
    assert sorted(scan(fabric_home).new) == ["fs:docs/a.txt", "fs:docs/b.txt"]
    (docs / "a.txt").rename(tmp_path / "a.txt")
    (docs / "b.txt").unlink()
    assert sorted(scan(fabric_home).deleted) == ["fs:docs/a.txt", "fs:docs/b.txt"]

    (tmp_path / "a.txt").rename(docs / "a.txt")  # the same bytes back
    (docs / "b.txt").write_text("other words now\n")  # the name back, other bytes
    (docs / "c.txt").write_text("never seen before\n")
    back = scan(fabric_home)
    assert back.returned == ["fs:docs/a.txt"] and back.new == ["fs:docs/b.txt", "fs:docs/c.txt"]
    assert back.needs_activation  # a is in the release again


def test_a_file_back_from_an_unmounted_drive_is_counted_as_returned(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 22a): a file kept `access_lost` while its drive was unmounted, back
    with the same bytes once remounted, was counted `new` (the summary "1 new", nothing parsed)."""
    docs = tmp_path / "docs"
    (docs / "drive").mkdir(parents=True)
    (docs / "drive" / "a.txt").write_text("the ferry left at noon\n")
    table = tmp_path / "mountinfo"
    mounted = f"22 1 0:21 / / rw - ext4 /dev/sda1 rw\n98 22 0:30 / {os.path.realpath(docs)}/drive rw - tmpfs tmpfs rw\n"
    table.write_text(mounted)
    monkeypatch.setattr(walk, "MOUNT_TABLE", str(table))
    fabric_home.catalog.register_root(docs)
    assert scan(fabric_home).new == ["fs:docs/drive/a.txt"]
    (docs / "drive" / "a.txt").rename(tmp_path / "a.txt")  # the drive unmounted: its folder left empty
    table.write_text("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n")
    assert scan(fabric_home).access_lost == ["fs:docs/drive/a.txt"]

    (tmp_path / "a.txt").rename(docs / "drive" / "a.txt")  # remounted
    table.write_text(mounted)
    back = scan(fabric_home)
    assert back.returned == ["fs:docs/drive/a.txt"] and back.new == [] and back.deleted == []


def test_a_file_renamed_between_the_listing_and_its_reading_is_changed_while_scanned(tmp_path, fabric_home):
    """guards against (trial 22a): a file renamed (or deleted) after the walk listed it and before
    it was read was skipped as `unreadable: FileNotFoundError`, as if it could not be read, and its
    known version marked access_lost. It is `changed-while-scanned`, its last version left as it was;
    the next scan reads the file under its new name."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("alpha\n")
    fabric_home.catalog.register_root(docs)
    assert scan(fabric_home).new == ["fs:docs/a.txt"]
    (docs / "a.txt").write_text("alpha, edited\n")
    store = fabric_home.artifacts
    real_put_file = store.put_file

    def renamed_first(path, *args, **kwargs):
        if os.path.basename(path) == "a.txt":
            os.rename(path, docs / "z.txt")  # renamed by another program just after the listing
        return real_put_file(path, *args, **kwargs)

    store.put_file = renamed_first
    try:
        raced = scan(fabric_home)
    finally:
        store.put_file = real_put_file
    ((key, reason),) = raced.skipped
    assert key == "fs:docs/a.txt" and reason.startswith("changed-while-scanned: "), reason
    assert raced.access_lost == [] and raced.deleted == []
    assert _states(fabric_home) == {"fs:docs/a.txt": "present"}
    after = scan(fabric_home)
    assert after.moved == [] and after.new == ["fs:docs/z.txt"] and after.deleted == ["fs:docs/a.txt"]
    assert after.skipped == []


def test_a_folder_renamed_between_the_listing_and_its_walk_is_changed_while_scanned(tmp_path, fabric_home,
                                                                                    monkeypatch):
    """guards against (trial 22a): a folder renamed after its parent was listed and before it was
    walked was skipped as `unreadable-folder: FileNotFoundError`; it changed while scanned. Its files
    are kept (not observed), and the next scan sees them moved."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "a.txt").write_text("alpha\n")
    fabric_home.catalog.register_root(docs)
    assert scan(fabric_home).new == ["fs:docs/sub/a.txt"]
    real_open = os.open

    def renamed_first(path, flags, *args, **kwargs):
        if str(path) == str(docs / "sub") and os.path.isdir(path):
            os.rename(path, docs / "moved")  # renamed by another program just after the listing
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(walk.os, "open", renamed_first)
    raced = scan(fabric_home)
    monkeypatch.undo()
    ((key, reason),) = raced.skipped
    assert key == "fs:docs/sub" and reason.startswith("unreadable-folder: changed while scanned (renamed"), reason
    assert raced.deleted == [] and _states(fabric_home) == {"fs:docs/sub/a.txt": "access_lost"}
    assert scan(fabric_home).moved == [("fs:docs/sub/a.txt", "fs:docs/moved/a.txt")]
