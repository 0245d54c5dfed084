/* Synthetic model snapshots: a Hugging Face-layout directory (config.json,
 * generation_config.json, shards model-0000N-of-0000M.safetensors and their index,
 * tokenizer files, chat_template.jinja) with the real tensor names, dtypes and
 * shapes of a preset, taken from the same tensor list that validation checks
 * against.
 *
 * Fill "zeros" writes the data as holes (sparse files): a 13 GB gpt-oss-20b snapshot
 * takes no disk space and a fraction of a second, which is what header-level tests
 * and benchmarks need.  Fill "random" writes weights with the scales of a trained
 * model (see llmr_synth_random_fill), so that an engine running the snapshot sees
 * finite activations and routing that is not degenerate; the bytes depend on the
 * seed only, not on the thread count or the shard size.
 *
 * The caller owns the options and everything they point to; nothing is kept after
 * a call.  Errors are returned with the reason in `err`; a failed call can leave a
 * partly written out_dir behind (never a partly written file under its final name). */
#ifndef LLMR_MODELS_SYNTH_H
#define LLMR_MODELS_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/strbuf.h"
#include "llmr/status.h"
#include "storage/st_writer.h"

#define LLMR_SYNTH_DEFAULT_SHARD_BYTES 5000000000ull /* Hugging Face's default "5GB" */

typedef enum llmr_synth_fill {
    LLMR_SYNTH_FILL_ZEROS, /* holes: sparse files (the zero value of the options) */
    LLMR_SYNTH_FILL_RANDOM, /* llmr_synth_random_fill */
    LLMR_SYNTH_FILL_SPARSE  /* the experts' MXFP4 blocks zeros as holes, their scales 2^0
                               (bytes of 127, which the GPU path takes: it refuses scales
                               outside 2^-23..2^13), every other tensor random: a full-size
                               model on a small disk whose routers spread tokens over the
                               experts, for timing */
} llmr_synth_fill;

typedef struct llmr_synth_options {
    const char *preset;         /* a name of llmr_gpt_oss_preset_names */
    const char *out_dir;        /* created; must not exist or be empty */
    /* Tokenizer files (tokenizer.json, which must be there, and tokenizer_config.json,
     * special_tokens_map.json, chat_template.jinja when present) are copied from
     * tokenizer_from; when it is NULL, from the first directory of tokenizer_search
     * (NULL-terminated) that holds tokenizer.json, and it is an error (NOT_FOUND,
     * naming the places tried) when none does.  Both NULL: no tokenizer files. */
    const char *tokenizer_from;
    const char *const *tokenizer_search;
    llmr_synth_fill fill;       /* default (zero value): zeros */
    uint64_t seed;              /* random fill: the seed */
    unsigned threads;           /* random fill: threads; 0: the number of online CPUs */
    uint64_t max_shard_bytes;   /* 0: LLMR_SYNTH_DEFAULT_SHARD_BYTES */
    /* Progress, at most about one line a second, and a summary at the end; NULL:
     * quiet. */
    FILE *progress;
} llmr_synth_options;

llmr_status llmr_synth_snapshot(const llmr_synth_options *options, llmr_strbuf *err);

/* The bytes [offset, offset + len) of tensor t as the random fill writes them, for
 * a tensor of a gpt-oss checkpoint, chosen by its name:
 *   BF16 *embed_tokens.weight   normal(0, 1)
 *   BF16 *norm.weight           normal(1, 0.05)   (RMSNorm weights)
 *   BF16 *.sinks                normal(1, 0.5)
 *   BF16 *bias, *_bias          normal(0, 0.02)
 *   BF16 other [out, in]        normal(0, 1/sqrt(in))   (linear weights, lm_head)
 *   BF16 other                  normal(0, 0.02)
 *   U8 *_blocks                 uniform bytes (two FP4 E2M1 codes each)
 *   U8 *_scales [.., in/32]     E8M0 exponents putting the decoded rows' rms near
 *                               1/sqrt(in), each block's exponent +-1 at random
 *   U8 other                    uniform bytes
 *   other dtypes                zeros
 * Deterministic: a function of (seed, tensor name, element index) only, so any
 * range can be filled on its own and in any thread.  BF16 values are rounded to
 * nearest even from float. */
void llmr_synth_random_fill(const llmr_st_write_tensor *t, uint64_t seed, uint64_t offset,
                            uint8_t *buf, size_t len);

/* The chat template written when the tokenizer source has none (a stand-in for
 * gpt-oss's harmony template; static). */
extern const char llmr_synth_chat_template[];

#endif
