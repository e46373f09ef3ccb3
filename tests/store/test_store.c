/* The artifact store: file:// put and get, content addressing checked on
 * every get (a corrupted blob, a state stored under another state's hash),
 * missing objects, manifests; http:// (blobs and manifests: the test server
 * answers at most 64 KiB, less than a checkpoint) against a tiny server on 127.0.0.1
 * that serves the file:// store's directory, plus a 404, a 500, a corrupted
 * body and an unreachable server, each a clear error. Per-object caps
 * (caps(), below): a rounding log over KRN_RLOG_MAX_FILE and starting
 * parameters one byte longer than their config allows, over file:// and
 * http:// (declared length, endless chunked body), through the auditor's
 * and the arbiter's fetches. */
#include <curl/curl.h>
#include <unistd.h>

#include "arbiter/evaluate.h"
#include "common/fileio.h"
#include "auditor/replay.h"
#include "support/ovt_fixture.h"
#include "check.h"
#include "kernels/rlog.h"
#include "support/anvil.h"
#include "support/httpd.h"
#include "trainer/checkpoint.h"
#include "trainer/init.h"
#include "trainer/run.h"
#include "store/store.h"

/* Per-object caps (docs/store.md, "Limits"): a rounding log is capped at
 * the format's limit (KRN_RLOG_MAX_FILE), a run's starting parameters at
 * exactly 4 bytes a parameter of its config's model. A store that serves
 * more is refused by the auditor (aud_fetch_run) and the arbiter
 * (arb_evaluate) with a message naming the object and the limit, having
 * taken no more than the cap and one libcurl buffer. */
typedef struct {
    af_server files;
    char endless_hex[65]; /* this object is an endless chunked body */
} caps_server;

static void caps_serve(void *ctx, const char *body, tsup_http_reply *reply)
{
    caps_server *cs = ctx;
    if (cs->endless_hex[0] && strstr(cs->files.httpd.request_line, cs->endless_hex)) {
        reply->endless = 1;
        return;
    }
    af_serve(&cs->files, body, reply);
}

/* The byte count in "... (refused after N bytes)". */
static size_t refused_after(const char *msg)
{
    const char *p = strstr(msg, "refused after ");
    return p ? (size_t)strtoull(p + 14, NULL, 10) : SIZE_MAX;
}

/* A run of steps = 1 whose config is rc, published under run_id, with
 * log_hash as step 1's logHash. */
static void publish_run(store_ctx *s, trn_run_config *rc, const char *dataset, const ovt_hash *log_hash,
                        const ovt_hash *run_id)
{
    uint8_t enc[TRN_CONFIG_ENC_MAX], *buf;
    size_t len;
    ovt_hash ch, named;
    CHECK(store_put(s, dataset, strlen(dataset), &rc->dataset_hash) == 0);
    size_t n = trn_config_encode(enc, rc);
    CHECK(store_put(s, enc, n, &named) == 0);
    trn_config_hash(&ch, rc);
    CHECK_MEM(ch.b, named.b, 32);
    chain_merkle_preimage steps[2];
    memset(steps, 0, sizeof steps);
    steps[1].log_hash = *log_hash;
    trn_step_table t = {.config_hash = ch, .count = 2, .steps = steps};
    store_manifest m = {.run_id = *run_id, .config_hash = ch, .dataset_hash = rc->dataset_hash, .steps = 1};
    CHECK(trn_step_table_encode(&t, &buf, &len) == 0);
    CHECK(store_put(s, buf, len, &m.steps_hash) == 0);
    free(buf);
    CHECK(store_put_manifest(s, &m) == 0);
}

