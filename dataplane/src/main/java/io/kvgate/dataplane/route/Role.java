package io.kvgate.dataplane.route;

/** Which pool of a P/D rule a decision picks from; {@link #ANY} outside P/D (on a P/D rule: the prefills). */
public enum Role { ANY, PREFILL, DECODE }
