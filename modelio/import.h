#ifndef OVT_MODELIO_IMPORT_H
#define OVT_MODELIO_IMPORT_H

/* A run's starting parameters from a model file (docs/trainer.md,
 * "Fine-tuning"): `ovt train --init-from FILE` reads them here and hands
 * them to the training loop (trainer/loop.h), which commits to them
 * through init_hash (trainer/init.h). */

#include <stddef.h>

#include "trainer/config.h"

/* Reads starting parameters for a run of config rc from path, which is
 *   an ovt checkpoint (any run's, any step): its parameters; its model shape
 *       must equal rc's;
 *   an llm.c GPT-2 weight file (header of 256 int32: magic 20240326,
 *       version 3 = float32, maxT, V, L, NH, C, Vp; then the parameters in
 *       llm.c's order, wte with Vp >= V rows of which the first V are kept);
 *       its shape must equal rc's;
 *   a safetensors file under the export's names (modelio/export.h);
 *   a llama2.c file (modelio/llama2c.h): version 1 by its magic "ak42",
 *       the legacy version 0 (no magic) by its 28-byte header implying
 *       exactly the file's length; its shape (dim, hidden_dim, n_layers,
 *       n_heads, n_kv_heads, vocab_size, seq_len, the head tied or not) must
 *       equal rc's, whose rope_theta and norm_eps it takes, llama2.c storing
 *       neither; the legacy rotary tables are not read.
 * Values are rounded to rc's grid (krn_grid_round; the identity for b = 32
 * float32 values). *params gets nparams floats (malloc'd, the caller frees).
 * A wrong magic or version, a truncated file, a shape that differs (both
 * shapes named) or a non-finite value: OVT_EFORMAT or OVT_EINVAL with a
 * message naming the file. */
int trn_init_load(float **params, size_t *nparams, const trn_run_config *rc, const char *path) OVT_MUST_USE;

#endif
