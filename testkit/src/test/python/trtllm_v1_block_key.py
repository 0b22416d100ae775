#!/usr/bin/python3
"""TensorRT-LLM's v1 block key, re-implemented from its Python reference for golden vectors.

Source: NVIDIA/TensorRT-LLM tensorrt_llm/runtime/kv_cache_hash.py at commit
991de58c52acf039626cabc30e7c4f4106d222fd (hash_v1_block_key, _hash32_mix, _hash64_mix), which states it is
bit-exact with the C++ BlockKeyHasher::hash (cpp/tensorrt_llm/batch_manager/blockKey.cpp at 0bd2980d: seed =
token count ^ parent * 0xbf58476d1ce4e5b9; the cache salt id mixed into the first block only; each token id as a
32-bit value; the LoRA task id last). The gateway's Java (io.kvgate.index.block.TrtllmV1BlockKey) must reproduce
every line this script prints: TrtllmV1BlockKeyTest holds them.

Run: /usr/bin/python3 testkit/src/test/python/trtllm_v1_block_key.py
Prints one line per vector: name, then the chain of block keys as signed 64-bit decimals (the JSON events carry
size_t; the gateway keeps the same 64-bit pattern in a Java long).
"""

_UINT32_MASK = (1 << 32) - 1
_UINT64_MASK = (1 << 64) - 1
_HASH32_CONST = 0x45D9F3B
_HASH64_CONST_1 = 0xBF58476D1CE4E5B9
_HASH64_CONST_2 = 0x94D049BB133111EB
_HASH_COMBINE_CONST = 0x9E3779B9
_PARENT_HASH_CONST = 0xBF58476D1CE4E5B9


def hash_v1_block_key(tokens, parent_hash=0, lora_task_id=None, cache_salt_id=None):
    seed = (len(tokens) ^ ((parent_hash * _PARENT_HASH_CONST) & _UINT64_MASK)) & _UINT64_MASK
    if parent_hash == 0 and cache_salt_id is not None:
        seed = _hash64_mix(cache_salt_id, seed)
    for token in tokens:
        seed = _hash32_mix(token, seed)
    if lora_task_id is not None:
        seed = _hash64_mix(lora_task_id, seed)
    return seed


def _hash32_mix(value, seed):
    value &= _UINT32_MASK
    value = (((value >> 16) ^ value) * _HASH32_CONST) & _UINT32_MASK
    value = (((value >> 16) ^ value) * _HASH32_CONST) & _UINT32_MASK
    value = ((value >> 16) ^ value) & _UINT32_MASK
    value = (value + _HASH_COMBINE_CONST) & _UINT32_MASK
    combined = (value + ((seed << 6) & _UINT64_MASK) + (seed >> 2)) & _UINT64_MASK
    return (seed ^ combined) & _UINT64_MASK


def _hash64_mix(value, seed):
    value &= _UINT64_MASK
    value = ((value ^ (value >> 30)) * _HASH64_CONST_1) & _UINT64_MASK
    value = ((value ^ (value >> 27)) * _HASH64_CONST_2) & _UINT64_MASK
    value = (value ^ (value >> 31)) & _UINT64_MASK
    combined = (value + _HASH_COMBINE_CONST + ((seed << 6) & _UINT64_MASK) + (seed >> 2)) & _UINT64_MASK
    return (seed ^ combined) & _UINT64_MASK


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def chain(tokens, block, lora_task_id=None, cache_salt_id=None):
    keys, parent = [], 0
    for start in range(0, len(tokens) - len(tokens) % block, block):
        parent = hash_v1_block_key(tokens[start:start + block], parent, lora_task_id, cache_salt_id)
        keys.append(parent)
    return keys


VECTORS = [
    ("one_block_4", list(range(1, 5)), 4, None, None),
    ("three_blocks_32", [(i * 7919 + 13) % 151936 for i in range(96)], 32, None, None),
    ("high_token_ids", [0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 65535, 65536, 151935, 2], 4, None, None),
    ("lora_task_7", list(range(100, 132)), 16, 7, None),
    ("salt_id", list(range(100, 132)), 16, None, 0x0123456789ABCDEF),
    ("lora_and_salt", list(range(100, 132)), 16, 1 << 63, 0xFFFFFFFFFFFFFFFF),
]

if __name__ == "__main__":
    for name, tokens, block, lora, salt in VECTORS:
        print(name, " ".join(str(signed(k)) for k in chain(tokens, block, lora, salt)))
