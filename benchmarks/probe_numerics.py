"""Which settings outside base.numerics still change the bits a stage computes: a probe for portable numerics.

Portable numerics (src/paperdag/engine/numerics.py) pins what each library picks from the CPU. One machine cannot
be another CPU, but it can be told to act like one: glibc's libm picks its exp / log / sin variants by CPU feature
(GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,... makes it pick the ones a CPU without them runs), MKL its code path
(MKL_CBWR), ATen its kernels (ATEN_CPU_CAPABILITY). The probe runs one small computation in fresh processes under
the project's portable environment (params.yaml base.numerics) and under that environment with one of those
variables changed, and prints the md5 of each result family:

    tokenizer  paperdag.lm's byte-level BPE learnt from random words (the vocabulary)
    torch      the tiny Llama paperdag.lm builds on it, trained 40 AdamW steps (weights after training)
    ops        torch float32 elementwise functions (exp, tanh, sigmoid, sin, log, gelu, silu)
    numpy      numpy float64 transcendental functions (exp, tanh, sin, log) and float32 exp

A family whose md5 changes under a variant that only a different CPU would bring is a leak: the same stage could
compute other bits on that CPU. Variants the portable environment is meant to override (ATEN_CPU_CAPABILITY,
MKL_CBWR) are there to show the probe can see a change at all.

    .venv/bin/python benchmarks/probe_numerics.py        # ~1-2 CPU-minutes; prints a table
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import hashlib, json, random
import numpy as np
import torch
from paperdag.lm import TinyLMConfig, build_or_load

rng = random.Random(0)
words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 7))) for _ in range(400)]
texts = [" ".join(rng.choice(words) for _ in range(20)) for _ in range(300)]
cfg = TinyLMConfig(vocab_size=300, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=256,
                   steps=40, batch_size=16, lr=3e-3, warmup_steps=5, seed=0, threads=1)
model, tokenizer = build_or_load(cfg, texts, max_positions=128)
ids = [tokenizer(t)["input_ids"][:48] for t in texts]
n = min(len(i) for i in ids)
data = torch.tensor([i[:n] for i in ids])
opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
for step in range(cfg.steps):
    x = data[[(step * cfg.batch_size + j) % len(data) for j in range(cfg.batch_size)]]
    model(input_ids=x, labels=x).loss.backward()
    opt.step()
    opt.zero_grad()
w = hashlib.md5()
for _, v in sorted(model.state_dict().items()):
    w.update(v.detach().numpy().tobytes())
t = torch.linspace(-5, 5, 10001, dtype=torch.float32)
ops = torch.cat([t.exp(), t.tanh(), torch.sigmoid(t), t.sin(), (t.abs() + 1).log(), torch.nn.functional.gelu(t),
                 torch.nn.functional.silu(t)])
a = np.linspace(-5, 5, 10001)
npy = np.concatenate([np.exp(a), np.tanh(a), np.sin(a), np.log(np.abs(a) + 1), np.exp(a.astype(np.float32)).astype(np.float64)])
vocab = json.dumps(sorted(tokenizer.get_vocab().items())).encode()
print(json.dumps({"tokenizer": hashlib.md5(vocab).hexdigest()[:8], "torch": w.hexdigest()[:8],
                  "ops": hashlib.md5(ops.numpy().tobytes()).hexdigest()[:8], "numpy": hashlib.md5(npy.tobytes()).hexdigest()[:8]}))
"""

# variable -> value: what another CPU (or a setting portable mode should override) would bring
VARIANTS = {
    "glibc libm without AVX2/FMA (a CPU without them)": {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX,-AVX512F,-FMA4"},
    "glibc libm without AVX-512 (an AVX2-only CPU)": {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX512DQ,-AVX512BW,-AVX512VL"},
    "MKL_ENABLE_INSTRUCTIONS=SSE4_2 (MKL capped)": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "control: MKL_CBWR=AUTO (portable overrides it)": {"MKL_CBWR": "AUTO"},
    "control: ATEN_CPU_CAPABILITY=avx2 (portable overrides it)": {"ATEN_CPU_CAPABILITY": "avx2"},
}


def run(env: dict[str, str]) -> dict[str, str]:
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"probe failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    from paperdag.engine import numerics
    from paperdag.engine.params import load_params

    setting = numerics.from_params(load_params(ROOT))
    if setting.mode != "portable":
        raise SystemExit("params.yaml base.numerics.mode is not portable: nothing to probe")
    base = {**os.environ, **setting.env()}
    reference = run(base)
    keys = ("tokenizer", "torch", "ops", "numpy")
    print(f"{'environment':58s} " + " ".join(f"{k:10s}" for k in keys))
    print(f"{'portable (params.yaml base.numerics)':58s} " + " ".join(f"{reference[k]:10s}" for k in keys))
    for name, extra in VARIANTS.items():
        got = run({**base, **extra})
        print(f"{name:58s} " + " ".join(f"{got[k] + ('*' if got[k] != reference[k] else ''):10s}" for k in keys))
    print("* differs from portable: outside the controls, a leak (another CPU could compute these bits differently)")


if __name__ == "__main__":
    main()
