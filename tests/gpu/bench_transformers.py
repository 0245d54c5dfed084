#!/usr/bin/env python3
"""The peer of `llmr bench engine`: Hugging Face transformers running a gpt-oss model.

For one model directory (safetensors with MXFP4 experts) it loads GptOssForCausalLM in
bf16 on the GPU -- the experts dequantized by transformers' Mxfp4Config(dequantize=True)
when that loads, else however transformers loads the checkpoint by default (it says
which) -- and measures with the definitions of `llmr bench engine`:

  load     seconds from the start of from_pretrained to the model on the GPU;
  prefill  P / TTFT for each prompt length P (--prompts): TTFT is one forward of the
           P-token prompt (building its KV cache, logits of the last position only
           where the model takes logits_to_keep, as llmr computes one row) and the
           argmax of the last row, timed between torch.cuda.synchronize() calls;
  TTFT     the same for a --ttft-prompt-token prompt (default 100), in ms;
  decode   for each context C (--contexts), a prompt of max(C, 16) tokens and
           generate(do_sample=False, min_new_tokens=N+1, max_new_tokens=N+1) with a
           streamer that notes the time each new token reaches the host (after a
           synchronize): decode tok/s = N / (time of token N+1 - time of token 1), the
           same as llmr's N / (last token event - first token event).  As a check it
           also reports N / (time of that generate - time of a generate of 1 token of
           the same prompt) ("tok_s_by_difference"), which also counts generate's
           per-call overhead;
  memory   "vram_bytes": torch.cuda.memory_allocated() after the runs (what the model
           and its buffers hold); "peak_vram_used_bytes": the GPU's used memory
           (total - free, every process, as NVML's used memory in llmr's figure),
           the most seen after load and after each request; and torch's own
           max_memory_allocated as "max_memory_allocated_bytes".
Every figure is the median of --runs (default 3), after one warm-up (a 16-token
prompt and 8 new tokens); prefill and TTFT first run one untimed prompt of each length,
as llmr bench engine does.  Prompts are random token ids below 199998 (below
gpt-oss's special tokens) from a seeded generator.

Prints a table, then one JSON line with the keys of llmr bench engine's JSON where they
apply ("engine": "transformers X.Y.Z").

Usage: bench_transformers.py MODEL_DIR [--prompts 128,1024,4096] [--contexts 0,4096]
           [--decode-tokens 128] [--ttft-prompt 100] [--runs 3] [--attn eager|sdpa]
           [--seed 1] [--json FILE]
(--attn: default sdpa when the model takes it, else eager.)
"""
import argparse
import inspect
import json
import os
import statistics
import sys
import time

import torch

ID_LIMIT = 199998
WARMUP_PROMPT, WARMUP_TOKENS, MIN_DECODE_PROMPT = 16, 8, 16


def counts(text):
    try:
        v = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}")
    if not v or min(v) < 0:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}")
    return v


ap = argparse.ArgumentParser(description="gpt-oss in transformers, measured as llmr bench engine measures")
ap.add_argument("model_dir")
ap.add_argument("--prompts", type=counts, default=[128, 1024, 4096])
ap.add_argument("--contexts", type=counts, default=[0, 4096])
ap.add_argument("--decode-tokens", type=int, default=128)
ap.add_argument("--ttft-prompt", type=int, default=100)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--attn", choices=["eager", "sdpa"], default=None)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--json", default=None, help="also write the JSON line here")
args = ap.parse_args()
if min(args.prompts) < 1 or args.decode_tokens < 1 or args.ttft_prompt < 1 or args.runs < 1:
    ap.error("--prompts, --decode-tokens, --ttft-prompt and --runs take numbers of at least 1")
if not torch.cuda.is_available():
    sys.exit("bench_transformers.py: needs a CUDA GPU")

import transformers  # noqa: E402
from transformers import GptOssForCausalLM  # noqa: E402

