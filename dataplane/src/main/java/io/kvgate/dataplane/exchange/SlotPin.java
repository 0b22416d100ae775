package io.kvgate.dataplane.exchange;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * llama.cpp slot pinning ({@code session.pin_slot}): a session's requests carry {@code "id_slot": N}, the same N for
 * the same session key, so llama-server reuses that slot's prompt cache for the conversation instead of picking the
 * slot with the most similar cached prompt. The member is appended last: llama-server's JSON reader keeps the last of
 * duplicate keys, so a client's own {@code id_slot} cannot override the gateway's. Stateless.
 */
public final class SlotPin {
    private SlotPin() {}

    /** The slot of a session key: stable for the key, in [0, slots). */
    public static int slotOf(String sessionKey, int slots) {
        long h = io.kvgate.dataplane.route.SessionKeys.hash(sessionKey);
        h = (h ^ (h >>> 33)) * 0xff51afd7ed558ccdL;
        return (int) Math.floorMod(h ^ (h >>> 33), (long) slots);
    }

    /**
     * {@code body} (a JSON object; its reference is not taken) with {@code "id_slot": slot} as its last member: a
     * composite of the body up to its closing brace (a retained slice, no copy) and the new member.
     */
    public static ByteBuf withIdSlot(ByteBuf body, int slot, ByteBufAllocator alloc) {
        return io.kvgate.dataplane.request.JsonMembers.append(body, "id_slot", Integer.toString(slot), alloc);
    }
}
