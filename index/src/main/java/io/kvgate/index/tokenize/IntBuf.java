package io.kvgate.index.tokenize;

import java.util.Arrays;

/** Growable int list reused per thread so that encoding does not allocate per token. Not thread-safe. */
final class IntBuf {
    int[] a;
    int size;

    IntBuf(int capacity) {
        a = new int[capacity];
    }

    void clear() {
        size = 0;
    }

    void add(int v) {
        if (size == a.length) {
            a = Arrays.copyOf(a, a.length * 2);
        }
        a[size++] = v;
    }

    void addAll(int[] src, int from, int to) {
        int n = to - from;
        if (size + n > a.length) {
            a = Arrays.copyOf(a, Math.max(a.length * 2, size + n));
        }
        System.arraycopy(src, from, a, size, n);
        size += n;
    }
}
