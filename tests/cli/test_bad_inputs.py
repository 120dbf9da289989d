"""A corpus of bad inputs across the whole CLI, each run through the real command (``typer.testing.CliRunner`` on
``antlm_bench.cli.app``, a few through ``python -m antlm_bench``). Every case must give the documented exit code
(docs/errors.md: 2 bad input, 4 the environment), exactly one ``error:`` line and nothing else (a bad schedule may
add its line and a caret), no traceback, and leave the folder it ran in as it was: no partial output.

Cases that fail today because of code owned elsewhere are ``xfail(strict=True)`` with the owner in the reason; at
the end of the module the tally (tried / clean / traceback / partial / other) is printed.
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from archive_support import make_tar, zeros_zip
from checkpoint_support import damage_weights
from loopback_http import Server
from typer.testing import CliRunner

from antlm_bench import registry
from antlm_bench.cli import app

REPO = Path(__file__).resolve().parents[2]
# a run of the committed study (shipped with the repository: never missing)
MINI_RUN = REPO / "leaderboards" / "mini-antlm" / "results" / "babyllama" / "antlm-babyllama-tiny-24_CLM-seed2"
LONG = "n" * 300  # one path component longer than NAME_MAX (255)

TALLY: dict[str, list[str]] = {"clean": [], "traceback": [], "partial": [], "other": []}


# -- files the cases read ----------------------------------------------------------------------------------------------


def _write(path: Path, payload: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload.encode() if isinstance(payload, str) else payload)
    return path


PAIR = '{"sentence_good": "The cat sleeps.", "sentence_bad": "The cat sleep."}\n'
EWOK_LINE = '{"Context1": "A is next to B.", "Target1": "B is next to A.", "Target2": "B is far from A."}\n'
TASK_SPECS = {
    "mini.yaml": "name: mini\nclass: MinimalPairTask\ndata: {folder: mini, pattern: '*.jsonl*'}\n"
                 "fields: {good: sentence_good, bad: sentence_bad}\n",
    "miniewok.yaml": "name: miniewok\nclass: EwokTask\ndata: {zip: mini.zip, password: pw, folder: ewok}\n"
                     "fields: {context: Context1, good: Target1, bad: Target2}\n",
}


def _tasks(tmp: Path, extra: dict[str, str] | None = None) -> None:
    for name, text in {**TASK_SPECS, **(extra or {})}.items():
        _write(tmp / "spec" / name, text)


def _mini(tmp: Path, payload: bytes | str, name: str = "b.jsonl") -> None:
    _tasks(tmp)
    _write(tmp / "data" / "mini" / "a.jsonl", PAIR * 3)
    _write(tmp / "data" / "mini" / name, payload)


def _ewok_zip(tmp: Path, member: bytes, damage: str | None = None) -> None:
    """data/mini.zip with ewok/a.jsonl (fine) and ewok/b.jsonl (``member``); no password (zipfile cannot write one)."""
    _tasks(tmp)
    buffer = io.BytesIO()
    compression = zipfile.ZIP_STORED if damage == "crc" else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        archive.writestr("ewok/a.jsonl", EWOK_LINE * 2)
        archive.writestr("ewok/b.jsonl", member)
    raw = bytearray(buffer.getvalue())
    if damage == "crc":  # one byte of the stored member changed: the CRC no longer matches
        at = raw.index(member[:12], raw.index(b"ewok/b.jsonl"))
        raw[at + 2] ^= 0x01
    elif damage == "deflate":
        at = raw.index(b"ewok/b.jsonl") + len("ewok/b.jsonl")
        raw[at + 3: at + 20] = b"\xff" * 17
    _write(tmp / "data" / "mini.zip", bytes(raw))


GOOD_TAR = make_tar([("data/blimp_filtered/a.jsonl", "file", PAIR.encode() * 50)])
ARCHIVES = {
    "/good.tar.gz": GOOD_TAR,
    "/link-up.tar.gz": make_tar([("data/a.txt", "file", b"x"), ("data/up", "sym", "..")]),
    "/link-abs.tar.gz": make_tar([("data/a.txt", "file", b"x"), ("data/etc", "sym", "/etc")]),
    "/hard-out.tar.gz": make_tar([("data/a.txt", "file", b"x"), ("data/h", "hard", "../../etc/passwd")]),
    "/dotdot.tar.gz": make_tar([("data/a.txt", "file", b"x"), ("data/../../evil.txt", "file", b"x")]),
    "/truncated.tar.gz": GOOD_TAR[: len(GOOD_TAR) // 2],
    "/junk.bin": b"neither a zip nor a tar" * 10,
}


def _bad_crc_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("data/a.jsonl", PAIR * 20)
    raw = bytearray(buffer.getvalue())
    raw[raw.index(b"The cat") + 1] ^= 0x01
    return bytes(raw)


ARCHIVES["/badcrc.zip"] = _bad_crc_zip()


def _manifest(tmp: Path, line: str) -> None:
    _write(tmp / "data" / "a.txt", "a")
    _write(tmp / "data" / "MANIFEST.sha256", line + "\n")


def _corpus(tmp: Path, payload: bytes, name: str = "one.train") -> None:
    _write(tmp / "corpus" / name, payload)


def _run_copy(tmp: Path, name: str) -> None:
    target = tmp / name
    target.mkdir(parents=True)
    for file in ("scores.parquet", "run.json", "items.parquet"):
        if (MINI_RUN / file).is_dir():  # the results store and its items view
            shutil.copytree(MINI_RUN / file, target / file)
        elif (MINI_RUN / file).exists():
            shutil.copy2(MINI_RUN / file, target / file)


def _locked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Permission denied on any folder named ``locked`` (tests may run as root, where chmod denies nothing)."""
    real_mkdir = os.mkdir

    def mkdir(path: object, *args: object, **kwargs: object) -> None:
        if "locked" in Path(str(path)).parts:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "mkdir", mkdir)


