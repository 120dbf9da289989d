"""Follow `run`'s and `sweep`'s options down to the trainer and a cell: the files they pass through (issue #52).

    python benchmarks/option_paths.py                  # this checkout
    python benchmarks/option_paths.py --rev 40f7227    # that commit's code first, then this checkout's, one table
    python benchmarks/option_paths.py --calls          # and every call that carried an option, file by file

Not a timing: a count of where the options go, the same on any machine. Each path is one child process running the
command in-process, under ``sys.setprofile``, with distinctive option values planted (``--max-words 123457
--eval-limit 604801 --seeds 424243 --save-every-minutes 97.31 --schedule 3_CLM+2_MLM+1_CLM``, preset tiny, device
cpu, a small corpus written to a temporary folder, an empty data folder). A call *carries an option* when it is a
call of a function defined in ``antlm_bench`` (module-level code, that is imports, and comprehensions aside) and
one of its arguments carries a planted value: the value itself (an int or float equal to it), a string containing
its text (so argv words count), or a container holding one, looked into recursively to depth 6: pydantic models'
fields, dataclass fields, dict keys and values, lists, tuples and sets (their first 256 items). ``self`` is an
argument like the others (a model's validator carries the option; a ``Trainer`` method does not); paths and other
objects are not looked into, and only the main thread is followed. A message carrying an option's text (a line the
command prints) counts: the option went there.

The paths, each from the command's entry (``python -m antlm_bench ...``, run in-process by ``runpy``):

- **run -> Trainer.__init__**: ``antlm-bench run ...`` until ``Trainer.__init__`` is entered (that call included);
- **sweep -> cell launch**: ``antlm-bench sweep ...`` (one cell, the local executor) until the executor starts the
  cell's process: ``subprocess.Popen`` is patched, and a launch of ``antlm_bench`` (``-m antlm_bench`` or the
  ``antlm-bench`` script) runs the cell in-process instead, with the cell's words, environment and working folder,
  after the package's ``functools`` caches are cleared (what a fresh process would compute, it computes);
- **cell -> Trainer.__init__**: that cell, from its entry until ``Trainer.__init__``;
- **sweep -> cell -> Trainer.__init__**: the two above, one after the other (the total);
- **Trainer.__init__ config -> first step**: inside the trainer of the ``run`` path, the calls from
  ``Trainer.__init__`` that carry its config (the object itself, or a planted value) until the first training
  step, which is the first backward pass (``torch.autograd.backward`` is patched to stop the process there: nothing
  trains).

The counts of a path, over its sequence of files (each call's file, consecutive repeats collapsed):
**files entered**: the distinct files; **returns**: entries into a file the path had already left (the sequence's
length less the distinct files). ``most`` names the file entered most often. A path that never reaches its end
(an error, a reused run) stops the benchmark with the child's output.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import runpy
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

MAX_WORDS, EVAL_LIMIT, SEED, SAVE_MINUTES = 123457, 604801, 424243, 97.31
SCHEDULE = "3_CLM+2_MLM+1_CLM"
PLANTED_NUMBERS = {MAX_WORDS, EVAL_LIMIT, SEED, SAVE_MINUTES}
PLANTED_TEXTS = tuple(str(v) for v in (MAX_WORDS, EVAL_LIMIT, SEED, SAVE_MINUTES)) + (SCHEDULE,)
DEPTH, ITEMS = 6, 256
# comprehensions and generator bodies are parts of the function that holds them
_SKIPPED_CODE = {"<module>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"}


def run_words(corpus: Path, output: Path) -> list[str]:
    return ["run", "--model", "antlm-babyllama", "--preset", "tiny", "--device", "cpu", "--tasks", "blimp",
            "--schedule", SCHEDULE, "--seeds", str(SEED), "--max-words", str(MAX_WORDS),
            "--eval-limit", str(EVAL_LIMIT), "--save-every-minutes", str(SAVE_MINUTES),
            "--corpus", str(corpus), "--output", str(output), "--quiet"]


def sweep_words(corpus: Path, output: Path) -> list[str]:
    return ["sweep", "--model", "antlm-babyllama", "--preset", "tiny", "--device", "cpu", "--tasks", "blimp",
            "--schedule", SCHEDULE, "--seeds", str(SEED), "--max-words", str(MAX_WORDS),
            "--run-option", f"eval-limit={EVAL_LIMIT}", "--run-option", f"save-every-minutes={SAVE_MINUTES}",
            "--run-option", f"corpus={corpus}", "--executor", "local", "--jobs", "1", "--output", str(output)]


def write_corpus(folder: Path) -> Path:
    """A few thousand words of varied sentences (enough for the tiny preset's tokenizer and one batch)."""
    nouns = ["cat", "dog", "bird", "child", "teacher", "river", "house", "garden", "apple", "story", "song", "ship"]
    verbs = ["sees", "likes", "finds", "tells", "builds", "follows", "paints", "hears", "keeps", "opens"]
    adjectives = ["small", "red", "quiet", "old", "bright", "happy", "green", "tall"]
    lines = []
    for i in range(1500):
        a, b = nouns[i % len(nouns)], nouns[(i * 7 + 3) % len(nouns)]
        lines.append(f"the {adjectives[i % len(adjectives)]} {a} {verbs[(i * 3) % len(verbs)]} a "
                     f"{adjectives[(i * 5 + 1) % len(adjectives)]} {b} number {i} .")
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "tiny.train").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


