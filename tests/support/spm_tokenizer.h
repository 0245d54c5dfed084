/* SentencePiece-style BPE tokenizer.json documents, made by the tests: a BPE with
 * byte fallback and <unk>, trained here (deterministically) on a small built-in
 * text, in the two layouts Hugging Face uses for SentencePiece models:
 *
 *   SPM_LLAMA2     normalizer Prepend("▁") + Replace(" " -> "▁"), no pre-tokenizer,
 *                  decoder Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", 1, 0)
 *   SPM_METASPACE  pre_tokenizer Metaspace(prepend_scheme "first", split false),
 *                  decoder Metaspace, ByteFallback, Fuse
 *
 * Both add <s> with a TemplateProcessing post-processor. */
#ifndef LLMR_TESTS_SPM_TOKENIZER_H
#define LLMR_TESTS_SPM_TOKENIZER_H

#include <stddef.h>

typedef enum spm_style { SPM_LLAMA2, SPM_METASPACE } spm_style;

/* The tokenizer.json text (malloc'd).  n_merges: how many merges to learn. */
char *spm_tokenizer_json(spm_style style, size_t n_merges);

#endif