ARCHIVES["/bomb.zip"] = zeros_zip(96 << 20)


def _plant_lock(tmp: Path, kind: str) -> None:
    """``out/.antlm-bench.lock`` planted as a link to a file of the user's, or as a folder."""
    _write(tmp / "victim.txt", "the user's file\n")
    lock = tmp / "out" / ".antlm-bench.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink":
        lock.symlink_to(tmp / "victim.txt")
    else:
        lock.mkdir()


def _model(tmp: Path, name: str = "m") -> Path:
    from tiny_models import save_tiny

    return save_tiny("llama", tmp / name)


def _model_with(tmp: Path, damage: str) -> None:
    """A model folder at tmp/m, damaged: an auto_map naming evil.py, truncated or NaN weights."""
    folder = _model(tmp)
    if damage == "auto-map":
        (folder / "evil.py").write_text("raise SystemExit('planted')\n")
        config = json.loads((folder / "config.json").read_text())
        config["auto_map"] = {"AutoModelForCausalLM": "evil.Evil"}
        (folder / "config.json").write_text(json.dumps(config))
    else:
        damage_weights(folder, damage)


def _export_targets(tmp: Path, kind: str) -> None:
    """A model at tmp/m and an OUT that --overwrite must not replace: a link to a folder of the user's, a folder
    that is no export, or the run the checkpoint belongs to."""
    if kind == "run":
        _write(tmp / "run" / "run.json", json.dumps({"schedule": "1_CLM"}))
        _model(tmp / "run" / "checkpoints", "phase-0-CLM")
        return
    _model(tmp)
    _write(tmp / "mine" / "notes.txt", "the user's notes\n")
    if kind == "link":
        (tmp / "link").symlink_to(tmp / "mine")


def _own_registry(tmp: Path) -> None:
    _write(tmp / "mine.tsv", "source\tdest\trepo\tcommit\tpath\tchecksum\n"
           "mine\t../outside.txt\towner/repo\tabc\tx.txt\tsha256:" + "0" * 64 + "\n")


def _registry_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTLM_BENCH_SOURCES", "mine.tsv")  # relative: the case runs in its own tmp folder


# -- the corpus --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]  # {tmp}, {url}, {model}, {run} are filled in
    code: int = 2
    says: str = ""  # a piece of the error line
    setup: Callable[[Path], None] | None = None
    inject: Callable[[pytest.MonkeyPatch], None] | None = None
    extra_lines: int = 0  # a schedule error adds the schedule and a caret
    owner: str = ""  # not empty: fails today in code owned elsewhere (xfail strict)
    keeps: tuple[str, ...] = ()  # content-addressed caches the command may fill before it refuses (not output)
    needs: tuple[str, ...] = field(default=())


def C(id: str, *args: str, **kw: object) -> Case:  # noqa: N802  (a short constructor keeps the table readable)
    return Case(id, args, **kw)  # type: ignore[arg-type]


SCHEDULE_OWNER = "schedule/trainer owner: schedule.py"
LEADERBOARD_OWNER = "leaderboard/check owner"
TRAIN_OWNER = "trainer owner: trainer.py / cli/train.py"
STORE_OWNER = "results-store owner: evaluate.py / pipeline/ / tables.py"