# ---------------------------------------------------------------------------------------------------------------
# the child: one path, traced


class _Stop(BaseException):
    """Raised at a path's end; a BaseException, so that no ``except Exception`` of the command swallows it."""


def carries(value: Any, config: Any, depth: int = DEPTH) -> bool:
    """Whether ``value`` holds a planted option value or ``config`` (by identity), looked into to ``depth``."""
    if config is not None and value is config:
        return True
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return value in PLANTED_NUMBERS
    if isinstance(value, str):
        return any(text in value for text in PLANTED_TEXTS)
    if depth <= 0:
        return False
    if isinstance(value, dict):
        items = list(value.items())[:ITEMS]
        return any(carries(k, config, depth - 1) or carries(v, config, depth - 1) for k, v in items)
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(carries(item, config, depth - 1) for item in list(value)[:ITEMS])
    fields = getattr(type(value), "model_fields", None)  # a pydantic model
    if isinstance(fields, dict) and hasattr(value, "model_dump"):
        return any(carries(getattr(value, name, None), config, depth - 1) for name in fields)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(carries(getattr(value, f.name, None), config, depth - 1) for f in dataclasses.fields(value))
    return False


class Tracer:
    """Records, segment by segment, every call of an ``antlm_bench`` function that carries an option."""

    def __init__(self, package: Path) -> None:
        self.package = str(package) + os.sep
        self.root = package.parent
        self.segments: dict[str, list[list[str]]] = {}
        self.segment: str | None = None  # None: not recording (before the start, after a path's end)
        self.trainer_segment = ""  # where calls go once Trainer.__init__ is entered
        self.config: Any = None  # Trainer.__init__'s config, once entered

    def start(self, segment: str, trainer_segment: str) -> None:
        self.segment, self.trainer_segment, self.config = segment, trainer_segment, None
        self.segments.setdefault(segment, [])

    def stop(self) -> None:
        """The path's end: what runs after it (the command unwinding, a failure record) is not recorded."""
        self.segment = None

    def profile(self, frame: Any, event: str, _arg: Any) -> None:
        if event != "call" or self.segment is None:
            return
        code = frame.f_code
        if not code.co_filename.startswith(self.package) or code.co_name in _SKIPPED_CODE:
            return
        n_args = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        names = code.co_varnames[:n_args]
        local = frame.f_locals
        qualname = getattr(code, "co_qualname", code.co_name)
        entering_trainer = qualname == "Trainer.__init__" and self.config is None
        if entering_trainer and len(names) > 1:
            self.config = local.get(names[1])
        matched = [name for name in names if name in local and carries(local[name], self.config)]
        if not matched:
            return
        where = os.path.relpath(code.co_filename, self.root)
        call = [where, qualname, ",".join(matched)]
        self.segments[self.segment].append(call)
        if entering_trainer:  # the path's end, and the trainer segment's start
            self.segment = self.trainer_segment
            self.segments.setdefault(self.segment, []).append(call)


