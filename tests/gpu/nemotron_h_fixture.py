#!/usr/bin/env python3
"""Saves a small random NemotronH with transformers' save_pretrained and writes what
llmr's storage tests need: config.json and every safetensors header (the JSON text,
no tensor data), plus the sharded variant's index.  Run on a machine with
transformers (NemotronHConfig / NemotronHForCausalLM); output goes to argv[1].

The tensor names and shapes come from transformers itself, so the committed fixture
follows the real checkpoint layout rather than our reading of it."""
import json
import os
import shutil
import struct
import sys

import torch
import transformers
from transformers import NemotronHConfig, NemotronHForCausalLM

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
print("transformers", transformers.__version__, "torch", torch.__version__)

# Small widths, every layer kind of Nemotron 3 Nano: Mamba-2 (M), MoE (E), attention (*),
# plus the dense MLP (-) of earlier Nemotron-H models when this version knows it.
base = dict(
    vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
    head_dim=16, mamba_num_heads=4, mamba_head_dim=16, n_groups=2, ssm_state_size=8,
    conv_kernel=4, expand=2, intermediate_size=40, n_routed_experts=4,
    num_experts_per_tok=2, moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=48, n_shared_experts=1,
    mamba_proj_bias=False, use_conv_bias=True, use_bias=False, mlp_bias=False,
    tie_word_embeddings=False, max_position_embeddings=4096, use_mamba_kernels=False,
)
cfg = None
for pattern in ("M*EM-E", "M*EME"):
    try:
        cfg = NemotronHConfig(hybrid_override_pattern=pattern,
                              num_hidden_layers=len(pattern), **base)
        model = NemotronHForCausalLM(cfg)
        print("pattern", pattern, "accepted")
        break
    except Exception as e:  # noqa: BLE001 - report and try the next pattern
        print("pattern", pattern, "refused:", repr(e))
        cfg = None
if cfg is None:
    sys.exit("no pattern accepted")
torch.manual_seed(0)
model = model.to(torch.bfloat16)

def dump_headers(src, dst_prefix):
    for name in sorted(os.listdir(src)):
        p = os.path.join(src, name)
        if name.endswith(".safetensors"):
            with open(p, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = f.read(n)
            with open(os.path.join(out, dst_prefix + name + ".header.json"), "wb") as f:
                f.write(header)
            print(dst_prefix + name, "bytes", os.path.getsize(p), "header", n)
        elif name.endswith(".json"):
            shutil.copy(p, os.path.join(out, dst_prefix + name))

single = "/tmp/nemotron_single"
sharded = "/tmp/nemotron_sharded"
model.save_pretrained(single)
model.save_pretrained(sharded, max_shard_size="200KB")
dump_headers(single, "single.")
dump_headers(sharded, "sharded.")
sd = model.state_dict()
for k, v in sd.items():
    print(k, tuple(v.shape), str(v.dtype).replace("torch.", ""))
print("config keys:", sorted(json.load(open(os.path.join(single, "config.json")))))