CASES: list[Case] = [
    # schedules
    C("schedule-bad-epochs", "schedule", "4_CLM+x_MLM", says="character 7", extra_lines=2),
    C("schedule-empty", "schedule", "", says="empty", extra_lines=2),
    C("schedule-unknown-objective", "schedule", "4_FOO", says="FOO", extra_lines=2),
    C("schedule-unclosed-group", "schedule", "3x(1_CLM", says="schedule", extra_lines=2),
    C("schedule-trailing-plus", "schedule", "4_CLM+", says="schedule", extra_lines=2),
    C("schedule-bad-mix-weight", "schedule", "2_MIX(CLM:a)", says="schedule", extra_lines=2),
    C("schedule-nested-400", "schedule", "(" * 400 + "1_CLM" + ")" * 400, says="schedule", extra_lines=2),
    C("schedule-markup", "schedule", "[/bold]", says="[/bold]", extra_lines=2),
    C("schedule-unknown-recipe", "schedule", "4_CLM", "--model", "nope", says="unknown model recipe 'nope'"),
    C("schedule-include-path-missing", "schedule", "4_CLM", "--include-path", "{tmp}/none", says="not a folder"),
    # task and recipe YAML through --include-path
    C("tasks-yaml-invalid", "list", "tasks", "--include-path", "{tmp}/spec", says="invalid YAML",
      setup=lambda t: _write(t / "spec" / "x.yaml", "name: [unclosed\n")),
    C("tasks-yaml-list", "list", "tasks", "--include-path", "{tmp}/spec", says="mapping",
      setup=lambda t: _write(t / "spec" / "x.yaml", "- a\n- b\n")),
    C("tasks-yaml-no-name", "list", "tasks", "--include-path", "{tmp}/spec", says="name",
      setup=lambda t: _write(t / "spec" / "x.yaml", "class: MinimalPairTask\n")),
    C("tasks-yaml-unknown-field", "list", "tasks", "--include-path", "{tmp}/spec", says="bogus",
      setup=lambda t: _write(t / "spec" / "x.yaml", "name: x\nclass: MinimalPairTask\nbogus: 1\n")),
    C("tasks-yaml-not-utf8", "list", "tasks", "--include-path", "{tmp}/spec", says="x.yaml",
      setup=lambda t: _write(t / "spec" / "x.yaml", b"name: \xff\xfe\n")),
    C("tasks-group-unknown-member", "eval", "--model", "{model}", "--tasks", "grp", "--include-path", "{tmp}/spec",
      says="unknown task 'nope'", needs=("model",),
      setup=lambda t: _write(t / "spec" / "g.yaml", "group: grp\ntask: [nope]\n")),
    C("tasks-unknown-class", "eval", "--model", "{model}", "--tasks", "x", "--include-path", "{tmp}/spec",
      says="NoSuchClass", needs=("model",),
      setup=lambda t: _write(t / "spec" / "x.yaml", "name: x\nclass: NoSuchClass\n")),
    C("recipe-yaml-bad-field", "list", "models", "--include-path", "{tmp}/spec", says="r.yaml",
      setup=lambda t: _write(t / "spec" / "r.yaml", "name: r\narchitecture: babyllama\npresets: 3\n")),
    C("recipe-yaml-invalid", "schedule", "1_CLM", "--model", "r", "--include-path", "{tmp}/spec", says="r.yaml",
      setup=lambda t: _write(t / "spec" / "r.yaml", "name: r\n  bad: indent\n")),
    # eval: tasks, options, model
    C("eval-unknown-task", "eval", "--model", "{model}", "--tasks", "blimpp", says="unknown task 'blimpp'",
      needs=("model",)),
    C("eval-empty-tasks", "eval", "--model", "{model}", "--tasks", ",", says="--tasks is empty", needs=("model",)),
    C("eval-unknown-member", "eval", "--model", "{model}", "--tasks", "glue:nope", says="no member 'nope'",
      needs=("model",)),
    C("eval-members-of-memberless", "eval", "--model", "{model}", "--tasks", "heldout:x", says="no members",
      needs=("model",)),
    C("eval-unknown-subtask", "eval", "--model", "{model}", "--tasks", "blimp:x", says="no such subtask",
      needs=("model",)),
    C("eval-task-markup", "eval", "--model", "{model}", "--tasks", "[/bold]", says="[/bold]", needs=("model",)),
    C("eval-task-very-long", "eval", "--model", "{model}", "--tasks", "t" * 5000, says="unknown task",
      needs=("model",)),
    C("eval-model-missing", "eval", "--model", "{tmp}/none", "--tasks", "blimp", says="none"),
    C("eval-model-empty-folder", "eval", "--model", "{tmp}/empty", "--tasks", "blimp", says="empty",
      setup=lambda t: (t / "empty").mkdir()),
    C("eval-model-bad-config", "eval", "--model", "{tmp}/m", "--tasks", "blimp", "--limit", "1", says="config",
      setup=lambda t: _write(t / "m" / "config.json", '{"model_type": "llama", "hidden_size": "big"}')),
    C("eval-limit-zero", "eval", "--model", "{model}", "--limit", "0", says="--limit", needs=("model",)),
    C("eval-scoring-bogus", "eval", "--model", "{model}", "--scoring", "bogus", says="--scoring", needs=("model",)),
    C("eval-device-bogus", "eval", "--model", "{model}", "--device", "bogus", says="--device", needs=("model",)),
    C("eval-seeds-bad", "eval", "--model", "{model}", "--tasks", "blimp", "--seeds", "4,x", says="--seeds",
      needs=("model",)),
    C("eval-data-dir-missing", "eval", "--model", "{model}", "--tasks", "blimp", "--data-dir", "{tmp}/none",
      says="not a folder", needs=("model",)),
    C("eval-data-folder-missing", "eval", "--model", "{model}", "--tasks", "blimp", "--data-dir", "{tmp}/data",
      says="blimp_filtered", needs=("model",), setup=lambda t: (t / "data").mkdir()),
    # eval: bad data files (a task spec of our own through --include-path), --output must not appear
    *[C(f"data-blimp-{name}", "eval", "--model", "{model}", "--tasks", "mini", "--include-path", "{tmp}/spec",
        "--data-dir", "{tmp}/data", "--output", "{tmp}/out", "--scoring", "clm", says=says, needs=("model",),
        setup=lambda t, payload=payload, fname=fname: _mini(t, payload, fname))
      for name, payload, fname, says in [
          ("no-records", "", "b.jsonl", "b.jsonl: no records"),
          ("blank-lines", "\n\n  \n", "b.jsonl", "b.jsonl: no records"),
          ("bad-json", PAIR + '{"sentence_good": \n', "b.jsonl", "b.jsonl:2: not valid JSON"),
          ("not-object", PAIR + "[1, 2]\n", "b.jsonl", "b.jsonl:2: expected a JSON object"),
          ("missing-field", '{"sentence_good": "x"}\n', "b.jsonl", "field 'sentence_bad'"),
          ("lone-surrogate", '{"sentence_good": "a\\ud800b", "sentence_bad": "c"}\n', "b.jsonl",
           "b.jsonl:1: a lone surrogate"),
          ("not-utf8", b'{"sentence_good": "\xff\xfe", "sentence_bad": "c"}\n', "b.jsonl", "not UTF-8"),
          ("corrupt-xz", b"\xfd7zXZ\x00 not really", "b.jsonl.xz", "corrupt"),
          ("deep-json", "[" * 100000 + "]" * 100000 + "\n", "b.jsonl", "b.jsonl:1"),
      ]],
    *[C(f"data-ewok-{name}", "eval", "--model", "{model}", "--tasks", "miniewok", "--include-path", "{tmp}/spec",
        "--data-dir", "{tmp}/data", "--output", "{tmp}/out", "--scoring", "clm", says=says, needs=("model",),
        setup=lambda t, member=member, damage=damage: _ewok_zip(t, member, damage))
      for name, member, damage, says in [
          ("empty-member", b"", None, "mini.zip!ewok/b.jsonl: no records"),
          ("not-utf8", b'{"Context1": "\xff", "Target1": "a", "Target2": "b"}\n', None, "ewok/b.jsonl: not UTF-8"),
          ("lone-surrogate", b'{"Context1": "\\udc00", "Target1": "a", "Target2": "b"}\n', None, "lone surrogate"),
          ("bad-crc", EWOK_LINE.encode() * 4, "crc", "ewok/b.jsonl: not readable"),
          ("corrupt-deflate", EWOK_LINE.encode() * 40, "deflate", "ewok/b.jsonl: not readable"),
      ]],
    C("data-ewok-not-a-zip", "eval", "--model", "{model}", "--tasks", "miniewok", "--include-path", "{tmp}/spec",
      "--data-dir", "{tmp}/data", "--output", "{tmp}/out", says="mini.zip", needs=("model",),
      setup=lambda t: (_tasks(t), _write(t / "data" / "mini.zip", b"PK\x03\x04 not a zip"))),
    # data fetch
    C("fetch-not-a-url", "data", "fetch", "--url", "notaurl", "--dest", "{tmp}/d/data", says="--url 'notaurl'"),
    C("fetch-ftp", "data", "fetch", "--url", "ftp://127.0.0.1/x.tar.gz", "--dest", "{tmp}/d/data", says="http"),
    C("fetch-bad-port", "data", "fetch", "--url", "http://127.0.0.1:99999/x", "--dest", "{tmp}/d/data", says="--url"),
    C("fetch-bad-sha", "data", "fetch", "--url", "{url}/good.tar.gz", "--sha256", "abc", "--dest", "{tmp}/d/data",
      says="--sha256", needs=("server",)),
    C("fetch-404", "data", "fetch", "--url", "{url}/none.tar.gz", "--dest", "{tmp}/d/data", says="HTTP 404",
      needs=("server",)),
    C("fetch-refused", "data", "fetch", "--url", "http://127.0.0.1:9/x.tar.gz", "--dest", "{tmp}/d/data",
      says="run the same command again"),
    C("fetch-sha-mismatch", "data", "fetch", "--url", "{url}/good.tar.gz", "--sha256", "0" * 64, "--dest",
      "{tmp}/d/data", says="sha256", needs=("server",)),
    *[C(f"fetch-{name}", "data", "fetch", "--url", "{url}/" + path, "--dest", "{tmp}/d/data", says=says,
        needs=("server",))
      for name, path, says in [
          ("symlink-up", "link-up.tar.gz", "outside the folder"),
          ("symlink-absolute", "link-abs.tar.gz", "absolute path"),
          ("hardlink-out", "hard-out.tar.gz", "outside the folder"),
          ("dotdot-member", "dotdot.tar.gz", "leaves the target folder"),
          ("truncated-tar-gz", "truncated.tar.gz", "damaged or truncated"),
          ("zip-bad-crc", "badcrc.zip", "damaged or truncated"),
          ("junk-archive", "junk.bin", "neither a zip nor a tar"),
      ]],
    # data verify
    C("verify-no-folder", "data", "verify", "--data-dir", "{tmp}/none", says="not a folder"),
    C("verify-no-manifest", "data", "verify", "--data-dir", "{tmp}/data", says="no manifest",
      setup=lambda t: (t / "data").mkdir()),
    C("verify-manifest-escape", "data", "verify", "--data-dir", "{tmp}/data", says="leaves",
      setup=lambda t: _manifest(t, "0" * 64 + "  ../../../../etc/hostname")),
    C("verify-manifest-absolute", "data", "verify", "--data-dir", "{tmp}/data", says="leaves",
      setup=lambda t: _manifest(t, "0" * 64 + "  /etc/hostname")),
    C("verify-manifest-malformed", "data", "verify", "--data-dir", "{tmp}/data", says="MANIFEST.sha256:1",
      setup=lambda t: _manifest(t, "short  a.txt")),
    C("verify-manifest-not-utf8", "data", "verify", "--data-dir", "{tmp}/data", says="not UTF-8",
      setup=lambda t: _write(t / "data" / "MANIFEST.sha256", b"\xff\xfe\n")),
    C("verify-markup-folder", "data", "verify", "--data-dir", "{tmp}/[red]x[/red]", says="[red]x[/red]"),
    # data prepare
    C("prepare-unknown-recipe", "data", "prepare", "--recipe", "nope", says="'nope'"),
    C("prepare-unknown-preset", "data", "prepare", "--recipe", "babyllama-clm-only", "--preset", "huge", says="huge"),
    C("prepare-corpus-missing", "data", "prepare", "--corpus", "{tmp}/none", "--cache-dir", "{tmp}/cache",
      says="not a folder"),
    C("prepare-corpus-empty", "data", "prepare", "--corpus", "{tmp}/corpus", "--cache-dir", "{tmp}/cache",
      says="no *.train files", setup=lambda t: (t / "corpus").mkdir()),
    C("prepare-corpus-not-utf8", "data", "prepare", "--corpus", "{tmp}/corpus", "--cache-dir", "{tmp}/cache",
      says="not UTF-8", setup=lambda t: _corpus(t, b"ok line\n\xff\xfe bad\n")),
    C("prepare-max-words-zero", "data", "prepare", "--corpus", "{tmp}/corpus", "--max-words", "0", "--cache-dir",
      "{tmp}/cache", says="--max-words", setup=lambda t: _corpus(t, b"a b c\n")),
    C("prepare-split-bogus", "data", "prepare", "--corpus", "{tmp}/corpus", "--split", "bogus", "--cache-dir",
      "{tmp}/cache", says="no *.bogus files", setup=lambda t: _corpus(t, b"a b c\n")),
    # train and run, refused before any training
    C("train-unknown-recipe", "train", "--model", "nope", "-o", "{tmp}/out", says="'nope'"),
    C("train-unknown-preset", "train", "--preset", "huge", "-o", "{tmp}/out", says="huge"),
    C("train-bad-schedule", "train", "--schedule", "4_XLM", "-o", "{tmp}/out", says="XLM", extra_lines=2),
    C("train-absurd-schedule", "train", "--schedule", "1000000000000_MLM", "-o", "{tmp}/out",
      "--max-words", "2000", "--no-progress", "--cache-dir", "{tmp}/cache", says="give fewer epochs",
      keeps=("cache",)),  # steps per epoch need the packed corpus: its cache may stay
    C("train-resume-and-overwrite", "train", "--resume", "--overwrite", "-o", "{tmp}/out", says="contradict"),
    C("train-device-bogus", "train", "--device", "bogus", "-o", "{tmp}/out", says="--device"),
    C("train-eval-every-bogus", "train", "--eval-every", "sometimes", "-o", "{tmp}/out", says="sometimes"),
    C("run-unknown-task", "run", "--tasks", "blimpp", "-o", "{tmp}/out", "--preset", "tiny",
      says="unknown task 'blimpp'"),
    C("run-bad-seeds", "run", "--seeds", "x", "-o", "{tmp}/out", "--preset", "tiny", says="'x'"),
    # issue #55: antlm-babyllama without its prefix names no recipe (the CLM-only baseline is babyllama-clm-only),
    # refused before anything is trained, with both names offered
    C("run-recipe-prefix-dropped", "run", "--model", "babyllama", "-o", "{tmp}/out", "--preset", "tiny",
      says="did you mean antlm-babyllama or babyllama-clm-only?"),
    C("run-recipe-prefix-dropped-ltgbert", "run", "--model", "ltgbert", "-o", "{tmp}/out", "--preset", "tiny",
      says="did you mean antlm-ltgbert"),
    C("run-limit-zero", "run", "--limit", "0", "-o", "{tmp}/out", "--preset", "tiny", says="--limit"),
    C("run-eval-limit-negative", "run", "--eval-limit", "-3", "-o", "{tmp}/out", "--preset", "tiny",
      says="--eval-limit"),
    C("run-max-words-zero", "run", "--max-words", "0", "-o", "{tmp}/out", "--preset", "tiny", says="--max-words"),
    C("run-bad-convention", "run", "--convention", "babylm-2023", "-o", "{tmp}/out", "--preset", "tiny",
      says="--convention"),
    C("run-bad-schedule", "run", "--schedule", "4_CLM+x_MLM", "-o", "{tmp}/out", "--preset", "tiny",
      says="character 7", extra_lines=2),
    # leaderboard and check
    C("leaderboard-missing-results", "leaderboard", "{tmp}/none", says="none"),
    C("leaderboard-empty-folder", "leaderboard", "{tmp}/empty", says="empty", setup=lambda t: (t / "empty").mkdir()),
    C("leaderboard-markup-folder", "leaderboard", "{tmp}/[/bold]", says="[/bold]",
      setup=lambda t: (t / "[" / "bold]").mkdir(parents=True)),
    C("leaderboard-unknown-definition", "leaderboard", "--definition", "nope", says="nope"),
    C("leaderboard-definition-invalid-yaml", "leaderboard", "--definition", "{tmp}/d.yaml", says="d.yaml",
      setup=lambda t: _write(t / "d.yaml", "name: [x\n")),
    C("leaderboard-definition-unknown-field", "leaderboard", "--definition", "{tmp}/d.yaml", says="d.yaml",
      setup=lambda t: _write(t / "d.yaml", "name: x\nresults: [r]\nbogus: 1\n")),
    C("leaderboard-definition-not-utf8", "leaderboard", "--definition", "{tmp}/d.yaml", says="d.yaml",
      setup=lambda t: _write(t / "d.yaml", b"name: \xff\n")),
    C("leaderboard-format-bogus", "leaderboard", "{run}", "--format", "bogus", "--out", "{tmp}/board.x",
      says="bogus", needs=("run",)),
    C("leaderboard-x-bogus", "leaderboard", "{run}", "--x", "bogus", says="--x bogus", needs=("run",)),
    C("leaderboard-plots-is-a-file", "leaderboard", "{run}", "--plots", "{tmp}/p.png", says="a file, not a folder",
      setup=lambda t: _write(t / "p.png", "x"), needs=("run",)),
    C("leaderboard-plots-is-a-link", "leaderboard", "{run}", "--plots", "{tmp}/p", says="a symbolic link",
      setup=lambda t: (t / "p").symlink_to(t / "elsewhere"), needs=("run",)),
    C("leaderboard-reference-bad", "leaderboard", "{run}", "--reference", "junk", says="--reference",
      needs=("run",)),
    C("leaderboard-scores-not-parquet", "leaderboard", "{tmp}/r", "--out", "{tmp}/board.md", says="scores.parquet",
      setup=lambda t: _write(t / "r" / "scores.parquet", b"not parquet")),
    C("check-missing", "check", "--results", "{tmp}/none", "--baseline", "{tmp}/none2", says="none"),
    C("check-tolerance-text", "check", "--results", "{run}", "--baseline", "{run}", "--tolerance", "abc",
      says="--tolerance", needs=("run",)),
    C("check-rule-bogus", "check", "--results", "{run}", "--baseline", "{run}", "--rule", "bogus", says="bogus",
      needs=("run",)),
    C("check-alpha-out-of-range", "check", "--results", "{run}", "--baseline", "{run}", "--alpha", "2",
      says="alpha", needs=("run",)),
    C("check-markup-folder", "check", "--results", "{tmp}/[/bold]", "--baseline", "{run}", says="[/bold]",
      needs=("run",), setup=lambda t: (t / "[" / "bold]").mkdir(parents=True)),
    # the command line itself
    C("unknown-command", "frobnicate", says="No such command"),
    C("unknown-top-option", "--bogus", says="No such option"),
    C("missing-required-option", "eval", says="--model"),
    # the environment: exit 4, the path named
    C("env-long-name-fetch-dest", "data", "fetch", "--url", "{url}/good.tar.gz", "--dest", "{tmp}/" + LONG + "/data",
      code=4, says="file name too long", needs=("server",)),
    C("env-long-name-leaderboard-out", "leaderboard", "{run}", "--out", "{tmp}/" + LONG + "/board.md", code=4,
      says="file name too long", needs=("run",)),
    C("env-long-name-prepare-cache", "data", "prepare", "--recipe", "babyllama-clm-only", "--corpus", "{tmp}/corpus",
      "--cache-dir", "{tmp}/" + LONG, code=4, says="file name too long", extra_lines=1,  # the corpus was read
      setup=lambda t: _corpus(t, b"a b c d e f g\n" * 50)),
    C("env-long-name-train-output", "train", "-o", "{tmp}/" + LONG + "/out", "--max-words", "2000", "--max-steps", "1",
      "--no-progress", "--cache-dir", "{tmp}/cache", code=4, says="file name too long"),
    C("env-disk-full-check-markdown", "check", "--results", "{run}", "--baseline", "{run}", "--markdown", "/dev/full",
      code=4, says="no space left", needs=("run",)),
    C("env-permission-fetch-dest", "data", "fetch", "--url", "{url}/good.tar.gz", "--dest", "{tmp}/locked/data",
      code=4, says="permission denied", needs=("server",), inject=_locked),
    C("env-permission-leaderboard-out", "leaderboard", "{run}", "--out", "{tmp}/locked/board.md", code=4,
      says="permission denied", needs=("run",), inject=_locked),
    # a lock file planted in a folder we write to: never written through, never removed (#25)
    C("lock-symlink-eval", "eval", "--model", "{model}", "--tasks", "blimp", "--limit", "1", "--output", "{tmp}/out",
      says="symbolic link", needs=("model",), setup=lambda t: _plant_lock(t, "symlink")),
    C("lock-folder-eval", "eval", "--model", "{model}", "--tasks", "blimp", "--limit", "1", "--output", "{tmp}/out",
      says="a folder", needs=("model",), setup=lambda t: _plant_lock(t, "folder")),
    C("lock-symlink-train", "train", "-o", "{tmp}/out", "--max-words", "2000", "--max-steps", "1", "--no-progress",
      "--cache-dir", "{tmp}/cache", says="symbolic link", setup=lambda t: _plant_lock(t, "symlink")),
    # export: only code we generate, only weights eval would load, never over the source or a non-export (#25)
    C("export-auto-map-evil", "export", "{tmp}/m", "{tmp}/out", says="evil.py",
      setup=lambda t: _model_with(t, "auto-map")),
    C("export-truncated-weights", "export", "{tmp}/m", "{tmp}/out", says="truncated or corrupt",
      setup=lambda t: _model_with(t, "truncated")),
    C("export-nan-weights", "export", "{tmp}/m", "{tmp}/out", says="NaN", setup=lambda t: _model_with(t, "nan")),
    C("export-overwrite-a-link", "export", "{tmp}/m", "{tmp}/link", "--overwrite", says="symbolic link",
      setup=lambda t: _export_targets(t, "link")),
    C("export-overwrite-not-an-export", "export", "{tmp}/m", "{tmp}/mine", "--overwrite",
      says="not an earlier antlm-bench export", setup=lambda t: _export_targets(t, "folder")),
    C("export-overwrite-its-own-run", "export", "{tmp}/run/checkpoints/phase-0-CLM", "{tmp}/run", "--overwrite",
      says="lies inside", setup=lambda t: _export_targets(t, "run")),
    # fetch: a zip bomb, a registry row that writes outside --dest (#25)
    C("fetch-zip-bomb", "data", "fetch", "--url", "{url}/bomb.zip", "--dest", "{tmp}/d/data", says="zip bomb",
      needs=("server",)),
    C("fetch-registry-dest-outside", "data", "fetch", "mine", "--dest", "{tmp}/d", says="leaves the data folder",
      setup=_own_registry, inject=_registry_env),
    # threads (#25)
    C("train-threads-zero", "train", "--threads", "0", "-o", "{tmp}/out", says="--threads"),
    C("run-threads-zero", "run", "--threads", "0", "-o", "{tmp}/out", "--preset", "tiny", says="--threads"),
]

