package io.kvgate.dataplane.route;

/**
 * Where the routing stage hands a decision back: one call, ON THE REQUEST'S EVENT LOOP (the thread of the
 * {@link RouterPort} the request was published through), in a batch with the other decisions for that loop.
 * Implementations act on the decision directly and must not re-dispatch themselves: the {@link Decision} is the port's
 * slot, valid only during the call — read what is needed before publishing again through the port (a retry, a P/D
 * request's next leg), and keep no reference to it.
 */
@FunctionalInterface
public interface RouteCallback {
    void onDecision(Decision d);
}
