#ifndef OVT_TRAINER_PLOT_H
#define OVT_TRAINER_PLOT_H

/* The loss curve of a run: RUNDIR/loss.csv (header "step,loss,lr,grad_norm,
 * log_entries", one row per step) and RUNDIR/loss.svg, a line chart with
 * axes, ticks and labels that any browser opens. Both are written
 * atomically (ovt_write_atomic). */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct {
    uint64_t step;
    double loss, lr, grad_norm;
    uint64_t log_entries;
} trn_loss_row;

int trn_loss_csv_write(const char *path, const trn_loss_row *rows, size_t n) OVT_MUST_USE;

/* Reads a loss.csv written by trn_loss_csv_write (for --resume); rows are
 * malloc'd. OVT_EFORMAT with the line number on a malformed line. */
int trn_loss_csv_read(const char *path, trn_loss_row **rows, size_t *n) OVT_MUST_USE;

/* title is escaped for XML. n may be 0 (an empty chart with a note). */
int trn_loss_svg_write(const char *path, const trn_loss_row *rows, size_t n, const char *title) OVT_MUST_USE;

#endif