# cases that fail today because of code owned elsewhere: id -> owner (none left)
XFAIL: dict[str, str] = {}


def _snapshot(folder: Path, keeps: tuple[str, ...] = ()) -> list[tuple[str, int]]:
    found = ((str(p.relative_to(folder)), p.lstat().st_size if not p.is_dir() else -1) for p in folder.rglob("*"))
    return sorted(f for f in found if f[0].split("/")[0] not in keeps)


@pytest.fixture(scope="module")
def server():
    with Server(b"", name="unused", paths=ARCHIVES, lifetime_s=300) as running:
        yield running


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    assert (MINI_RUN / "scores.parquet").is_dir(), f"{MINI_RUN}: the committed study's run is missing"
    folder = tmp_path_factory.mktemp("run")
    _run_copy(folder, "run")
    return folder / "run"


@pytest.fixture(scope="module", autouse=True)
def _report_tally(request):
    yield
    tried = sum(len(v) for v in TALLY.values())
    if not tried:
        return
    if os.environ.get("ANTLM_BAD_INPUT_TALLY"):  # where a closing note wants the figures
        Path(os.environ["ANTLM_BAD_INPUT_TALLY"]).write_text(json.dumps(TALLY, indent=1), encoding="utf-8")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    line = (f"bad-input corpus: tried {tried} / clean {len(TALLY['clean'])} / traceback {len(TALLY['traceback'])} "
            f"/ partial {len(TALLY['partial'])} / other {len(TALLY['other'])}")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_line(line)
        for kind in ("traceback", "partial", "other"):
            for entry in TALLY[kind]:
                reporter.write_line(f"  {kind}: {entry}")


