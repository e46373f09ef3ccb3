/* RUNDIR/commit.json: what `ovt commit` is doing, so that a run again after
 * any failure continues it (see commit.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chain/session.h"
#include "common/fileio.h"
#include "common/parse.h"
#include "party/commit.h"
#include "trainer/rundata.h"

static int journal_path(char *out, size_t cap, const char *dir)
{
    return trn_run_path(out, cap, dir, NULL, 0, "commit.json");
}

int party_commit_journal_save(const char *dir, const party_commit_journal *j)
{
    char path[4096], contract[43], rid[67];
    int rc = journal_path(path, sizeof path, dir);
    if (rc)
        return rc;
    chain_address_to_string(contract, &j->contract);
    chain_hash_hex(rid, &j->run_id);
    char nonce[24];
    snprintf(nonce, sizeof nonce, "%llu", (unsigned long long)j->nonce);
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:I, s:b}", "chain_id", (json_int_t)j->chain_id, "contract", contract,
                          "run_id", rid, "open_nonce", nonce, "from_block", (json_int_t)j->from_block, "joined",
                          j->joined);
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    rc = text ? ovt_write_atomic(path, text, strlen(text), 0644) : ovt_fail(OVT_ENOMEM, "out of memory");
    free(text);
    json_decref(o);
    return rc;
}

int party_commit_journal_load(const char *dir, party_commit_journal *j)
{
    char path[4096];
    memset(j, 0, sizeof *j);
    int rc = journal_path(path, sizeof path, dir);
    if (rc)
        return rc;
    uint8_t *text;
    size_t len;
    if ((rc = ovt_read_file(path, &text, &len, 1 << 16)))
        return rc;
    json_t *o = json_loadb((const char *)text, len, 0, NULL);
    free(text);
    const char *nonce = json_string_value(json_object_get(o, "open_nonce"));
    json_t *cid = json_object_get(o, "chain_id"), *fb = json_object_get(o, "from_block");
    j->chain_id = (uint64_t)json_integer_value(cid);
    j->from_block = (uint64_t)json_integer_value(fb);
    if (!o || !json_is_integer(cid) || !json_is_integer(fb) || json_integer_value(cid) < 0 ||
        json_integer_value(fb) < 0 || chain_json_address(&j->contract, o, "contract") ||
        chain_json_hash(&j->run_id, o, "run_id") || !nonce ||
        ovt_parse_u64(&j->nonce, "open_nonce", nonce, 0, UINT64_MAX) || !json_is_boolean(json_object_get(o, "joined"))) {
        json_decref(o);
        ovt_err_clear();
        return ovt_fail(OVT_EFORMAT, "%s is damaged; move it away and run ovt commit again", path);
    }
    j->joined = json_is_true(json_object_get(o, "joined"));
    json_decref(o);
    return 0;
}

int party_commit_find_event(const chain_arb *arb, const ovt_hash *run_id, chain_arb_event_kind kind,
                          const chain_address *party, uint64_t from_block, ovt_hash *tx, int *found)
{
    *found = 0;
    uint64_t head;
    int rc = chain_rpc_block_number(arb->rpc, &head);
    if (rc)
        return rc;
    if (from_block > head)
        return 0;
    chain_arb_event *ev;
    size_t n;
    if ((rc = chain_arb_get_events(arb, run_id, from_block, head, &ev, &n)))
        return rc;
    for (size_t i = 0; i < n && !*found; i++) {
        if (ev[i].kind != kind)
            continue;
        if (kind == CHAIN_ARB_EV_COMMITTED && party && !chain_address_eq(&ev[i].u.committed.party, party))
            continue;
        *tx = ev[i].tx_hash;
        *found = 1;
    }
    free(ev);
    return 0;
}
