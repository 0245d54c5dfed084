#!/usr/bin/env python3
"""The gpt-oss engine against Hugging Face transformers (GptOssForCausalLM, fp32).

For one model directory (a snapshot from `llmr model synth`):
  1. logits of every position of a 300-token input (crossing the 128-token window):
     `llmr logits DIR --all FILE` against transformers in fp32, MXFP4 experts
     dequantized (by transformers' own Mxfp4Config(dequantize=True) when it loads, else
     by this script from the safetensors, by the published layout); relative L2 error
     per position, and the top-1 agreement;
  2. a greedy continuation of 64 tokens: `llmr run --prompt-ids ... --temperature 0`
     against transformers' generate(do_sample=False).
Prints a short table.  --tolerance fp32 (the CPU path): exits 1 when the relative L2
error reaches 1e-3 at any position or the continuations differ.  --tolerance bf16 (the
CUDA path, 16-bit activations): exits 1 when the relative L2 error of the logits (all
positions together) reaches 2e-2 or the top-1 agreement falls below 99%; the worst
position, the positions whose top-1 differs (with the reference's top-1/top-2 margin
there) and the greedy continuation are reported (16-bit rounding may flip a near-tie in
the router or the logits), beside a calibration: transformers itself in bf16 against
its fp32 run, by the same measures.

Usage: check_gpt_oss.py LLMR MODEL_DIR [--tokens 300] [--prompt 40] [--new 64]
                        [--tolerance fp32|bf16] [--options JSON]
       (LLMR finds its plugins through --plugin-dirs / LLMR_PLUGIN_DIRS as usual;
       --options goes to the engine: '{"cpu":1}' keeps it on the CPU with a GPU there)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ap = argparse.ArgumentParser()
ap.add_argument("llmr")
ap.add_argument("model_dir")
ap.add_argument("--tokens", type=int, default=300)
ap.add_argument("--prompt", type=int, default=40)
ap.add_argument("--new", type=int, default=64)
ap.add_argument("--tolerance", choices=["fp32", "bf16"], default="fp32")
ap.add_argument("--options", default=None)
args = ap.parse_args()
engine_opts = ["--options", args.options] if args.options else []

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
device = "cuda" if torch.cuda.is_available() else "cpu"

cfg = json.load(open(os.path.join(args.model_dir, "config.json")))
vocab = cfg["vocab_size"]
rng = np.random.default_rng(7)
ids = rng.integers(0, 199998, args.tokens).tolist()  # below the special tokens

# ---- llmr ----------------------------------------------------------------------------
tmp = tempfile.mkdtemp()
t0 = time.time()
subprocess.run([args.llmr, "logits", args.model_dir, "--ids", ",".join(map(str, ids)),
                "--all", os.path.join(tmp, "logits.bin")] + engine_opts, check=True)
t_llmr = time.time() - t0
ours = np.fromfile(os.path.join(tmp, "logits.bin"), dtype="<f4").reshape(args.tokens, vocab)

# ---- transformers -----------------------------------------------------------------------
import transformers  # noqa: E402
from transformers import GptOssConfig, GptOssForCausalLM  # noqa: E402

FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def dequantize(blocks, scales):
    """[..., G, 16] bytes and [..., G] E8M0 scales -> [..., G * 32] floats (low nibble first)."""
    lo, hi = FP4[blocks & 15], FP4[blocks >> 4]
    vals = np.stack([lo, hi], axis=-1).reshape(*blocks.shape[:-1], 32)
    vals = vals * np.exp2(scales.astype(np.int32) - 127)[..., None]
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32).astype(np.float32)


def load_by_hand():
    """transformers' model in fp32 without its quantizer: experts dequantized here."""
    from safetensors.torch import load_file
    c = GptOssConfig.from_pretrained(args.model_dir)
    c.quantization_config = None
    if hasattr(c, "_attn_implementation"):
        c._attn_implementation = "eager"
    model = GptOssForCausalLM(c).to(torch.float32)
    state = {}
    for name in sorted(os.listdir(args.model_dir)):
        if name.endswith(".safetensors"):
            state.update(load_file(os.path.join(args.model_dir, name)))
    params = dict(model.named_parameters())
    out = {}
    for k, v in state.items():
        if k.endswith("_blocks"):
            base = k[: -len("_blocks")]
            w = dequantize(v.numpy(), state[base + "_scales"].numpy())  # [E, rows, cols]
            want = tuple(params[base].shape)
            if w.shape != want:  # transformers keeps [E, in, out] and multiplies on the right
                w = np.ascontiguousarray(w.transpose(0, 2, 1))
            out[base] = torch.from_numpy(w)
        elif not k.endswith("_scales"):
            out[k] = v.to(torch.float32)
    missing, unexpected = model.load_state_dict(out, strict=False)
    if missing or unexpected:
        sys.exit(f"by-hand load: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model


how = "transformers' Mxfp4Config(dequantize=True)"
t0 = time.time()
try:
    from transformers import Mxfp4Config
    model = GptOssForCausalLM.from_pretrained(
        args.model_dir, torch_dtype=torch.float32, quantization_config=Mxfp4Config(dequantize=True),
        attn_implementation="eager")
    model = model.to(torch.float32)
except Exception as e:  # noqa: BLE001
    print(f"(transformers' quantizer did not load it: {type(e).__name__}: {str(e)[:200]}; "
          "dequantizing by hand)")
    how = "dequantized by this script"
    model = load_by_hand()
model = model.to(device).eval()
t_load = time.time() - t0
with torch.no_grad():
    ref = model(torch.tensor([ids], device=device)).logits[0].float().cpu().numpy()



def compare(got, want):
    """Per-position relative L2, the relative L2 of the whole tensor, top-1 agreement,
    and the positions whose top-1 differs with the reference's top-1/top-2 margin."""
    per = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
    whole = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    agree = got.argmax(axis=1) == want.argmax(axis=1)
    top2 = np.sort(want, axis=1)[:, -2:]
    margins = [(int(i), float(top2[i, 1] - top2[i, 0])) for i in np.flatnonzero(~agree)]
    return per, whole, float(agree.mean()), margins


rel, rel_whole, top1, misses = compare(ours, ref)
w = cfg.get("sliding_window", 128)

# ---- greedy continuations ------------------------------------------------------------------
prompt = ids[: args.prompt]
with torch.no_grad():
    gen = model.generate(torch.tensor([prompt], device=device), max_new_tokens=args.new,
                         do_sample=False, pad_token_id=cfg.get("pad_token_id", 0))
hf_new = gen[0, len(prompt):].tolist()
run = subprocess.run([args.llmr, "run", args.model_dir, "--prompt-ids", ",".join(map(str, prompt)),
                      "--temperature", "0", "--max-tokens", str(args.new), "--json"] + engine_opts,
                     check=True, capture_output=True, text=True)
ours_new = [json.loads(line)["id"] for line in run.stdout.splitlines() if line.startswith("{\"index\"")]
same = ours_new == hf_new
first_diff = next((i for i, (a, b) in enumerate(zip(ours_new, hf_new)) if a != b), None)

# Calibration for the bf16 tolerance: transformers itself with its weights and
# activations in bf16 against its fp32 run, the same measures.
calib = None
if args.tolerance == "bf16":
    with torch.no_grad():
        ref16 = model.to(torch.bfloat16)(torch.tensor([ids], device=device)).logits[0].float().cpu().numpy()
    calib = compare(ref16, ref)

if args.tolerance == "fp32":
    ok = rel.max() < 1e-3 and same
else:  # the bf16 tolerance: relative L2 of the logits under 2e-2, top-1 at >= 99%
    ok = rel_whole < 2e-2 and top1 >= 0.99
name = os.path.basename(os.path.normpath(args.model_dir))
print(f"\n{name}: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, "
      f"{cfg['num_local_experts']} experts, vocab {vocab}; transformers {transformers.__version__}, "
      f"torch {torch.__version__}, experts {how}")
print(f"{'measure':48s} value")
print(f"{'relative L2 of the logits (all positions)':48s} {rel_whole:.3e}")
print(f"{'relative L2 of logits, worst position':48s} {rel.max():.3e} (position {int(rel.argmax())})")
print(f"{'  median over positions':48s} {np.median(rel):.3e}")
print(f"{'  worst before / after position ' + str(w):48s} {rel[:w].max():.3e} / {rel[w:].max():.3e}")
print(f"{'top-1 agreement':48s} {top1 * 100:.1f}%")
if misses:
    print(f"{'  where it differs (position: reference margin)':48s} " +
          ", ".join(f"{i}: {m:.3g}" for i, m in misses[:12]))
if calib:
    c_rel, c_whole, c_top1, c_misses = calib
    print(f"{'calibration: transformers bf16 vs its fp32':48s} relative L2 {c_whole:.3e} "
          f"(worst position {c_rel.max():.3e}), top-1 {c_top1 * 100:.1f}%")
print(f"{'greedy ' + str(args.new) + ' tokens identical':48s} {same}" +
      ("" if same else f" (first difference at {first_diff}; llmr {len(ours_new)} tokens, "
                       f"transformers {len(hf_new)})"))
print(f"{'llmr logits of ' + str(args.tokens) + ' tokens (whole command)':48s} {t_llmr:.2f} s")
print(f"{'tolerance':48s} {args.tolerance}" + (" (max rel L2 < 1e-3, greedy identical)" if args.tolerance == "fp32"
                                                  else " (rel L2 of the logits < 2e-2, top-1 >= 99%)"))
print(f"{'transformers load':48s} {t_load:.2f} s")
print("RESULT", name, args.tolerance, "PASS" if ok else "FAIL")
print(json.dumps({"model": name, "tolerance": args.tolerance, "rel_l2": rel_whole,
                  "max_rel_l2": float(rel.max()), "median_rel_l2": float(np.median(rel)),
                  "top1": top1, "greedy_identical": same, "llmr_logits_s": t_llmr,
                  "calibration_bf16": None if not calib else
                  {"rel_l2": calib[1], "max_rel_l2": float(calib[0].max()), "top1": calib[2]}}))
sys.exit(0 if ok else 1)
