"""The folder lock never writes through what someone planted at ``.antlm-bench.lock`` (a symbolic link, a hard
link, a folder, a FIFO): one line, exit 2, the planted thing and its target left as they were. Evaluations share
the lock (several append into one folder at once, every task landing); ``train``/``run`` hold it alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from antlm_bench.errors import UserError
from antlm_bench.locking import LOCK_FILE, folder_lock

REPO = Path(__file__).resolve().parents[2]


def _plant(folder: Path, kind: str, victim: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_FILE
    if kind == "symlink":
        lock.symlink_to(victim)
    elif kind == "dangling-symlink":
        lock.symlink_to(folder.parent / "not-there-yet.txt")
    elif kind == "hardlink":
        os.link(victim, lock)
    elif kind == "folder":
        lock.mkdir()
        (lock / "keep.txt").write_text("mine\n")
    elif kind == "fifo":
        os.mkfifo(lock)
    return lock


@pytest.mark.parametrize("kind", ["symlink", "dangling-symlink", "hardlink", "folder", "fifo"])
@pytest.mark.parametrize("shared", [False, True], ids=["exclusive", "shared"])
def test_a_planted_lock_path_is_refused_and_left_untouched(tmp_path, kind, shared):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = _plant(tmp_path / "out", kind, victim)
    before = os.lstat(lock)
    with pytest.raises(UserError) as caught:
        with folder_lock(tmp_path / "out", "eval", shared=shared):
            pytest.fail("took a lock through a planted path")
    message = str(caught.value)
    assert "\n" not in message and LOCK_FILE in message and "left as it is" in message
    assert victim.read_text() == "precious\n"
    assert os.lstat(lock).st_ino == before.st_ino  # not removed, not replaced
    assert not (tmp_path / "not-there-yet.txt").exists()  # a dangling link does not create its target
    if kind == "folder":
        assert (lock / "keep.txt").read_text() == "mine\n"


def test_eval_into_a_folder_with_a_planted_lock_link_is_exit_2_and_the_target_is_untouched(tmp_path, llama_dir,
                                                                                              real_data_dir):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    _plant(tmp_path / "out", "symlink", victim)
    done = subprocess.run([sys.executable, "-m", "antlm_bench", "eval", "--model", str(llama_dir), "--tasks", "blimp",
                           "--limit", "2", "--output", str(tmp_path / "out"), "-q", "--data-dir", str(real_data_dir)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "symbolic link" in lines[0], done.stderr
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [LOCK_FILE]


# -- shared (eval) against exclusive (train, run) ------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from antlm_bench.locking import folder_lock
    with folder_lock(Path(sys.argv[1]), sys.argv[2], shared=sys.argv[2] == "eval"):
        print("held", flush=True)
        time.sleep(120)
""")


def _hold(folder: Path, command: str) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), command], cwd=REPO, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_evaluations_share_the_lock_and_train_is_refused_while_one_holds_it(tmp_path):
    child = _hold(tmp_path / "out", "eval")
    try:
        with folder_lock(tmp_path / "out", "eval", shared=True):
            pass  # a second evaluation is let in
        with pytest.raises(UserError, match="eval .*evaluating into this folder"):
            with folder_lock(tmp_path / "out", "train"):
                pass
    finally:
        child.kill()
        child.wait()
    with folder_lock(tmp_path / "out", "train"):
        pass
    assert not (tmp_path / "out" / LOCK_FILE).exists()


def test_an_evaluation_is_refused_while_train_holds_the_folder(tmp_path):
    child = _hold(tmp_path / "out", "train")
    try:
        with pytest.raises(UserError, match=rf"pid {child.pid}\b.*writing this folder"):
            with folder_lock(tmp_path / "out", "eval", shared=True):
                pass
    finally:
        child.kill()
        child.wait()


def test_the_last_evaluation_out_removes_the_lock_file(tmp_path):
    child = _hold(tmp_path / "out", "eval")
    try:
        with folder_lock(tmp_path / "out", "eval", shared=True):
            pass
        assert (tmp_path / "out" / LOCK_FILE).exists()  # the other evaluation still holds it
    finally:
        child.terminate()  # SIGTERM: the holder's finally is not run, like a kill; the kernel drops the flock
        child.wait()
    with folder_lock(tmp_path / "out", "eval", shared=True):
        pass
    assert not (tmp_path / "out" / LOCK_FILE).exists()


# -- N real evaluations into one folder at once ----------------------------------------------------------------------

CONCURRENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import antlm_bench.evaluate as ev

    model, task, out, barrier, n, data = sys.argv[1:7]
    inner = ev._evaluate

    def all_inside(*args, **kwargs):
        # holding the folder's lock now: wait until every other evaluation holds it too, so they really overlap
        Path(barrier, task).touch()
        deadline = time.time() + 240
        while len(list(Path(barrier).iterdir())) < int(n):
            if time.time() > deadline:
                sys.exit("the other evaluations never got in")
            time.sleep(0.05)
        return inner(*args, **kwargs)

    ev._evaluate = all_inside
    ev.evaluate(model, [task], output_dir=out, limit=3, data_dir=data, progress=False, scoring="clm")
""")


@pytest.mark.parametrize("n", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_n_evaluations_into_one_folder_at_once_all_land(tmp_path, llama_dir, real_data_dir, n):
    from antlm_bench.results.store import read_scores

    tasks = ["blimp", "blimp_supplement", "ewok", "entity_tracking"][:n]
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    children = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(llama_dir), task, str(out), str(barrier),
                                  str(n), str(real_data_dir)], cwd=tmp_path, env=env, stderr=subprocess.PIPE,
                                 text=True) for task in tasks]
    errors = [child.communicate(timeout=600)[1] for child in children]
    assert [child.returncode for child in children] == [0] * n, errors
    landed = set(read_scores([out]).column("task").to_pylist())
    assert set(tasks) <= landed, landed
    assert json.loads((out / "eval.json").read_text())["config"]["tasks"]  # one whole record, not a torn one
    assert not (out / LOCK_FILE).exists()


def test_a_lock_released_after_its_folder_was_swapped_leaves_the_new_folders_lock(tmp_path):
    """export locks OUT, then renames a new folder onto it: releasing removes the file it locked, never the lock
    file another command has since taken in the folder now at that path."""
    folder = tmp_path / "out"
    folder.mkdir()
    with folder_lock(folder, "export"):
        folder.rename(tmp_path / "aside")
        folder.mkdir()
        (folder / LOCK_FILE).write_text("4242 export\n")  # another holder's, in the swapped-in folder
    assert (folder / LOCK_FILE).read_text() == "4242 export\n"
    assert (tmp_path / "aside" / LOCK_FILE).exists()  # ours stays with the folder we locked (export removes it)
