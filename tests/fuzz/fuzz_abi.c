/* Fuzz target: ABI decoding of return data, log data and revert data.
 * Properties: every decoded range lies inside the input; the revert decoder
 * always produces a NUL-terminated, printable reason. */
#include <stdlib.h>
#include <string.h>

#include "chain/abi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    chain_abi_dec dec;
    chain_abi_dec_init(&dec, data, size);
    for (size_t i = 0; i < 8; i++) {
        uint8_t w[32];
        uint64_t u;
        int64_t s;
        int b;
        chain_address a;
        const uint8_t *p;
        size_t n;
        (void)!chain_abi_get_word(&dec, i, w);
        (void)!chain_abi_get_uint(&dec, i, &u);
        (void)!chain_abi_get_int(&dec, i, &s);
        (void)!chain_abi_get_bool(&dec, i, &b);
        (void)!chain_abi_get_address(&dec, i, &a);
        if (chain_abi_get_bytes(&dec, i, &p, &n) == 0 && (p < data || n > size || p + n > data + size))
            abort();
        if (chain_abi_get_bytes32_array(&dec, i, &p, &n) == 0 &&
            (p < data || n > size / 32 || p + 32 * n > data + size))
            abort();
    }
    static const char *const errors[] = {"WrongRound(uint64,uint64)", "NotParty()", NULL};
    char reason[160];
    chain_abi_decode_revert(reason, sizeof reason, data, size, errors);
    size_t len = strnlen(reason, sizeof reason);
    if (len == sizeof reason)
        abort();
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)reason[i] < 0x20 || (unsigned char)reason[i] >= 0x7f)
            abort();
    return 0;
}
