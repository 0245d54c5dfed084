#!/usr/bin/env python3
"""Device check: `llmr inspect` on what transformers' save_pretrained really writes
for a small random NemotronHForCausalLM (single file and sharded), then on copies with
one tensor removed and one tensor misshaped.  Prints a table; exits 1 if any row fails.

Usage: check_nemotron_h.py LLMR_BINARY WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import NemotronHConfig, NemotronHForCausalLM

llmr, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
torch.manual_seed(0)
cfg = NemotronHConfig(
    hybrid_override_pattern="M*EM-E", num_hidden_layers=6, vocab_size=512, hidden_size=64,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, mamba_num_heads=4,
    mamba_head_dim=16, n_groups=2, ssm_state_size=8, conv_kernel=4, expand=2,
    intermediate_size=40, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=48, n_shared_experts=1, use_mamba_kernels=False)
model = NemotronHForCausalLM(cfg).to(torch.bfloat16)
single = os.path.join(work, "single")
sharded = os.path.join(work, "sharded")
model.save_pretrained(single)
model.save_pretrained(sharded, max_shard_size="200KB")
for d in (single, sharded):  # a safetensors model needs a tokenizer.json; content is not checked
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')


def variant(name, mutate):
    d = os.path.join(work, name)
    shutil.copytree(single, d)
    path = os.path.join(d, "model.safetensors")
    tensors = load_file(path)
    mutate(tensors)
    save_file(tensors, path, metadata={"format": "pt"})
    return d


missing_name = "backbone.layers.2.mixer.experts.1.up_proj.weight"
misshaped_name = "backbone.layers.1.mixer.k_proj.weight"
missing = variant("missing", lambda t: t.pop(missing_name))
misshaped = variant("misshaped", lambda t: t.__setitem__(misshaped_name, t[misshaped_name][:16].clone()))

rows, ok = [], True
for label, d, want_rc, must_say in [
    ("save_pretrained, one file", single, 0, '"runtime": "nemotron_h"'),
    ("save_pretrained, 2 shards + index", sharded, 0, '"runtime": "nemotron_h"'),
    ("one expert tensor removed", missing, 1, missing_name),
    ("k_proj cut to 16 rows", misshaped, 1, misshaped_name + " has shape [16, 64]"),
]:
    p = subprocess.run([llmr, "inspect", d], capture_output=True, text=True)
    said = p.stdout + p.stderr
    good = p.returncode == want_rc and must_say in said
    ok &= good
    first = (p.stderr.strip().splitlines() or [""])[-1] if p.returncode else \
        "tensor_count %d" % json.loads(p.stdout)["tensor_count"]
    rows.append((label, p.returncode, "ok" if good else "FAILED", first.strip()[:110]))

print("%-36s %-4s %-6s %s" % ("case", "exit", "result", "what llmr said"))
for r in rows:
    print("%-36s %-4d %-6s %s" % r)
sys.exit(0 if ok else 1)
