/* EIP-712 hashing (see eip712.h). */
#include "chain/eip712.h"

#include <string.h>

#include "chain/keccak.h"

static const char domain_type[] =
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)";

void chain_eip712_type_hash(ovt_hash *out, const char *type_string)
{
    chain_keccak256(out, type_string, strlen(type_string));
}

void chain_eip712_domain_separator(ovt_hash *out, const char *name, const char *version,
                                   uint64_t chain_id, const chain_address *verifying_contract)
{
    ovt_hash h;
    uint8_t word[32];
    chain_keccak_ctx ctx;
    chain_keccak_init(&ctx);
    chain_eip712_type_hash(&h, domain_type);
    chain_keccak_update(&ctx, h.b, 32);
    chain_keccak256(&h, name, strlen(name));
    chain_keccak_update(&ctx, h.b, 32);
    chain_keccak256(&h, version, strlen(version));
    chain_keccak_update(&ctx, h.b, 32);
    chain_u256 id = chain_u256_from_u64(chain_id);
    chain_keccak_update(&ctx, id.b, 32);
    memset(word, 0, 12);
    memcpy(word + 12, verifying_contract->b, 20);
    chain_keccak_update(&ctx, word, 32);
    chain_keccak_final(&ctx, out);
}

int chain_eip712_hash_struct(ovt_hash *out, const char *type_string, const uint8_t *fields,
                             size_t fields_len)
{
    memset(out, 0, sizeof *out);
    if (fields_len % 32 != 0)
        return ovt_fail(OVT_EINVAL, "EIP-712 fields must be whole 32-byte words (got %zu bytes)",
                        fields_len);
    ovt_hash th;
    chain_eip712_type_hash(&th, type_string);
    chain_keccak_ctx ctx;
    chain_keccak_init(&ctx);
    chain_keccak_update(&ctx, th.b, 32);
    chain_keccak_update(&ctx, fields, fields_len);
    chain_keccak_final(&ctx, out);
    return 0;
}

void chain_eip712_digest(ovt_hash *out, const ovt_hash *domain_separator, const ovt_hash *struct_hash)
{
    static const uint8_t prefix[2] = {0x19, 0x01};
    chain_keccak_ctx ctx;
    chain_keccak_init(&ctx);
    chain_keccak_update(&ctx, prefix, 2);
    chain_keccak_update(&ctx, domain_separator->b, 32);
    chain_keccak_update(&ctx, struct_hash->b, 32);
    chain_keccak_final(&ctx, out);
}
