/**
 * Block hashing identical to what vLLM ({@code sha256_cbor}, {@code xxhash_cbor}) and SGLang (page hash) publish
 * in KV-cache events: {@link io.kvgate.index.hash.HashAlgo}, {@link io.kvgate.index.hash.BlockHashSpec},
 * {@link io.kvgate.index.hash.BlockHasher} (allocation-free, resumable) and
 * {@link io.kvgate.index.hash.PrefixHashCache} (memo for growing conversations).
 */
package io.kvgate.index.hash;