def _params() -> list:
    out = []
    for case in CASES:
        marks = []
        owner = case.owner or XFAIL.get(case.id, "")
        if owner:
            marks.append(pytest.mark.xfail(strict=True, reason=f"fails today; owner: {owner}"))
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def test_corpus_is_big_and_ids_unique():
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", _params())
def test_bad_input(case: Case, tmp_path, monkeypatch, request):
    run_case(case, tmp_path, monkeypatch, request)


def run_case(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Run one case through the CLI and assert its contract (the corpus by class, tests/cli/test_bad_inputs_by_class.py,
    runs its cases through this too)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(registry, "_include_paths", [])  # --include-path is process state: one case's must not leak
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fill = {"tmp": str(tmp_path), "url": "", "model": "", "run": ""}
    if "server" in case.needs:
        fill["url"] = request.getfixturevalue("server").base
    if "model" in case.needs:
        fill["model"] = str(request.getfixturevalue("llama_dir"))
    if "run" in case.needs:
        fill["run"] = str(request.getfixturevalue("run_dir"))
    if case.setup is not None:
        case.setup(tmp_path)
    if case.inject is not None:
        case.inject(monkeypatch)
    args = [a.replace("{tmp}", fill["tmp"]).replace("{url}", fill["url"]).replace("{model}", fill["model"])
            .replace("{run}", fill["run"]) for a in case.args]
    before = _snapshot(tmp_path, case.keeps)
    result = CliRunner().invoke(app, args)
    output = result.output
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    traceback = result.exception is not None and not isinstance(result.exception, SystemExit)
    partial = _snapshot(tmp_path, case.keeps) != before
    clean = (not traceback and not partial and result.exit_code == case.code and len(errors) == 1
             and len(lines) <= 1 + case.extra_lines and case.says.lower() in errors[0].lower())
    kind = "clean" if clean else "traceback" if traceback else "partial" if partial else "other"
    detail = repr(result.exception) if traceback else (output.strip()[-300:] or f"exit {result.exit_code}")
    TALLY[kind].append(case.id + ("" if clean else f" ({detail})"))
    assert not traceback, f"traceback: {result.exception!r}"
    assert result.exit_code == case.code, output
    assert len(errors) == 1 and len(lines) <= 1 + case.extra_lines, output
    assert case.says.lower() in errors[0].lower(), output
    assert not partial, f"left behind: {sorted(set(_snapshot(tmp_path)) - set(before))}"


# -- the real entry point: python -m antlm_bench, real exit status, real stderr ----------------------------------------


@pytest.mark.parametrize(("args", "code", "says"), [
    (["data", "fetch", "--url", "notaurl"], 2, "--url 'notaurl'"),
    (["schedule", "[/bold]"], 2, "[/bold]"),
    (["data", "verify", "--data-dir", "/nonexistent/[/bold]/" + LONG], 2, "[/bold]"),
])
def test_entry_point_exit_codes(tmp_path, args, code, says):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "antlm_bench", *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.startswith("error:") and says in done.stderr.splitlines()[0]
    assert list(tmp_path.iterdir()) == []


def test_disk_full_through_the_entry_point_is_exit_4(tmp_path):
    """/dev/full: a real ENOSPC from the kernel."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = ["check", "--results", str(MINI_RUN), "--baseline", str(MINI_RUN), "--markdown", "/dev/full"]
    assert (MINI_RUN / "scores.parquet").is_dir(), f"{MINI_RUN}: the committed study's run is missing"
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    done = subprocess.run([sys.executable, "-m", "antlm_bench", *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 4, done.stderr
    error_lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert "Traceback" not in done.stderr and len(error_lines) == 1 and "/dev/full" in error_lines[0]




def test_file_size_limit_during_fetch_is_exit_4_naming_the_file(tmp_path):
    """A full disk, as RLIMIT_FSIZE makes it (CPython ignores SIGXFSZ, so the write fails with EFBIG): one line,
    exit 4, the file being written named; the download folder keeps nothing half-unpacked."""
    import resource

    big = make_tar([("data/big.bin", "file", os.urandom(400_000))])
    limit = 100_000

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    with Server(big, name="big.tar.gz") as server:
        done = subprocess.run([sys.executable, "-m", "antlm_bench", "data", "fetch", "--url", server.url, "--dest",
                               str(tmp_path / "d" / "data")], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env=env, preexec_fn=cap)
    assert done.returncode == 4, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "big.tar.gz.part" in lines[0], done.stderr
    assert not (tmp_path / "d" / "data").exists()