cfg = json.load(open(os.path.join(args.model_dir, "config.json")))
vocab = cfg["vocab_size"]
max_positions = cfg.get("max_position_embeddings", 1 << 31)
pad_id = cfg.get("pad_token_id") or 0
gen = torch.Generator().manual_seed(args.seed)
dev = torch.device("cuda")
peak_used = 0


def sample_used():
    """The GPU's used memory (every process) into the peak."""
    global peak_used
    free, total = torch.cuda.mem_get_info()
    peak_used = max(peak_used, total - free)


def about_attention(e):
    text = str(e).lower()
    return "sdpa" in text or "attn" in text or "attention" in text


def load(attn):
    """(model, how the experts were loaded).  An error about the attention is raised."""
    common = dict(torch_dtype=torch.bfloat16, device_map="cuda", attn_implementation=attn)
    try:
        from transformers import Mxfp4Config
        m = GptOssForCausalLM.from_pretrained(
            args.model_dir, quantization_config=Mxfp4Config(dequantize=True), **common)
        return m, "Mxfp4Config(dequantize=True): experts in bf16"
    except Exception as e:  # noqa: BLE001
        if about_attention(e):
            raise
        print(f"(Mxfp4Config(dequantize=True) did not load it: {type(e).__name__}: "
              f"{str(e)[:200]}; loading as transformers does by default)", file=sys.stderr)
    m = GptOssForCausalLM.from_pretrained(args.model_dir, **common)
    return m, "transformers' default loading of the MXFP4 checkpoint"


sample_used()
t0 = time.perf_counter()
# sdpa unless asked otherwise or the model class says it does not take it
attn = args.attn or ("sdpa" if getattr(GptOssForCausalLM, "_supports_sdpa", True) else "eager")
try:
    model, how = load(attn)
except Exception as e:  # noqa: BLE001
    if args.attn or attn == "eager" or not about_attention(e):
        raise
    print(f"(attention {attn} refused: {type(e).__name__}: {str(e)[:200]}; using eager)",
          file=sys.stderr)
    attn = "eager"
    model, how = load(attn)
model.eval()
torch.cuda.synchronize()
load_s = time.perf_counter() - t0
sample_used()
keep = next((k for k in ("logits_to_keep", "num_logits_to_keep")
             if k in inspect.signature(model.forward).parameters), None)


def prompt_of(n):
    ids = torch.randint(0, min(vocab, ID_LIMIT), (1, n), generator=gen)
    return ids.to(dev)


@torch.inference_mode()
def ttft_s(n):
    """One forward of an n-token prompt and the argmax of its last row, in seconds."""
    ids = prompt_of(n)
    extra = {keep: 1} if keep else {}
    torch.cuda.synchronize()
    t = time.perf_counter()
    logits = model(input_ids=ids, use_cache=True, **extra).logits
    logits[0, -1].argmax().item()
    torch.cuda.synchronize()
    t = time.perf_counter() - t
    sample_used()
    return t


class Times:
    """A generate() streamer noting when each new token reaches the host."""

    def __init__(self):
        self.times, self.prompt_seen = [], False

    def put(self, value):
        if not self.prompt_seen:  # generate() first passes the prompt
            self.prompt_seen = True
            return
        torch.cuda.synchronize()
        self.times.append(time.perf_counter())

    def end(self):
        pass


@torch.inference_mode()
def generate(ids, new):
    """(seconds for the call, the times of its new tokens)."""
    streamer = Times()
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         min_new_tokens=new, max_new_tokens=new, pad_token_id=pad_id,
                         streamer=streamer)
    torch.cuda.synchronize()
    t = time.perf_counter() - t
    sample_used()
    if out.shape[1] - ids.shape[1] != new:
        sys.exit(f"generate gave {out.shape[1] - ids.shape[1]} tokens, not {new}")
    return t, streamer.times


rows = []


