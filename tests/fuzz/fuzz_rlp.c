/* Fuzz target: the strict RLP decoder and the signed-transaction decoder.
 * Property: whatever the decoder accepts is canonical, so encoding the
 * decoded tree again gives back exactly the input. */
#include <stdlib.h>
#include <string.h>

#include "chain/rlp.h"
#include "chain/tx.h"

static void reencode(chain_buf *out, const chain_rlp_item *item)
{
    if (!item->is_list) {
        chain_rlp_put_bytes(out, item->payload, item->len);
        return;
    }
    size_t start = chain_rlp_list_begin(out);
    size_t pos = 0;
    chain_rlp_item child;
    while (chain_rlp_list_next(item, &pos, &child) == 1)
        reencode(out, &child);
    chain_rlp_list_end(out, start);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    chain_rlp_item item;
    if (chain_rlp_decode_whole(&item, data, size) == 0) {
        chain_buf out;
        chain_buf_init(&out);
        reencode(&out, &item);
        if (out.len != size || memcmp(out.data, data, size) != 0)
            abort(); /* accepted a non-canonical encoding */
        chain_buf_free(&out);
        uint64_t v;
        chain_u256 w;
        if (!item.is_list && chain_rlp_get_uint(&v, &item) == 0) {
            chain_buf_init(&out);
            chain_rlp_put_uint(&out, v);
            if (out.len != size || memcmp(out.data, data, size) != 0)
                abort(); /* an integer that does not round-trip */
            chain_buf_free(&out);
        }
        (void)!chain_rlp_get_u256(&w, &item);
    }
    chain_tx tx;
    chain_sig sig;
    chain_address sender;
    if (chain_tx_decode_signed(&tx, &sig, &sender, data, size) == 0) {
        chain_buf out;
        chain_buf_init(&out);
        if (chain_tx_encode_signed(&out, &tx, &sig) != 0 || out.len != size || memcmp(out.data, data, size) != 0)
            abort(); /* a decoded transaction must encode back to its bytes */
        chain_buf_free(&out);
    }
    return 0;
}
