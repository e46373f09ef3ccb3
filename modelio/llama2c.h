#ifndef OVT_MODELIO_LLAMA2C_H
#define OVT_MODELIO_LLAMA2C_H

/* llama2.c's checkpoint files (docs/formats.md, "llama2.c"), float32,
 * little-endian, in two versions:
 *   0 (legacy, the one llama2.c's run.c reads): 7 int32 dim, hidden_dim,
 *       n_layers, n_heads, n_kv_heads, vocab_size (negative when the output
 *       head is its own, not the token embedding), seq_len; then
 *       token_embedding (V, C), rms_att (L, C), wq (L, C, C), wk and wv
 *       (L, KV, C), wo (L, C, C), rms_ffn (L, C), w1 (L, H, C), w2 (L, C, H),
 *       w3 (L, H, C), rms_final (C), the rotary tables freq_cis_real and
 *       freq_cis_imag (seq_len, hs/2 each), then wcls (V, C) when not tied;
 *   1 (export.py's version1_export): 256 bytes of header: uint32 magic
 *       0x616b3432 ("ak42"), int32 version 1, the 7 int32 above with
 *       vocab_size positive, uint8 shared_classifier (1: tied), zeros; then
 *       rms_att, rms_ffn, rms_final, token_embedding, wq, wk, wv, wo, w1,
 *       w2, w3 and wcls when not tied; no rotary tables.
 * KV is n_kv_heads * hs, hs = C / n_heads; wq and wk rows in the
 * interleaved rotary order of ovt's layout, which is llama2.c's. Neither
 * version stores rope_theta or norm_eps. */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "trainer/config.h"
#include "trainer/layout.h"
#include "trainer/state.h"

#define TRN_LLAMA2C_MAGIC 0x616b3432u
#define TRN_LLAMA2C_PREFIX 40 /* the bytes trn_llama2c_parse looks at */

/* A parsed header: the file's version (0 or 1), its model (rope_theta and
 * norm_eps, which no version stores, are the caller's), the header's
 * length and the file length the header implies. */
typedef struct {
    uint32_t version;
    trn_model_config model;
    size_t header_len;
    uint64_t file_len;
} trn_llama2c_header;

/* Writes st's parameters as a llama2.c file of `version` (0 or 1) to path
 * (atomically). The legacy rotary tables hold cos and sin of t * freq_i,
 * freq_i = 1 / rope_theta^(2i / hs), for t < max_seq and i < hs/2, as
 * export.py's precompute_freqs_cis, computed in double and rounded to
 * float32 (ovt itself ignores them when it reads the file). OVT_EINVAL for
 * a model that is not a Llama or another version. */
int trn_export_llama2c(const char *path, const trn_state *st, uint32_t version) OVT_MUST_USE;

/* Whether the file's first n bytes start with version 1's magic. */
int trn_llama2c_has_magic(const uint8_t *prefix, size_t n);

/* Parses the header in the file's first n bytes (n >= TRN_LLAMA2C_PREFIX
 * unless the file is shorter): version 1 with its magic, else the legacy
 * header. theta and eps fill the model's rope_theta and norm_eps.
 * OVT_EFORMAT naming the fault for a version other than 1 after the magic,
 * a shared_classifier other than 0 or 1, or sizes that are not a Llama ovt
 * supports (trn_model_check). */
int trn_llama2c_parse(trn_llama2c_header *h, const uint8_t *prefix, size_t n, double theta,
                      double eps) OVT_MUST_USE;

/* Copies the parameters of file buf (h->file_len bytes, header h) into
 * params in layout l's order; l must be the layout of h->model. */
void trn_llama2c_import(float *params, const trn_layout *l, const trn_llama2c_header *h, const uint8_t *buf);

#endif
