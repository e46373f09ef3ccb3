#ifndef OVT_CHAIN_EIP712_H
#define OVT_CHAIN_EIP712_H

/* EIP-712 typed-data hashing for flat structs (no nested struct members), as
 * the trainer's commitment needs (docs/contract.md, docs/agent.md).
 *
 *   domainSeparator = keccak(typeHash(EIP712Domain) || keccak(name) ||
 *                            keccak(version) || chainId || verifyingContract)
 *   hashStruct      = keccak(keccak(typeString) || encodedFields)
 *   digest          = keccak(0x19 0x01 || domainSeparator || hashStruct)
 *
 * encodedFields is each member as one 32-byte word, in type-string order:
 * static members ABI-encoded (chain_abi_put_* into a chain_abi_enc gives
 * exactly this), `bytes` and `string` members as keccak of their contents. */

#include "chain/keys.h"
#include "chain/types.h"
#include "common/bytes.h"

void chain_eip712_domain_separator(ovt_hash *out, const char *name, const char *version,
                                   uint64_t chain_id, const chain_address *verifying_contract);

/* keccak of a type string such as "Commitment(bytes32 root,uint64 seq,bytes32 digest)". */
void chain_eip712_type_hash(ovt_hash *out, const char *type_string);

/* fields_len must be a multiple of 32 (one word per member). */
int chain_eip712_hash_struct(ovt_hash *out, const char *type_string, const uint8_t *fields,
                             size_t fields_len) OVT_MUST_USE;

void chain_eip712_digest(ovt_hash *out, const ovt_hash *domain_separator, const ovt_hash *struct_hash);

#endif
