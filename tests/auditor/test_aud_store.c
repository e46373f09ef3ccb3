/* The artifact store: file:// put and get, content addressing checked on
 * every get (a corrupted blob, a state stored under another state's hash),
 * missing objects, manifests; http:// (blobs and manifests: the test server
 * answers at most 64 KiB, less than a checkpoint) against a tiny server on 127.0.0.1
 * that serves the file:// store's directory, plus a 404, a 500, a corrupted
 * body and an unreachable server, each a clear error. */
#include <unistd.h>

#include "aud_fixture.h"
#include "check.h"
#include "support/anvil.h"
#include "support/httpd.h"
#include "trainer/store.h"

int main(void)
{
    CHECK(af_init("aud-store") == 0);
    char url[600], dir[512];
    snprintf(dir, sizeof dir, "%s/store", af_dir);
    snprintf(url, sizeof url, "file://%s/", dir);
    trn_store *s;
    CHECK(trn_store_open(&s, "ftp://x") == OVT_EINVAL);
    CHECK(trn_store_open(&s, "file://relative/dir") == OVT_EINVAL);
    CHECK(trn_store_open(&s, url) == 0);

    /* Blobs are named by the SHA-256 of their bytes. */
    const char *text = "a rounding log, say";
    ovt_hash name, want, missing;
    CHECK(trn_store_put(s, text, strlen(text), &name) == 0);
    ovt_sha256(&want, text, strlen(text));
    CHECK_MEM(name.b, want.b, 32);
    CHECK(trn_store_has(s, &name) == 1);
    uint8_t *got;
    size_t len;
    CHECK(trn_store_get(s, &name, 1 << 20, &got, &len) == 0);
    CHECK(len == strlen(text) && memcmp(got, text, len) == 0);
    free(got);
    CHECK(trn_store_get(s, &name, 4, &got, &len) != 0); /* over the caller's limit */
    ovt_sha256(&missing, "nothing", 7);
    CHECK(trn_store_get(s, &missing, 1 << 20, &got, &len) == OVT_ENOTFOUND);
    CHECK(strstr(ovt_errmsg(), "not in the store"));
    /* A blob whose bytes changed on disk is refused. */
    char hex[65], path[1024];
    ovt_hex_encode(hex, name.b, 32);
    snprintf(path, sizeof path, "%s/blob/%s", dir, hex);
    CHECK(ovt_write_atomic(path, "a rounding log, sax", 19, 0644) == 0);
    CHECK(trn_store_get(s, &name, 1 << 20, &got, &len) == OVT_ECRYPTO);
    CHECK(strstr(ovt_errmsg(), "does not match its hash"));
    CHECK(ovt_write_atomic(path, text, strlen(text), 0644) == 0);

    /* States are named by their stateHash and checked by re-hashing. */
    trn_model_config m;
    trn_run_config rc;
    CHECK(trn_model_preset(&m, "gpt2-tiny") == 0);
    trn_config_default(&rc, &m);
    rc.batch_size = 2;
    rc.seq_len = 16;
    trn_state *st, *back;
    CHECK(trn_state_new(&st, &rc) == 0);
    trn_state_init(st);
    ovt_hash sh, other;
    trn_state_hash(&sh, st);
    CHECK(trn_store_put_state(s, st) == 0);
    CHECK(trn_store_get_state(s, &sh, &back) == 0);
    CHECK(back->step == 0 && memcmp(back->mem, st->mem, 3 * st->layout.nparams * sizeof(float)) == 0);
    trn_state_free(back);
    st->params[0] = 0.5f;
    trn_state_hash(&other, st);
    CHECK(trn_store_put_state(s, st) == 0);
    /* state/<sh> replaced by the other state's checkpoint: refused. */
    char a[1024], b[1024];
    ovt_hex_encode(hex, sh.b, 32);
    snprintf(a, sizeof a, "%s/state/%s", dir, hex);
    ovt_hex_encode(hex, other.b, 32);
    snprintf(b, sizeof b, "%s/state/%s", dir, hex);
    CHECK(tsup_runl(NULL, "/bin/cp", b, a, NULL) == 0);
    CHECK(trn_store_get_state(s, &sh, &back) == OVT_ECRYPTO);
    CHECK(trn_store_get_state(s, &other, &back) == 0);
    trn_state_free(back);
    trn_state_free(st);

    /* Manifests. */
    trn_store_manifest man = {.steps = 20}, rd;
    ovt_sha256(&man.run_id, "run", 3);
    man.config_hash = name;
    CHECK(trn_store_put_manifest(s, &man) == 0);
    CHECK(trn_store_get_manifest(s, &man.run_id, &rd) == 0);
    CHECK(rd.steps == 20 && memcmp(rd.config_hash.b, name.b, 32) == 0);
    CHECK(trn_store_get_manifest(s, &missing, &rd) == OVT_ENOTFOUND);
    trn_store_close(s);

    /* http:// through libcurl. */
    static af_server srv;
    srv.root = dir;
    tsup_httpd *httpd = &srv.httpd;
    CHECK(tsup_httpd_start(httpd, af_serve, &srv) == 0);
    snprintf(url, sizeof url, "%s/s", httpd->url);
    CHECK(trn_store_open(&s, url) == 0);
    CHECK(trn_store_get(s, &name, 1 << 20, &got, &len) == 0);
    CHECK(len == strlen(text) && memcmp(got, text, len) == 0);
    free(got);
    CHECK(trn_store_get_manifest(s, &man.run_id, &rd) == 0 && rd.steps == 20);
    CHECK(trn_store_get(s, &missing, 1 << 20, &got, &len) == OVT_ENOTFOUND);
    CHECK(trn_store_put(s, text, 3, NULL) == OVT_EIO); /* a server that takes no uploads: an error, not a silent success */
    srv.corrupt = 1;
    CHECK(trn_store_get(s, &name, 1 << 20, &got, &len) == OVT_ECRYPTO);
    srv.corrupt = 0;
    trn_store_close(s);
    snprintf(url, sizeof url, "%s/boom/", httpd->url);
    CHECK(trn_store_open(&s, url) == 0);
    CHECK(trn_store_get(s, &name, 1 << 20, &got, &len) == OVT_EIO);
    CHECK(strstr(ovt_errmsg(), "HTTP 500"));
    trn_store_close(s);
    tsup_httpd_stop(httpd);
    /* Nobody listening. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/s", tsup_free_port());
    CHECK(trn_store_open(&s, url) == 0);
    CHECK(trn_store_get(s, &name, 1 << 20, &got, &len) == OVT_EIO);
    trn_store_close(s);
    af_cleanup();
    return check_done();
}
