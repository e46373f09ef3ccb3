#ifndef OVT_DATA_SPTOK_H
#define OVT_DATA_SPTOK_H

/* SentencePiece BPE with byte fallback, the tokenizer of Llama 2 (and of
 * Mistral, which shares its format), loaded from a Hugging Face
 * tokenizer.json (docs/trainer.md, "Llama 2 tokens"): model.type "BPE" with
 * byte_fallback, the normalizer that prepends "▁" (U+2581) and turns each
 * space into "▁", no pre-tokenizer, the 256 byte tokens <0x00>..<0xFF>.
 *
 * Encoding merges, one at a time, the adjacent pair whose merge ranks best,
 * the leftmost of equals, as the npm package @lenml/tokenizers (transformers.js)
 * does; a character that is not a token becomes its UTF-8 bytes' tokens.
 * Where ovt differs from that package, on purpose, so that every text decodes
 * back byte for byte: a literal "▁" in the text is byte tokens (the package
 * reads it as a space), a byte that is not UTF-8 is its own byte token (node
 * reads it as U+FFFD), and "<s>", "</s>" or "<unk>" in the text are text, not
 * control tokens (as in SentencePiece and llama2.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct data_sptok data_sptok;

/* Loads and checks tokenizer.json at path; every malformation is an
 * OVT_EFORMAT naming the file. */
int data_sptok_load(data_sptok **out, const char *path) OVT_MUST_USE;
void data_sptok_free(data_sptok *t);

/* The number of token ids (32000 for Llama 2), and the id of "<s>". */
uint32_t data_sptok_vocab(const data_sptok *t);
uint32_t data_sptok_bos(const data_sptok *t);

/* Tokenizes text[0..n) into *tokens (malloc'd, *count of them), "<s>" first
 * when bos. */
int data_sptok_encode(data_sptok *t, const uint8_t *text, size_t n, bool bos, uint32_t **tokens,
                      size_t *count) OVT_MUST_USE;

/* The bytes of ids[0..count) (malloc'd *text, *n of them): "▁" is a space,
 * <0xNN> the byte NN, control tokens nothing, and the space the normalizer
 * put first is dropped. OVT_EINVAL for an id outside the vocabulary. */
int data_sptok_decode(const data_sptok *t, const uint32_t *ids, size_t count, uint8_t **text,
                      size_t *n) OVT_MUST_USE;

#endif
