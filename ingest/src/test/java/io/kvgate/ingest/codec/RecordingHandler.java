package io.kvgate.ingest.codec;

import java.util.ArrayList;
import java.util.List;

/** Test handler: records each event as a canonical line (also produced by the Python fixture generator). */
final class RecordingHandler implements KvEventHandler {
    final List<String> events = new ArrayList<>();

    @Override
    public void onBlockStored(BlockStoredEvent e) {
        StringBuilder sb = new StringBuilder("S keys=");
        keys(sb, e.blockKeys(), e.blockCount());
        sb.append(" parent=").append(e.hasParent() ? Long.toUnsignedString(e.parentKey()) : "-");
        sb.append(" tokens=[");
        for (int i = 0; i < e.tokenInts(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(Integer.toUnsignedString(e.tokens()[i]));
        }
        sb.append("] ipc=").append(e.intsPerCell());
        sb.append(" bs=").append(e.blockSize());
        sb.append(" lora=").append(e.hasLoraId() ? Long.toString(e.loraId()) : "-");
        sb.append(" medium=").append(Medium.name(e.medium()));
        sb.append(" group=").append(e.groupIdx());
        if (e.specKind() != SpecKind.NONE) {
            sb.append(" kind=").append(SpecKind.name(e.specKind())); // only hybrid-group events carry one
        }
        events.add(sb.toString());
    }

    @Override
    public void onBlockRemoved(BlockRemovedEvent e) {
        StringBuilder sb = new StringBuilder("R keys=");
        keys(sb, e.blockKeys(), e.blockCount());
        sb.append(" medium=").append(Medium.name(e.medium()));
        sb.append(" group=").append(e.groupIdx());
        events.add(sb.toString());
    }

    @Override
    public void onAllBlocksCleared() {
        events.add("C");
    }

    private static void keys(StringBuilder sb, long[] k, int n) {
        sb.append('[');
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(Long.toUnsignedString(k[i]));
        }
        sb.append(']');
    }
}