def row(what, value, unit, runs):
    rows.append((what, value, unit, runs))
    print(f"{what:28s} {value:14.3f} {unit:8s} {runs:5d}", flush=True)


name = os.path.basename(os.path.normpath(args.model_dir))
engine = f"transformers {transformers.__version__}"
device = torch.cuda.get_device_name(0)
print(f"{name} with {engine} (torch {torch.__version__}, attention {attn}; {how}) on {device}")
print(f"{'what':28s} {'value':>14s} {'unit':8s} {'runs':>5s}")
row("load", load_s, "s", 1)
skipped = []


def fits(kind, what, size, tokens):
    if tokens <= max_positions:
        return True
    print(f"{what:28s} skipped: needs {tokens} positions, the model has {max_positions}")
    skipped.append({"what": kind, "size": size, "needs": tokens})
    return False


ttft_s(WARMUP_PROMPT)  # warm-up: kernels, allocator, the generate path
generate(prompt_of(WARMUP_PROMPT), WARMUP_TOKENS)

prefill = []
for p in args.prompts:
    what = f"prefill {p}"
    if not fits("prefill", what, p, p + 1):
        continue
    ttft_s(p)  # the length's first prompt, untimed: the first use of its shapes
    ms = statistics.median(ttft_s(p) for _ in range(args.runs)) * 1e3
    row(what, p / (ms / 1e3), "tok/s", args.runs)
    prefill.append({"prompt": p, "tok_s": p / (ms / 1e3), "ttft_ms": ms})
what = f"TTFT, {args.ttft_prompt}-token prompt"
ttft_ms = None
if fits("ttft", what, args.ttft_prompt, args.ttft_prompt + 1):
    ttft_s(args.ttft_prompt)
    ttft_ms = statistics.median(ttft_s(args.ttft_prompt) for _ in range(args.runs)) * 1e3
    row(what, ttft_ms, "ms", args.runs)

decode = []
n = args.decode_tokens
for c in args.contexts:
    what = f"decode at {c}"
    plen = max(c, MIN_DECODE_PROMPT)
    if not fits("decode", what, c, plen + n + 1):
        continue
    by_stream, by_difference = [], []
    for _ in range(args.runs):
        ids = prompt_of(plen)
        t_full, times = generate(ids, n + 1)
        t_one, _ = generate(ids, 1)
        if len(times) != n + 1:
            sys.exit(f"the streamer saw {len(times)} new tokens, not {n + 1}")
        by_stream.append(n / (times[-1] - times[0]))
        by_difference.append(n / max(t_full - t_one, 1e-9))
    tok_s = statistics.median(by_stream)
    row(what, tok_s, "tok/s", args.runs)
    row("  by difference", statistics.median(by_difference), "tok/s", args.runs)
    decode.append({"context": c, "tok_s": tok_s, "ms_per_token": 1e3 / tok_s,
                   "tok_s_by_difference": statistics.median(by_difference)})

vram = torch.cuda.memory_allocated()
max_alloc = torch.cuda.max_memory_allocated()
row("VRAM the model holds", vram / 1e9, "GB", 1)
row("GPU memory used, peak", peak_used / 1e9, "GB", 1)
row("torch max allocated", max_alloc / 1e9, "GB", 1)
result = {"benchmark": "engine", "model": name, "engine": engine, "device": device,
          "load_s": load_s, "prefill": prefill, "ttft_ms": ttft_ms, "ttft_prompt": args.ttft_prompt,
          "decode": decode, "vram_bytes": vram, "ram_bytes": None, "peak_vram_used_bytes": peak_used,
          "max_memory_allocated_bytes": max_alloc, "runs": args.runs,
          "decode_tokens": args.decode_tokens, "seed": args.seed, "skipped": skipped,
          "attention": attn, "experts": how, "torch": torch.__version__}
line = json.dumps(result)
print(line)
if args.json:
    with open(args.json, "w") as f:
        f.write(line + "\n")
