"""The `fabric` CLI under the process environment a user's machine gives it: the locale's
encoding, the umask, the clock (hostile trial 16a)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _fabric(*argv: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *argv],
                          capture_output=True, env=env, input=stdin.encode() if stdin else None, timeout=300)


def test_a_stream_that_cannot_encode_the_text_gets_escapes_and_every_line(tmp_path, fabric_home):
    """guards against: a `UnicodeEncodeError` traceback (exit 1) from search, resolve and ingest when
    stdout's encoding is not UTF-8 (`PYTHONIOENCODING=ascii`, a Latin-1 locale, a Windows code page)
    and a hit, a file name or the summary's `→` holds a character it lacks; the ingest's work was
    done, its summary cut off (hostile trial 16a)."""
    from conftest import ingest

    src = tmp_path / "メモ"
    src.mkdir()
    (src / "灯台.txt").write_text("灯台守は潮を見ていた。\n")
    (src / "emoji.txt").write_text("lighthouse 🗼 keeper\n")
    ingest(src, fabric_home)
    home = ["--home", str(fabric_home.root)]
    utf8 = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1", "PYTHONIOENCODING": "utf-8"}
    reference = json.loads(_fabric("search", "灯台", "--json", *home, env=utf8).stdout)["results"]
    for encoding in ("ascii", "latin-1"):
        env = {**utf8, "PYTHONIOENCODING": encoding}
        for argv in (["search", "灯台"], ["search", "keeper"], ["status"], ["ingest", str(src)]):
            out = _fabric(*argv, *home, env=env)
            assert out.returncode == 0, (encoding, argv, out.stderr[-800:])
            assert b"Traceback" not in out.stderr, (encoding, argv, out.stderr[-800:])
            out.stdout.decode("ascii")  # every character the stream lacks was escaped
        shown = _fabric("search", "灯台", *home, env=env).stdout.decode("ascii")
        assert "\\u706f\\u53f0" in shown, shown  # 灯台, as the escapes a reader can decode
        assert "\\ud83d\\uddfc" in _fabric("search", "keeper", *home, env=env).stdout.decode("ascii")
        packed = _fabric("search", "灯台", "--json", *home, env=env)
        assert json.loads(packed.stdout)["results"] == reference  # still JSON, of the same text
        Path(tmp_path / "pack.json").write_bytes(packed.stdout)
        verdict = _fabric("resolve", str(tmp_path / "pack.json"), *home, env=env)
        assert verdict.returncode == 0 and b"verified" in verdict.stdout, verdict.stderr[-800:]


def test_a_same_size_edit_after_the_clock_went_back_is_seen(tmp_path, fabric_home, monkeypatch):
    """guards against: an ingest run while the clock was a day ahead (a wrong hardware clock that
    NTP then set back, a VM resumed from a snapshot) hiding every later edit that keeps the file's
    size and date (`cp -p`, `rsync -t`, `touch -d`): the edit's inode change time fell before that
    scan's recorded start, so the prescreen trusted it; ingest said nothing changed and search kept
    serving the old text for good (hostile trial 16a)."""
    import time

    from conftest import ingest
    from fabric_query.api import Fabric

    src = tmp_path / "notes"
    src.mkdir()
    note = src / "ledger.txt"
    note.write_text("the ledger says walrus\n")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 86400)  # the clock a day ahead
    ingest(src, fabric_home)
    monkeypatch.setattr(time, "time", real)  # set back to the true time
    before = note.stat()
    note.write_text("the ledger says narwal\n")  # same size
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert ingest(src, fabric_home).scan.changed == ["fs:notes/ledger.txt"]
    hits = Fabric(fabric_home.root).search("narwal").results
    assert [(h.citation.source_key, h.lexical, h.text) for h in hits] == [
        ("fs:notes/ledger.txt", True, "the ledger says narwal")]


def test_status_says_a_scan_and_release_recorded_while_the_clock_was_ahead_are_in_the_future(
        tmp_path, fabric_home, monkeypatch):
    """guards against: `fabric status` printing "last scan 0 s ago; release published 0 s ago" for a
    day when both were recorded while the clock was a day ahead (a negative age was printed as 0 s)
    (hostile trial 16a)."""
    import time

    from typer.testing import CliRunner

    from conftest import ingest
    from fabric_assets.cli import app

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("a note\n")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 86400)
    ingest(src, fabric_home)
    monkeypatch.setattr(time, "time", real)
    out = CliRunner().invoke(app, ["status", "--home", str(fabric_home.root)], env={"FABRIC_USE_SERVER": "0"})
    assert out.exit_code == 0, out.output
    line = " ".join(out.stdout.split())
    assert "last scan 23 h in the future" in line and "release published 23 h in the future" in line, line
    assert "0 s ago" not in line, line


def test_a_key_copied_from_the_output_names_a_file_whose_name_holds_a_control_character(tmp_path, fabric_home):
    """guards against: `fabric purge --source` and `fabric status --source` given a key as `fabric`
    prints it (`fs:notes/ok\\x1b[5m.txt`: control characters escaped, so a name cannot drive the
    terminal) answering "no such source" / "no source matches": the file could be purged only by
    typing the escape character itself (hostile trial 16a)."""
    from typer.testing import CliRunner

    from conftest import ingest
    from fabric_assets.cli import app

    src = tmp_path / "notes"
    src.mkdir()
    (src / "ok\x1b[5m.txt").write_text("otters hold hands\n")
    (src / "two\nlines.txt").write_text("seals sleep\n")
    (src / "kept.txt").write_text("kept note\n")
    ingest(src, fabric_home)
    runner, home = CliRunner(), ["--home", str(fabric_home.root)]
    env = {"FABRIC_USE_SERVER": "0"}
    found = runner.invoke(app, ["status", "--source", "ok\\x1b[5m", *home], env=env)
    assert found.exit_code == 0 and "fs:notes/ok\\x1b[5m.txt  (present)" in found.stdout, found.output
    (src / "ok\x1b[5m.txt").unlink()
    (src / "two\nlines.txt").unlink()
    ingest(src, fabric_home)
    out = runner.invoke(app, ["purge", "--source", "fs:notes/ok\\x1b[5m.txt", "--source", "fs:notes/two\\x0alines.txt",
                              *home], env=env)
    assert out.exit_code == 0, out.output
    assert {s.source_key for s in fabric_home.catalog.sources()} == {"fs:notes/kept.txt"}
    # A key no source prints as is still unknown.
    out = runner.invoke(app, ["purge", "--source", "fs:notes/ok\\x1b[6m.txt", *home], env=env)
    assert out.exit_code == 2 and "no such source" in out.output, out.output


def _latin1_locale(tmp_path: Path) -> dict[str, str]:
    """The environment of a shell whose locale is en_US.ISO-8859-1 (built with localedef)."""
    import shutil

    import pytest

    if shutil.which("localedef") is None or not Path("/usr/share/i18n/locales/en_US").exists():
        pytest.skip("localedef and the en_US locale source are needed to build a Latin-1 locale")
    folder = tmp_path / "locale"
    folder.mkdir()
    subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1", str(folder / "en_US.ISO-8859-1")],
                   check=True, capture_output=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUTF8", "PYTHONIOENCODING", "LANG", "LC_CTYPE")}
    return {**env, "LOCPATH": str(folder), "LC_ALL": "en_US.ISO-8859-1", "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}


def test_source_keys_do_not_depend_on_the_locale(tmp_path, fabric_home):
    """guards against: an ingest under a Latin-1 locale (a cron job's or ssh session's `LC_ALL`)
    decoding UTF-8 file names in Latin-1: `日本語.txt` moved to the key `æ\\x97¥æ\\x9c¬èª\\x9e.txt`,
    which `path:` filters and citations made under UTF-8 do not name, and a name that is not UTF-8
    taken in rather than skipped; `fabric resolve` of a Japanese file's citation was
    "error: UnicodeEncodeError" (hostile trial 16a)."""
    from conftest import ingest

    env = _latin1_locale(tmp_path)
    src = tmp_path / "notes"
    src.mkdir()
    (src / "日本語.txt").write_text("灯台守は潮を見ていた。\n")
    (src / "menu.txt").write_text("café au lait\n")
    (src / "crème.txt").write_text("brûlée\n")
    Path(os.fsdecode(os.fsencode(src) + b"/caf\xe9.txt")).write_text("latin one name\n")
    ingest(src, fabric_home)
    keys = {s.source_key: s.state for s in fabric_home.catalog.sources()}
    assert keys == {"fs:notes/日本語.txt": "present", "fs:notes/menu.txt": "present", "fs:notes/crème.txt": "present"}
    home = ["--home", str(fabric_home.root)]
    pack = _fabric("search", "灯台", "--json", *home, env={**env, "LC_ALL": "C.UTF-8"})
    (tmp_path / "pack.json").write_bytes(pack.stdout)

    out = _fabric("ingest", str(src), *home, env=env)
    assert out.returncode == 1, out.stderr[-800:]  # 1: the Latin-1 name is skipped, as under UTF-8
    assert {s.source_key: s.state for s in fabric_home.catalog.sources()} == keys
    assert b"name-not-utf-8" in out.stdout, out.stdout[-800:]
    verdict = _fabric("resolve", str(tmp_path / "pack.json"), *home, env=env)
    assert verdict.returncode == 0 and b"verified" in verdict.stdout, (verdict.stdout[-500:], verdict.stderr[-500:])
    # A query typed on that terminal (`café` as Latin-1 bytes) is the text typed.
    found = _fabric("search", os.fsdecode(b"caf\xe9"), "--json", *home, env=env)
    assert found.returncode == 0, found.stderr[-500:]
    data = json.loads(found.stdout.decode("latin-1"))
    assert data["query"] == "café" and data["results"][0]["citation"]["source_key"] == "fs:notes/menu.txt"
    named = _fabric("status", "--source", os.fsdecode("crème".encode("latin-1")), *home, env=env)
    assert named.returncode == 0 and "fs:notes/crème.txt  (present)" in named.stdout.decode("latin-1"), named.stdout
    menu = tmp_path / "menu"
    menu.mkdir()
    (menu / "menu.txt").write_text("café au lait\n")
    quick = _fabric("quickstart", str(menu), "--home", str(tmp_path / "quick"), "--query", os.fsdecode(b"caf\xe9"), env=env)
    assert quick.returncode == 0 and "fabric search 'café'" in quick.stdout.decode("latin-1"), quick.stderr[-800:]


def test_a_scan_in_a_process_that_reads_file_names_as_latin1_is_refused(tmp_path, fabric_home):
    """guards against: a process other than `fabric` (a Dagster daemon, a Python script calling the
    pipeline) started under a Latin-1 locale recording `日本語.txt` as a mojibake key (hostile trial 16a)."""
    env = _latin1_locale(tmp_path)
    src = tmp_path / "notes"
    src.mkdir()
    (src / "日本語.txt").write_text("灯台守は潮を見ていた。\n")
    fabric_home.catalog.register_root(src)
    code = ("from fabric_resources.home import FabricHome\nfrom fabric_assets.sources.scan import scan\n"
            f"scan(FabricHome({str(fabric_home.root)!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1 and "FileNameEncodingError: this process reads file names as iso8859-1" in out.stderr, \
        out.stderr[-800:]
    assert list(fabric_home.catalog.sources()) == []


def test_no_home_folder_for_the_model_cache_is_one_line(tmp_path, fabric_home):
    """guards against: `RuntimeError: Could not determine home directory.` tracebacks from search
    and at the end of ingest when HOME is unset and the user ID has no passwd entry (a container
    run under an arbitrary ID) and no FABRIC_MODEL_CACHE or XDG_CACHE_HOME names the query model's
    cache (hostile trial 16a)."""
    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("puffins nest on cliffs\n")
    ingest(src, fabric_home)
    (src / "b.txt").write_text("gannets dive\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME", "FABRIC_MODEL_CACHE")}
    env.update(FABRIC_USE_SERVER="0", HF_HUB_OFFLINE="1")
    no_passwd = ("import pwd\ndef no_entry(uid):\n    raise KeyError(f'getpwuid(): uid not found: {uid}')\n"
                 "pwd.getpwuid = no_entry\nfrom fabric_assets.cli import main\nmain()\n")
    for argv, code, said in ((["search", "puffins"], 2, "error: QueryModelError: no folder to cache the query model in"),
                             (["ingest", str(src)], 1, "error: ingest done, but search cannot run: no folder")):
        out = subprocess.run([sys.executable, "-c", no_passwd, *argv, "--home", str(fabric_home.root)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == code and said in out.stderr, (argv, out.stderr[-800:])
        assert "Traceback" not in out.stderr and "set FABRIC_MODEL_CACHE or HOME" in out.stderr, out.stderr[-800:]


def test_a_home_path_with_a_control_character_or_not_utf8_is_one_line_and_nothing_is_made(tmp_path):
    """guards against: `fabric ingest --home` a folder whose name holds a newline or ESC making the
    home, then every parse run failing in Lance ("illegal character sequence", exit 3, the files
    pending for ever), and one whose name is not UTF-8 ending the ingest in a tantivy
    `UnicodeEncodeError` traceback (hostile trial 16a)."""
    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("puffins nest on cliffs\n")
    env = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}
    for name, why in (("new\nline", "holds a control character"), ("esc\x1b[2J", "holds a control character"),
                      (os.fsdecode(b"caf\xe9"), "is not valid UTF-8")):
        home = tmp_path / name / "home"
        for argv in (["ingest", str(src)], ["search", "puffins"], ["status"]):
            out = _fabric(*argv, "--home", str(home), env=env)
            assert out.returncode == 2, (name, argv, out.stderr[-800:])
            line = out.stderr.decode()
            assert line.count("\n") == 1 and f"as a Fabric home: its path {why}" in line, (name, argv, line)
        assert not (tmp_path / name).exists()


def test_a_folder_whose_path_is_not_utf8_is_refused_as_a_root_in_one_line(tmp_path, fabric_home):
    """guards against: `fabric ingest` of a folder named in Latin-1 (`caf\\xe9 notes`) ending in a
    `UnicodeEncodeError: surrogates not allowed` traceback from the catalog's INSERT of the root
    (hostile trial 16a)."""
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9 notes"))
    folder.mkdir()
    (folder / "a.txt").write_text("walrus\n")
    env = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}
    out = _fabric("ingest", str(folder), "--home", str(fabric_home.root), env=env)
    line = out.stderr.decode()
    assert out.returncode == 2 and line.count("\n") == 1 and "its path is not valid UTF-8" in line, line[-800:]
    assert fabric_home.catalog.roots() == []


def test_under_umask_077_no_stored_copy_of_a_document_is_readable_by_others(tmp_path, fabric_home):
    """guards against: the artifact store's copies of the documents made 0o444 whatever the umask,
    so under `umask 077` in a home folder the user made (0755, kept: Fabric makes only new homes
    owner-only) every other local user could read them (hostile trial 16a)."""
    import stat

    from conftest import ingest
    from fabric_resources.home import FabricHome

    src = tmp_path / "notes"
    src.mkdir()
    (src / "diary.txt").write_text("a private diary entry\n")
    made = tmp_path / "made"
    made.mkdir(mode=0o755)
    home = FabricHome(made)
    old = os.umask(0o077)
    try:
        ingest(src, home)
    finally:
        os.umask(old)
    stored = [p for p in home.layout.artifacts.rglob("*") if p.is_file()]
    assert stored, "the diary's bytes are in the artifact store"
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in stored} == {oct(0o400)}
    # dagster.yaml (the instance's own path, no document, no password) is left world-readable.
    others = [p for p in made.rglob("*") if p.is_file() and p.stat().st_mode & 0o044 and p.name != "dagster.yaml"]
    assert others == []


def test_a_home_named_with_a_leading_tilde_is_in_the_users_home_folder(tmp_path):
    """guards against: `FABRIC_HOME=~/fabric` from systemd's `Environment=` or an env file (no shell
    to expand it), or `--home '~/fabric'`, making the home in a folder literally named `~` under the
    working folder, where the next command run from elsewhere does not find it (hostile trial 16a)."""
    user, work = tmp_path / "user", tmp_path / "work"
    user.mkdir()
    work.mkdir()
    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("puffins nest on cliffs\n")
    from fabric_resources.models.minilm_onnx import model_cache_dir

    env = {**os.environ, "HOME": str(user), "FABRIC_HOME": "~/fabric", "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1",
           "FABRIC_MODEL_CACHE": str(model_cache_dir())}  # the query model exported once, not again for this HOME
    out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", "ingest", str(src)],
                         capture_output=True, env=env, cwd=work, timeout=300)
    assert out.returncode == 0, out.stderr[-800:]
    assert list(work.iterdir()) == [] and (user / "fabric" / "catalog.sqlite3").exists()
    env.pop("FABRIC_HOME")
    found = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", "search", "puffins",
                            "--home", "~/fabric"], capture_output=True, env=env, cwd=tmp_path, timeout=300)
    assert found.returncode == 0 and b"fs:notes/a.txt" in found.stdout, found.stderr[-800:]
