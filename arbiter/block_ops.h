#ifndef OVT_ARBITER_BLOCK_OPS_H
#define OVT_ARBITER_BLOCK_OPS_H

/* The ops the block engine (arbiter/block.h) knows: for each site name, how
 * the op's dimensions follow from the record's sizes (and the run config
 * where the sizes leave them open), which of the site's inputs it reads
 * whole, and the call that runs the op on some of its leading rows. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/site.h"
#include "trainer/config.h"

#define BLK_MAX_INPUTS 16 /* ARB_BLOCK_MAX_INPUTS */

/* What the record says: its output size and each input's size. */
typedef struct {
    uint64_t n;
    uint64_t S[BLK_MAX_INPUTS];
    size_t ninputs;
    const trn_run_config *cfg;
    uint64_t step;
} blk_rec;

/* The op's shape: R leading rows (every input read by rows has R of them,
 * as has the output), its dimensions d[] (the op's own), whether one block
 * needs every row, and the inputs read whole (bit m: input m). given[m] is
 * the engine's, not the shape's: the proven slice's own memory when input m
 * is read whole from one slice (else NULL), which a call that only reads
 * input m takes as its buffer instead of a copy (block mode's fill then
 * finds it already in place); a call must never write to it. */
typedef struct {
    uint64_t R;
    uint64_t d[6];
    bool whole;
    uint32_t whole_inputs;
    const float *given[BLK_MAX_INPUTS];
} blk_shape;

typedef struct {
    const char *name;
    unsigned target; /* the site's index among the sites the call runs */
    int (*shape)(const blk_rec *r, blk_shape *s);
    /* runs the op on `rows` of its R rows with buffers of its own (zeros
     * until block mode fills what the site reads) */
    int (*call)(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg);
} blk_op;

/* The op of a site name, or NULL. */
const blk_op *blk_op_find(const char *name);

/* The table's op names, 0 .. blk_op_count() - 1 (a test checks that every
 * one the chunk chain covers is also the contract's chunk op, and no other). */
size_t blk_op_count(void);
const char *blk_op_name(size_t i);

#endif