static void caps(void)
{
    char dir[512], url[600], path[1024], fetched[600], hex[65], note[1024];
    snprintf(dir, sizeof dir, "%s/caps", af_dir);
    snprintf(url, sizeof url, "file://%s", dir);
    store_ctx *s;
    CHECK(store_open(&s, url) == 0);
    /* A small MLP starting from given parameters (zeros): 4 * nparams bytes. */
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 1, .width = 8, .in_dim = 8, .n_class = 4};
    trn_run_config with_init, from_seed;
    trn_config_default(&with_init, &m);
    trn_config_default(&from_seed, &m);
    size_t want;
    CHECK(trn_init_blob_len(&with_init, &want) == 0);
    CHECK(want == 4 * (8 * 8 + 8 + 4 * 8 + 4));
    uint8_t *params = calloc(1, want + 1);
    CHECK(params != NULL);
    ovt_sha256(&with_init.init_hash, params, want);
    /* blob/<init_hash> holds one byte more than the config allows. */
    ovt_hex_encode(hex, with_init.init_hash.b, 32);
    snprintf(path, sizeof path, "%s/blob/%s", dir, hex);
    CHECK(ovt_mkdirs(dir, 0755) == 0);
    snprintf(fetched, sizeof fetched, "%s/blob", dir);
    CHECK(ovt_mkdirs(fetched, 0755) == 0);
    CHECK(ovt_write_atomic(path, params, want + 1, 0644) == 0);
    /* A log over the format's limit: a sparse file of KRN_RLOG_MAX_FILE + 1 bytes. */
    ovt_hash log_name;
    ovt_sha256(&log_name, "a log too long", 14);
    char log_hex[65];
    ovt_hex_encode(log_hex, log_name.b, 32);
    snprintf(path, sizeof path, "%s/blob/%s", dir, log_hex);
    FILE *f = fopen(path, "wb");
    CHECK(f && ftruncate(fileno(f), (off_t)KRN_RLOG_MAX_FILE + 1) == 0);
    if (f)
        fclose(f);
    ovt_hash run_init, run_seed, zero;
    memset(&zero, 0, sizeof zero);
    ovt_sha256(&run_init, "run from init", 13);
    ovt_sha256(&run_seed, "run from seed", 13);
    publish_run(s, &with_init, "dataset A", &zero, &run_init);
    publish_run(s, &from_seed, "dataset B", &log_name, &run_seed);
    char limit_init[32], limit_log[32];
    snprintf(limit_init, sizeof limit_init, "%zu", want);
    snprintf(limit_log, sizeof limit_log, "%zu", (size_t)KRN_RLOG_MAX_FILE);

    /* file://: refused by size before reading. */
    snprintf(fetched, sizeof fetched, "%s/caps-f1", af_dir);
    int rv = aud_fetch_run(s, &run_init, fetched, NULL);
    CHECK_MSG(rv == OVT_EFORMAT && strstr(ovt_errmsg(), "starting parameters") && strstr(ovt_errmsg(), limit_init),
              "%d %s", rv, ovt_errmsg());
    snprintf(fetched, sizeof fetched, "%s/caps-f2", af_dir);
    rv = aud_fetch_run(s, &run_seed, fetched, NULL);
    CHECK_MSG(rv == OVT_EFORMAT && strstr(ovt_errmsg(), "rounding log of step 1") && strstr(ovt_errmsg(), limit_log),
              "%d %s", rv, ovt_errmsg());
    /* The arbiter: step 0 needs the starting parameters, step 1 the log. */
    chain_arb_params run;
    chain_arb_game g;
    arb_eval e;
    memset(&run, 0, sizeof run);
    memset(&g, 0, sizeof g);
    trn_config_hash(&run.config_hash, &with_init);
    run.dataset_hash = with_init.dataset_hash;
    CHECK(arb_evaluate(&e, s, &run_init, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK_MSG(e.input[ARB_IN_STATE] == ARB_INPUT_MISMATCH && strstr(note, "starting parameters") &&
                  strstr(note, limit_init),
              "%s", note);
    trn_config_hash(&run.config_hash, &from_seed);
    run.dataset_hash = from_seed.dataset_hash;
    g.index = 1;
    g.trainer_log = log_name;
    CHECK(arb_evaluate(&e, s, &run_seed, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK_MSG(e.input[ARB_IN_LOG] == ARB_INPUT_MISMATCH && strstr(note, "rounding log j") && strstr(note, limit_log),
              "%s", note);
    store_close(s);

    /* http://: the init blob with its true Content-Length is refused before
     * its body; as an endless chunked body, after at most the cap and one
     * buffer. The log as an endless body likewise. */
    static caps_server cs;
    memset(&cs, 0, sizeof cs);
    cs.files.root = dir;
    CHECK(tsup_httpd_start(&cs.files.httpd, caps_serve, &cs) == 0);
    snprintf(url, sizeof url, "%s/s", cs.files.httpd.url);
    CHECK(store_open(&s, url) == 0);
    snprintf(fetched, sizeof fetched, "%s/caps-h1", af_dir);
    rv = aud_fetch_run(s, &run_init, fetched, NULL);
    CHECK_MSG(rv == OVT_EFORMAT && strstr(ovt_errmsg(), "starting parameters") && strstr(ovt_errmsg(), limit_init) &&
                  strstr(ovt_errmsg(), "Content-Length"),
              "%d %s", rv, ovt_errmsg());
    memcpy(cs.endless_hex, hex, sizeof hex);
    snprintf(fetched, sizeof fetched, "%s/caps-h2", af_dir);
    rv = aud_fetch_run(s, &run_init, fetched, NULL);
    CHECK_MSG(rv == OVT_EFORMAT && strstr(ovt_errmsg(), "starting parameters") && strstr(ovt_errmsg(), limit_init) &&
                  refused_after(ovt_errmsg()) > want && refused_after(ovt_errmsg()) <= want + CURL_MAX_WRITE_SIZE,
              "%d %s", rv, ovt_errmsg());
    trn_config_hash(&run.config_hash, &with_init);
    run.dataset_hash = with_init.dataset_hash;
    memset(&g, 0, sizeof g);
    CHECK(arb_evaluate(&e, s, &run_init, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK_MSG(e.input[ARB_IN_STATE] == ARB_INPUT_MISMATCH && strstr(note, "starting parameters") &&
                  strstr(note, limit_init) && refused_after(note) <= want + CURL_MAX_WRITE_SIZE,
              "%s", note);
    /* The log: KRN_RLOG_MAX_FILE (514 MiB) streamed to a temporary file, then refused. */
    memcpy(cs.endless_hex, log_hex, sizeof log_hex);
    snprintf(fetched, sizeof fetched, "%s/caps-h3", af_dir);
    rv = aud_fetch_run(s, &run_seed, fetched, NULL);
    size_t got = refused_after(ovt_errmsg());
    CHECK_MSG(rv == OVT_EFORMAT && strstr(ovt_errmsg(), "rounding log of step 1") && strstr(ovt_errmsg(), limit_log) &&
                  got > KRN_RLOG_MAX_FILE && got <= KRN_RLOG_MAX_FILE + CURL_MAX_WRITE_SIZE,
              "%d %s", rv, ovt_errmsg());
    printf("caps: %s\n", ovt_errmsg());
    store_close(s);
    tsup_httpd_stop(&cs.files.httpd);
    free(params);
}

int main(void)
{
    CHECK(af_init("aud-store") == 0);
    char url[600], dir[512];
    snprintf(dir, sizeof dir, "%s/store", af_dir);
    snprintf(url, sizeof url, "file://%s/", dir);
    store_ctx *s;
    CHECK(store_open(&s, "ftp://x") == OVT_EINVAL);
    CHECK(store_open(&s, "file://relative/dir") == OVT_EINVAL);
    CHECK(store_open(&s, url) == 0);

    /* Blobs are named by the SHA-256 of their bytes. */
    const char *text = "a rounding log, say";
    ovt_hash name, want, missing;
    CHECK(store_put(s, text, strlen(text), &name) == 0);
    ovt_sha256(&want, text, strlen(text));
    CHECK_MEM(name.b, want.b, 32);
    CHECK(store_has(s, &name) == 1);
    uint8_t *got;
    size_t len;
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == 0);
    CHECK(len == strlen(text) && memcmp(got, text, len) == 0);
    free(got);
    CHECK(store_get(s, &name, 4, &got, &len) != 0); /* over the caller's limit */
    ovt_sha256(&missing, "nothing", 7);
    CHECK(store_get(s, &missing, 1 << 20, &got, &len) == OVT_ENOTFOUND);
    CHECK(strstr(ovt_errmsg(), "not in the store"));
    /* A blob whose bytes changed on disk is refused. */
    char hex[65], path[1024];
    ovt_hex_encode(hex, name.b, 32);
    snprintf(path, sizeof path, "%s/blob/%s", dir, hex);
    CHECK(ovt_write_atomic(path, "a rounding log, sax", 19, 0644) == 0);
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == OVT_ECRYPTO);
    CHECK(strstr(ovt_errmsg(), "does not match its hash"));
    CHECK(ovt_write_atomic(path, text, strlen(text), 0644) == 0);

    /* States are checkpoint bytes named by their stateHash, which the
     * store takes as given and serves as stored: the reader decodes them
     * and checks the stateHash (arbiter/evaluate.c). */
    trn_model_config m;
    trn_run_config rc;
    CHECK(trn_model_preset(&m, "gpt2-tiny") == 0);
    trn_config_default(&rc, &m);
    rc.batch_size = 2;
    rc.seq_len = 16;
    trn_state *st, *back;
    CHECK(trn_state_new(&st, &rc) == 0);
    trn_state_init(st);
    ovt_hash sh, h;
    uint8_t *ckpt, *got_ckpt;
    size_t ckpt_len, got_len, exact;
    trn_state_hash(&sh, st);
    CHECK(trn_checkpoint_encode(st, &ckpt, &ckpt_len) == 0);
    CHECK(trn_checkpoint_size(&exact, &rc) == 0 && exact == ckpt_len);
    CHECK(store_put_state(s, &sh, ckpt, ckpt_len) == 0);
    CHECK(store_get_state(s, &sh, exact, &got_ckpt, &got_len) == 0);
    CHECK(got_len == ckpt_len && memcmp(got_ckpt, ckpt, ckpt_len) == 0);
    CHECK(trn_checkpoint_decode(&back, got_ckpt, got_len) == 0);
    trn_state_hash(&h, back);
    CHECK_MEM(h.b, sh.b, 32);
    trn_state_free(back);
    free(got_ckpt);
    /* a get is capped at the caller's bound: one byte short of the checkpoint is refused */
    CHECK(store_get_state(s, &sh, exact - 1, &got_ckpt, &got_len) != 0 && got_ckpt == NULL);
    /* The arbiter decodes state j-1 and refuses one that is not the state its name says. */
    ovt_hash other;
    ovt_sha256(&other, "not the stateHash of st", 23);
    CHECK(store_put_state(s, &other, ckpt, ckpt_len) == 0);
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    chain_arb_params run = {.steps = 1};
    CHECK(store_put(s, enc, trn_config_encode(enc, &rc), &run.config_hash) == 0);
    chain_arb_game g = {.index = 1, .previous_state = other};
    arb_eval e;
    char note[1024];
    CHECK(arb_evaluate(&e, s, &sh, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK_MSG(e.input[ARB_IN_STATE] == ARB_INPUT_MISMATCH && strstr(note, "another stateHash"), "%s", note);
    g.previous_state = sh;
    g.index = 2;
    CHECK(arb_evaluate(&e, s, &sh, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK_MSG(e.input[ARB_IN_STATE] == ARB_INPUT_MISMATCH && strstr(note, "not the state before"), "%s", note);
    free(ckpt);
    trn_state_free(st);

    /* Manifests. */
    store_manifest man = {.steps = 20}, rd;
    ovt_sha256(&man.run_id, "run", 3);
    man.config_hash = name;
    CHECK(store_put_manifest(s, &man) == 0);
    CHECK(store_get_manifest(s, &man.run_id, &rd) == 0);
    CHECK(rd.steps == 20 && memcmp(rd.config_hash.b, name.b, 32) == 0);
    CHECK(store_get_manifest(s, &missing, &rd) == OVT_ENOTFOUND);
    /* "ranks" (a sharded run's ranks.json) is optional: absent above, round
     * trips when given, and a malformed one reads as absent (a hint). */
    CHECK(store_get_manifest(s, &man.run_id, &rd) == 0 && !rd.has_ranks);
    man.has_ranks = true;
    ovt_sha256(&man.ranks_hash, "ranks", 5);
    CHECK(store_put_manifest(s, &man) == 0);
    CHECK(store_get_manifest(s, &man.run_id, &rd) == 0 && rd.has_ranks &&
          memcmp(rd.ranks_hash.b, man.ranks_hash.b, 32) == 0 && rd.steps == 20);
    {
        char rid[65], ch[65], mpath[1024], mtext[512];
        ovt_hex_encode(rid, man.run_id.b, 32);
        ovt_hex_encode(ch, name.b, 32);
        snprintf(mpath, sizeof mpath, "%s/run/%s.json", dir, rid);
        snprintf(mtext, sizeof mtext,
                 "{\"version\": 1, \"run_id\": \"%s\", \"config\": \"%s\", \"dataset\": \"%s\", "
                 "\"steps_table\": \"%s\", \"steps\": 20, \"ranks\": \"not a hash\"}", rid, ch, ch, ch);
        CHECK(ovt_write_atomic(mpath, mtext, strlen(mtext), 0644) == 0);
        CHECK(store_get_manifest(s, &man.run_id, &rd) == 0 && !rd.has_ranks && rd.steps == 20);
    }
    man.has_ranks = false;
    CHECK(store_put_manifest(s, &man) == 0);
    store_close(s);

    /* http:// through libcurl. */
    static af_server srv;
    srv.root = dir;
    tsup_httpd *httpd = &srv.httpd;
    CHECK(tsup_httpd_start(httpd, af_serve, &srv) == 0);
    snprintf(url, sizeof url, "%s/s", httpd->url);
    CHECK(store_open(&s, url) == 0);
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == 0);
    CHECK(len == strlen(text) && memcmp(got, text, len) == 0);
    free(got);
    CHECK(store_get_manifest(s, &man.run_id, &rd) == 0 && rd.steps == 20);
    CHECK(store_get(s, &missing, 1 << 20, &got, &len) == OVT_ENOTFOUND);
    CHECK(store_put(s, text, 3, NULL) == OVT_EIO); /* a server that takes no uploads: an error, not a silent success */
    srv.corrupt = 1;
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == OVT_ECRYPTO);
    srv.corrupt = 0;
    store_close(s);
    snprintf(url, sizeof url, "%s/boom/", httpd->url);
    CHECK(store_open(&s, url) == 0);
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == OVT_EIO);
    CHECK(strstr(ovt_errmsg(), "HTTP 500"));
    store_close(s);
    tsup_httpd_stop(httpd);
    /* Nobody listening. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/s", tsup_free_port());
    CHECK(store_open(&s, url) == 0);
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == OVT_EIO);
    store_close(s);
    CHECK_RUN(caps());
    af_cleanup();
    return check_done();
}
