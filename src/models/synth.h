/* Synthetic model snapshots: a Hugging Face-layout directory (config.json,
 * generation_config.json, shards model-0000N-of-0000M.safetensors and their index)
 * with the real tensor names, dtypes and shapes of a preset, taken from the same
 * tensor list that validation checks against.  Tokenizer files are copied from a
 * directory given by the caller.
 *
 * Fill "zeros" writes the data as holes (sparse files): a 13 GB gpt-oss-20b snapshot
 * takes no disk space and a fraction of a second, which is what header-level tests
 * and benchmarks need. */
#ifndef LLMR_MODELS_SYNTH_H
#define LLMR_MODELS_SYNTH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/strbuf.h"
#include "llmr/status.h"

#define LLMR_SYNTH_DEFAULT_SHARD_BYTES 5000000000ull /* Hugging Face's default "5GB" */

typedef struct llmr_synth_options {
    const char *preset;        /* a name of llmr_gpt_oss_preset_names */
    const char *out_dir;       /* created; must not exist or be empty */
    const char *tokenizer_from; /* copy tokenizer files from here; NULL: none */
    uint64_t max_shard_bytes;  /* 0: LLMR_SYNTH_DEFAULT_SHARD_BYTES */
    FILE *progress;            /* one line per file written; NULL: quiet */
} llmr_synth_options;

llmr_status llmr_synth_snapshot(const llmr_synth_options *options, llmr_strbuf *err);

#endif
