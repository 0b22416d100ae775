#!/usr/bin/python3
"""Generates kv_event_frames.txt: KV-event payloads encoded by the reference Python msgpack library, each with
the canonical decoded form the Java RecordingHandler must produce. Run once; the output is committed and the
tests never need Python.   /usr/bin/python3 gen_fixtures.py > kv_event_frames.txt
Shapes follow vLLM vllm/distributed/kv_events.py (msgspec array_like tagged structs, omit_defaults) and SGLang
python/sglang/srt/disaggregation/kv_events.py (BlockStoredWithMetadata appends a {"cache_salt": ...} map)."""
import hashlib
import msgpack

U64 = 1 << 64


def u(v):  # unsigned rendering of the 64-bit pattern
    return str(v % U64)


def fold(b):
    return str(int.from_bytes(b[-8:], "big"))


def stored_line(keys, parent, tokens, bs, lora=None, medium=None, group=-1, ipc=1, kind=None):
    flat = []
    for t in tokens:
        flat.extend(t if isinstance(t, (list, tuple)) else [t])
    return "S keys=[%s] parent=%s tokens=[%s] ipc=%d bs=%d lora=%s medium=%s group=%d" % (
        ",".join(keys), parent if parent is not None else "-", ",".join(str(x) for x in flat), ipc, bs,
        "-" if lora is None else str(lora), medium or "none", group) + ("" if kind is None else " kind=" + kind)


def removed_line(keys, medium=None, group=-1):
    return "R keys=[%s] medium=%s group=%d" % (",".join(keys), medium or "none", group)


cases = []

# 1. oldest vLLM: 2-element batch, 6-field BlockStored (medium None), int hashes incl. uint64 >= 2^63
h = [7876691182959014722, 11066090714971094433, (1 << 64) - 1]
toks = list(range(101, 101 + 48))
cases.append(("vllm_old_2elem",
              [1.5, [["BlockStored", h, None, toks, 16, None, None],
                     ["BlockRemoved", [h[0]], None]]],
              [stored_line([u(x) for x in h], None, toks, 16), removed_line([u(h[0])])]))

# 2. vLLM mid-2025: 3-element batch with dp rank, medium GPU, lora_name, extra_keys, group_idx
h2 = [2758186210834249151, 3236607068019569386]
cases.append(("vllm_full_fields",
              [1732900000.25, [["BlockStored", h2, 8769878286166771163, list(range(1, 33)), 16, 7, "GPU",
                                "my-lora", [["my-lora"], ["my-lora", "salt"]], 0, "full_attention", None],
                               ["BlockRemoved", h2, "CPU", 1],
                               ["AllBlocksCleared"]], 3],
              [stored_line([u(x) for x in h2], u(8769878286166771163), list(range(1, 33)), 16, lora=7,
                           medium="GPU", group=0, kind="full_attention"),
               removed_line([u(x) for x in h2], "CPU", 1), "C"]))

# 3. vLLM bytes hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0): full sha256 digests as bin
d0 = hashlib.sha256(b"block0").digest()
d1 = hashlib.sha256(b"block1").digest()
cases.append(("vllm_bin_hashes",
              [2.0, [["BlockStored", [d0, d1], None, list(range(32)), 16, None, "GPU"],
                     ["BlockRemoved", [d1], "GPU"]], None],
              [stored_line([fold(d0), fold(d1)], None, list(range(32)), 16, medium="GPU"),
               removed_line([fold(d1)], "GPU")]))

# 4. vLLM 2026 map form (type not first, unknown keys), mixed with array form in one batch
cases.append(("vllm_map_form_mixed",
              [3.0, [{"block_hashes": [1, 2], "parent_block_hash": None, "token_ids": [5, 6, 7, 8],
                      "type": "BlockStored", "block_size": 2, "lora_id": None, "medium": "GPU",
                      "lora_name": None, "extra_keys": None, "group_idx": 2, "future_field": {"x": [1, 2]}},
                     ["BlockRemoved", [2]],
                     {"type": "BlockRemoved", "block_hashes": [1], "medium": "STORAGE"},
                     {"type": "AllBlocksCleared"},
                     {"type": "BlockTransferred", "block_hashes": [9]},
                     ["SomethingNew", 1, 2, 3]], 0],
              [stored_line(["1", "2"], None, [5, 6, 7, 8], 2, medium="GPU", group=2),
               removed_line(["2"]), removed_line(["1"], "STORAGE"), "C"]))

# 5. SGLang: signed int64 hashes, one event per page, attn_dp_rank, medium CPU_PINNED
sg = [8635429971592222890, 1256577331724852459, -2360060374177730597]
cases.append(("sglang_pages",
              [4.0, [["BlockStored", [sg[0]], None, list(range(1, 17)), 16, None, "GPU"],
                     ["BlockStored", [sg[1]], sg[0], list(range(17, 33)), 16, None, "CPU_PINNED"],
                     ["BlockStored", [sg[2]], sg[1], [0], 1, None],
                     ["BlockRemoved", [sg[2], sg[1]], "GPU"]], 5],
              [stored_line([u(sg[0])], None, list(range(1, 17)), 16, medium="GPU"),
               stored_line([u(sg[1])], u(sg[0]), list(range(17, 33)), 16, medium="CPU_PINNED"),
               stored_line([u(sg[2])], u(sg[1]), [0], 1),
               removed_line([u(sg[2]), u(sg[1])], "GPU")]))

# 6. SGLang BlockStoredWithMetadata: trailing {"cache_salt": ...} after medium
cases.append(("sglang_cache_salt_metadata",
              [5.0, [["BlockStored", [3451139630862032982], None, list(range(1, 17)), 16, None, "GPU",
                      {"cache_salt": "tenant-a"}]], 0],
              [stored_line([u(3451139630862032982)], None, list(range(1, 17)), 16, medium="GPU")]))

# 7. SGLang EAGLE bigram mode: token cells are (t[j], t[j+1]) pairs
pairs = [(10 + j, 11 + j) for j in range(4)]
cases.append(("sglang_bigram",
              [6.0, [["BlockStored", [-5034188771989179167], None, [list(p) for p in pairs], 4, None, "GPU"]]],
              [stored_line([u(-5034188771989179167)], None, pairs, 4, medium="GPU", ipc=2)]))

# 8. big batch: 64-bit widths forced by value, token ids beyond 16 bits, large arrays (array16 headers)
big = [0, 1, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, -1, -32, -33,
       -128, -129, -32768, -32769, -(1 << 31), -(1 << 31) - 1, -(1 << 63)]
btoks = [(i * 7919) % 151936 for i in range(len(big) * 4)]
cases.append(("int_widths",
              [7.0, [["BlockStored", big, None, btoks, 4, 123456, "GPU"]]],
              [stored_line([u(x) for x in big], None, btoks, 4, lora=123456, medium="GPU")]))

for name, payload, expected in cases:
    raw = msgpack.packb(payload, use_bin_type=True)
    print("%s|%s|%s" % (name, raw.hex(), ";".join(expected)))