def _clear_caches() -> None:
    """What a fresh process would compute, the next segment computes: every functools cache of the package."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "antlm_bench" or module is None:
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def _cell_launch(argv: Any) -> tuple[str, list[str]] | None:
    """(module, words) of a launch of the package (``python -m antlm_bench[.x] WORDS`` or ``antlm-bench WORDS``),
    else None."""
    if isinstance(argv, (str, bytes)) or not isinstance(argv, (list, tuple)):
        return None
    words = [str(word) for word in argv]
    for i in range(len(words) - 1):
        if words[i] == "-m" and words[i + 1].split(".")[0] == "antlm_bench":
            return words[i + 1], words[i + 2:]
    if words and Path(words[0]).name == "antlm-bench":
        return "antlm_bench", words[1:]
    return None


def _run_module(module: str, words: list[str]) -> None:
    """``python -m MODULE WORDS``, in this process; returns when the path ended (its _Stop)."""
    saved = sys.argv
    sys.argv = [module, *words]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    except _Stop:
        return
    except SystemExit as exit_:
        if isinstance(exit_.code, str):  # a cell's own failure, already said
            raise
        raise SystemExit(f"`python -m {module} {' '.join(words)}` ended (exit status {exit_.code}) before its "
                         "path's end") from None
    finally:
        sys.argv = saved
    raise SystemExit(f"`python -m {module} {' '.join(words)}` returned before its path's end")


def child(path: str, work: Path, out: Path) -> None:
    import torch.autograd

    import antlm_bench

    tracer = Tracer(Path(antlm_bench.__file__).resolve().parent)
    corpus, output = write_corpus(work / "corpus"), work / "output"
    real_popen = subprocess.Popen

    def first_step(*_args: Any, **_kwargs: Any) -> None:
        tracer.stop()
        raise _Stop

    class CellPopen:  # the local executor's launch of a cell: the cell runs here, in its own segment
        def __new__(cls, args: Any, *rest: Any, **kwargs: Any) -> Any:
            launch = _cell_launch(args)
            if launch is None:
                return real_popen(args, *rest, **kwargs)
            env, cwd = kwargs.get("env"), kwargs.get("cwd")
            saved_env, saved_cwd = dict(os.environ), os.getcwd()
            _clear_caches()
            tracer.start("cell", "cell-trainer")
            try:
                if env is not None:
                    os.environ.clear()
                    os.environ.update({str(k): str(v) for k, v in env.items()})
                if cwd is not None:
                    os.chdir(cwd)
                _run_module(*launch)
            finally:
                tracer.stop()
                os.environ.clear()
                os.environ.update(saved_env)
                os.chdir(saved_cwd)
            raise _Stop  # one cell is the path: the sweep stops here

    torch.autograd.backward = first_step  # type: ignore[assignment]
    words = run_words(corpus, output) if path == "run" else sweep_words(corpus, output)
    if path == "sweep":
        subprocess.Popen = CellPopen  # type: ignore[misc,assignment]
    tracer.start(path, "trainer" if path == "run" else "sweep-trainer")
    sys.setprofile(tracer.profile)
    try:
        _run_module("antlm_bench", words)
    finally:
        sys.setprofile(None)
        subprocess.Popen = real_popen  # type: ignore[misc]
    out.write_text(json.dumps(tracer.segments, indent=1), encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------------
# the parent: one child per path and code, then the table


@dataclasses.dataclass
class FollowedPath:
    """The calls of one path (file, function, arguments that carried an option) and its counts."""

    calls: list[list[str]]

    @functools.cached_property
    def sequence(self) -> list[str]:
        files = [call[0].removeprefix("antlm_bench/") for call in self.calls]
        return [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]

    @property
    def entered(self) -> int:
        return len(set(self.sequence))

    @property
    def returns(self) -> int:
        return len(self.sequence) - self.entered

    def most(self) -> str:
        if not self.sequence:
            return "-"
        name, times = Counter(self.sequence).most_common(1)[0]
        return f"{name} x{times}"


ROWS = [
    ("run -> Trainer.__init__", ("run",)),
    ("sweep -> cell launch", ("sweep",)),
    ("cell -> Trainer.__init__", ("cell",)),
    ("sweep -> cell -> Trainer.__init__ (total)", ("sweep", "cell")),
    ("Trainer.__init__ config -> first step", ("trainer",)),
]


def checkout(rev: str, folder: Path) -> Path:
    """The package as commit ``rev`` had it, unpacked into ``folder`` (``git archive``)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def measure(code_root: Path, path: str, scratch: Path) -> dict[str, list[list[str]]]:
    """One child process following ``path`` with ``code_root``'s package; its segments of calls."""
    work = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{path}-"))
    (work / "data").mkdir()
    out = work / "calls.json"
    env = {**os.environ, "PYTHONPATH": str(code_root), "ANTLM_BENCH_DATA": str(work / "data"),
           "XDG_CACHE_HOME": str(work / "cache"), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", path, "--work", str(work), "--out", str(out)]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not out.is_file():
        sys.exit(f"{path} with {code_root}: the child failed ({done.returncode}):\n"
                 f"{(done.stdout + done.stderr)[-4000:]}")
    segments = json.loads(out.read_text(encoding="utf-8"))
    ends = ["run", "trainer"] if path == "run" else ["sweep", "cell", "cell-trainer"]
    missing = [segment for segment in ends if not segments.get(segment)]
    if missing:
        sys.exit(f"{path} with {code_root}: no call carried an option in {', '.join(missing)}:\n"
                 f"{(done.stdout + done.stderr)[-4000:]}")
    return segments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", default=None, help="Also measure this commit's code (git archive), listed first.")
    parser.add_argument("--calls", action="store_true", help="Also list every call that carried an option.")
    parser.add_argument("--child", choices=["run", "sweep"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.work, args.out)
        return 0

    with tempfile.TemporaryDirectory(prefix="antlm-bench-option-paths-") as scratch:
        codes = [("this checkout", ROOT)]
        if args.rev:
            codes.insert(0, (args.rev[:12], checkout(args.rev, Path(tempfile.mkdtemp(dir=scratch, prefix="rev-")))))
        measured: dict[str, dict[str, list[list[str]]]] = {}
        for label, code_root in codes:
            measured[label] = {}
            for path in ("run", "sweep"):
                measured[label].update(measure(code_root, path, Path(scratch)))
                print(f"  {label}: {path} followed", file=sys.stderr, flush=True)

    print("| path | " + " | ".join(f"{label}: files entered | returns | calls | most entered" for label, _ in codes)
          + " |")
    print("|---|" + "---:|---:|---:|---|" * len(codes))
    for name, segments in ROWS:
        cells = []
        for label, _ in codes:
            path = FollowedPath([call for segment in segments for call in measured[label].get(segment, [])])
            cells.append(f"{path.entered} | {path.returns} | {len(path.calls)} | {path.most()}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for label, _ in codes:
        print(f"\n{label}: the files of each path, in order (consecutive repeats collapsed)")
        for name, segments in ROWS:
            if len(segments) > 1:
                continue  # the total is its parts one after the other
            path = FollowedPath(measured[label].get(segments[0], []))
            print(f"  {name}: " + " > ".join(path.sequence))
        if args.calls:
            for segment, calls in measured[label].items():
                print(f"\n  {label}, {segment}: the calls that carried an option (file, function, arguments)")
                for file, function, arguments in calls:
                    print(f"    {file}  {function}({arguments})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
