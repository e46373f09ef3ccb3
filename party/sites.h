#ifndef OVT_PARTY_SITES_H
#define OVT_PARTY_SITES_H

/* A party's site hashes for a run with proof of replay (docs/contract.md,
 * "Proof of replay"): for every step i the output root of the rounding site
 * the run's beacon picks (chain_arb_site_index over the step's sites), from
 * the party's own replay; step 0's is zero. Their tree (the site tree, leaves
 * chain_merkle_site_leaf_hash) is what the party commits (the auditor) or
 * reveals (the trainer) and bisects in a replay dispute. Kept in
 * DIR/sites.bin (docs/formats.md, "Site hashes") so an agent restarted
 * later plays the same tree. */

#include <stdint.h>

#include "auditor/replay.h"
#include "chain/arbitration.h"

typedef struct {
    ovt_hash beacon;
    uint64_t count; /* steps + 1 */
    ovt_hash *hash; /* count */
    chain_merkle *tree;
} party_sites;

/* From a replay's site roots (aud_report: nsites per step) and the beacon. */
int party_sites_from_report(party_sites *out, const aud_report *r, const ovt_hash *beacon,
                            const ovt_hash *run_id) OVT_MUST_USE;

/* Fault injection (devnet tests only): a lazy auditor that replayed steps
 * 1..from-1 only (r's site roots there) and guesses the rest without a
 * replay: SHA-256("ovt.lazy" || stateHash_i) of the trainer's published
 * step table (r->trainer). */
int party_sites_guess(party_sites *out, const aud_report *r, uint64_t from, const ovt_hash *beacon,
                      const ovt_hash *run_id) OVT_MUST_USE;

/* The trainer's own: its run directory replayed on the cpu backend, every
 * step traced (data_path: the dataset). */
int party_sites_compute(party_sites *out, const char *run_dir, const char *data_path, const ovt_hash *beacon,
                        const ovt_hash *run_id) OVT_MUST_USE;

/* DIR/sites.bin, written atomically; read back with its beacon checked
 * (OVT_ENOTFOUND when there is no file). */
int party_sites_save(const party_sites *s, const char *dir) OVT_MUST_USE;
int party_sites_load(party_sites *out, const char *dir, const ovt_hash *beacon, const ovt_hash *run_id) OVT_MUST_USE;

void party_sites_free(party_sites *s);

#endif
