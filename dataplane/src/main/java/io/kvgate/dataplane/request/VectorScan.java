package io.kvgate.dataplane.request;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link JsonLexer}'s string skip on the Vector API ({@code jdk.incubator.vector}, incubating in Java 25): one
 * vector of the platform's preferred width (64 bytes with AVX-512, 32 with AVX2) per branch instead of SWAR's
 * sixteen bytes. The only class that names a vector type, and loaded only when the lexer has found the module in the
 * boot layer ({@link JsonLexer#VECTOR_BYTES}): without {@code --add-modules jdk.incubator.vector} it is never
 * touched and the lexer runs its SWAR loop.
 */
final class VectorScan {
    private static final VectorSpecies<Byte> SPECIES = ByteVector.SPECIES_PREFERRED;

    /** Bytes per vector. */
    static final int BYTES = SPECIES.length();

    private VectorScan() {
    }

    /**
     * The index of the first byte in {@code [p, end)} of the lexer's buffer that is {@code '"'}, {@code '\\'},
     * {@code < 0x20} or {@code >= 0x80}, looking at whole vectors only (never at a byte at or past {@code end});
     * when no whole vector holds one, {@code -1 - q} where {@code q} is the first index not looked at (fewer than
     * {@link #BYTES} before {@code end}, or {@code p} itself): the caller's SWAR loop takes the rest. Byte {@code i}
     * of the buffer is at {@code base + i} of {@code body}.
     */
    static int firstSpecial(MemorySegment body, long base, int p, int end) {
        int q = p;
        final int last = end - BYTES;
        while (q <= last) {
            ByteVector v = ByteVector.fromMemorySegment(SPECIES, body, base + q, ByteOrder.LITTLE_ENDIAN);
            // A signed compare: lt(0x20) holds for every control byte and for every byte >= 0x80 (negative) at once.
            VectorMask<Byte> special = v.lt((byte) 0x20).or(v.eq((byte) '"')).or(v.eq((byte) '\\'));
            if (special.anyTrue()) {
                return q + special.firstTrue();
            }
            q += BYTES;
        }
        return -1 - q;
    }
}
