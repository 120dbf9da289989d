#!/usr/bin/env bash
# Training throughput of the `paper` presets on a CUDA machine: bf16 autocast, a fixed number of optimizer steps of
# CLM and MLM for BabyLlama (vs a plain transformers LlamaForCausalLM loop) and LTG-BERT, tokens/s and model FLOP
# utilisation (MFU against 989 TFLOP/s, the H100/H200 dense bf16 peak). Then a short end-to-end `antlm-bench train`
# on CUDA (checkpoint, resume) as a smoke test. About 3 minutes on an H200.
#
#   bash benchmarks/gpu.sh            # from anywhere; PYTHON=python3.12 to choose the interpreter
#
# Never installs or upgrades torch. The package itself goes in with `pip install --no-deps -e .` where that works
# offline, else it is used from the checkout through PYTHONPATH. A missing pure-Python dependency (pydantic on
# the lab's GPU image) can travel as wheels in .whl/ (see the end of this file).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

"$PY" - <<'EOF'
import sys, torch
if not torch.cuda.is_available():
    sys.exit("benchmarks/gpu.sh: torch sees no CUDA device here")
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
      f"bf16 {torch.cuda.is_bf16_supported()}")
EOF

if ! "$PY" -c "import pydantic" 2>/dev/null; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/antlm-site .whl/*.whl
    export PYTHONPATH="/tmp/antlm-site${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "pydantic is missing and there is no .whl/ folder with its wheels (see the end of benchmarks/gpu.sh)" >&2
    exit 1
  fi
fi
if ! "$PY" -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1; then
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # offline and no hatchling: use the checkout as is
fi
"$PY" -c "import antlm_bench, transformers; print('antlm_bench', antlm_bench.__version__, 'from', antlm_bench.__file__, '| transformers', transformers.__version__)"

# 1. paper presets: preset micro-batches (64 sequences of 128), then larger micro-batches (fewer launches)
"$PY" benchmarks/training.py --presets paper --device cuda --threads 0 --steps 8 --rounds 3 --warmup 3 --mfu
"$PY" benchmarks/training.py --presets paper --device cuda --threads 0 --steps 8 --rounds 3 --warmup 3 --mfu \
  --micro-batch-size 256

# 2. end to end on CUDA: a tiny run on a synthetic corpus, stopped early, resumed to the end
work=$(mktemp -d)
"$PY" - "$work/corpus" <<'EOF'
import sys
sys.path.insert(0, "tests")
from pathlib import Path
from trainer_support import write_corpus
write_corpus(Path(sys.argv[1]), n_words=20000)
EOF
common=(train --model antlm-ltgbert --preset tiny --device cuda --corpus "$work/corpus" --cache-dir "$work/cache"
        --output "$work/run" --schedule "1_CLM+1_MIX(CLM:1,MLM:3)+1_MNTP" --no-progress)
"$PY" -m antlm_bench "${common[@]}" --max-steps 5
"$PY" -m antlm_bench "${common[@]}" --resume
"$PY" - "$work/run" <<'EOF'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
record = json.loads((run / "run.json").read_text())
lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
print(f"end-to-end: status {record['status']}, {len(lines)} steps on {record['device']} ({record['autocast']}), "
      f"loss {lines[0]['loss']:.3f} -> {lines[-1]['loss']:.3f}, checkpoints "
      f"{sorted(p.name for p in (run / 'checkpoints').iterdir())}")
assert record["status"] == "finished" and [l["step"] for l in lines] == list(range(1, len(lines) + 1))
EOF
rm -rf "$work"

# Carrying pydantic to a machine without it (run here, on a machine with pip and the internet, in the repo root):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     pydantic==2.13.4 pydantic_core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2
# and carry .whl along with the working tree.
