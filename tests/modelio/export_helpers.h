#ifndef OVT_TESTS_TRAINER_EXPORT_HELPERS_H
#define OVT_TESTS_TRAINER_EXPORT_HELPERS_H

/* Shared by the suites that export runs and start runs from the files
 * (test_trn_export, test_trn_llama2c): what a run directory and a file
 * hold. Include after check.h and support/cli_fixture.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "trainer/checkpoint.h"
#include "trainer/init.h"
#include "trainer/run.h"
#include "trainer/state.h"

/* The text after `key` in the file at path, up to a comma, quote or line
 * end, into out ("" when absent). */
static inline void file_value(char *out, size_t cap, const char *path, const char *key)
{
    uint8_t *buf;
    size_t len;
    out[0] = 0;
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return;
    const char *p = strstr((char *)buf, key);
    if (p)
        snprintf(out, cap, "%.*s", (int)strcspn(p + strlen(key), ",\"\n"), p + strlen(key));
    free(buf);
}

/* The run's init_hash (run.json, hex) into out. */
static inline void init_hash_of(char out[65], const char *run)
{
    char path[512];
    snprintf(path, sizeof path, "%s/run.json", run);
    file_value(out, 65, path, "\"init_hash\": \"");
}

static inline void params_hash_hex(char out[65], const char *run, uint64_t step)
{
    char path[512];
    trn_state *st = NULL;
    snprintf(path, sizeof path, "%s/ckpt/step-%08llu.ckpt", run, (unsigned long long)step);
    out[0] = 0;
    CHECK(trn_checkpoint_read(&st, path) == 0);
    if (!st)
        return;
    ovt_hash h;
    trn_params_hash(&h, st);
    ovt_hex_encode(out, h.b, 32);
    trn_state_free(st);
}

static inline int same_files(const char *a, const char *b)
{
    uint8_t *x, *y;
    size_t nx, ny;
    if (ovt_read_file(a, &x, &nx, 1 << 26))
        return 0;
    if (ovt_read_file(b, &y, &ny, 1 << 26)) {
        free(x);
        return 0;
    }
    int same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

static inline void state0_of(char out[80], const char *run)
{
    char path[512];
    trn_step_table t;
    snprintf(path, sizeof path, "%s/steps.bin", run);
    out[0] = 0;
    CHECK(trn_step_table_read(&t, path) == 0);
    if (t.count)
        ovt_hex_encode(out, t.steps[0].state_hash.b, 32);
    trn_step_table_free(&t);
}

/* A state of model m (B 1, T 4) with params[i] = i / scale: exact floats
 * whose value says where they are (NULL after a failed CHECK). */
static inline trn_state *counting_params(const trn_model_config *m, float scale)
{
    trn_run_config rc;
    trn_config_default(&rc, m);
    rc.batch_size = 1;
    rc.seq_len = 4;
    trn_state *st = NULL;
    CHECK(trn_state_new(&st, &rc) == 0);
    for (size_t i = 0; st && i < st->layout.nparams; i++)
        st->params[i] = (float)i / scale;
    return st;
}

/* Makes DIR/tokens.bin from the GPL-3's bytes (byte tokens), its path into
 * data: 1, or 0 when the GPL-3 is absent (said, the CLI tests skipped). */
static inline int gpl_tokens(char *data, size_t cap)
{
    const char *gpl = "/usr/share/common-licenses/GPL-3";
    if (access(gpl, R_OK) != 0) {
        printf("%s absent: the CLI tests skipped\n", gpl);
        return 0;
    }
    snprintf(data, cap, "%s/tokens.bin", dir);
    CHECK(run_ovt("data text %s --out %s", gpl, data) == 0);
    return 1;
}

#endif
