package io.kvgate.dataplane.wire;

import io.netty.handler.codec.DateFormatter;
import io.netty.handler.codec.DefaultHeaders;
import io.netty.handler.codec.http.DefaultHttpHeadersFactory;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpHeadersFactory;
import io.netty.util.AsciiString;
import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Calendar;
import java.util.Collections;
import java.util.Date;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;

/**
 * A client request's headers as the client codec's decoder reads them: two parallel arrays in arrival order, looked up
 * by a scan, instead of Netty's hash map of entries. A request carries a handful of headers and the gateway asks for
 * about as many; a scan over them costs less than building the map, and nothing is allocated per header beyond the
 * name and value the decoder made. Names and values are validated exactly as by Netty's default factories (the same
 * validators), so what the decoder accepts or refuses is unchanged; the trailer variant also refuses the fields a
 * trailer must not carry. Fully mutable ({@code HttpHeaders} semantics: first value wins on {@code get}, {@code set}
 * replaces every value, names compare ignoring ASCII case). Not thread-safe: one request, its event loop.
 */
public final class RequestHeaders extends HttpHeaders {
    private static final DefaultHttpHeadersFactory NETTY_HEADERS = DefaultHttpHeadersFactory.headersFactory();
    private static final DefaultHttpHeadersFactory NETTY_TRAILERS = DefaultHttpHeadersFactory.trailersFactory();

    /** Headers of request heads, validated as Netty's default headers factory does. */
    public static final HttpHeadersFactory HEADERS = factory(NETTY_HEADERS.getNameValidator(), NETTY_HEADERS.getValueValidator());
    /** Trailers of chunked request bodies, validated as Netty's default trailers factory does. */
    public static final HttpHeadersFactory TRAILERS = factory(NETTY_TRAILERS.getNameValidator(), NETTY_TRAILERS.getValueValidator());

    private static HttpHeadersFactory factory(DefaultHeaders.NameValidator<CharSequence> names,
                                              DefaultHeaders.ValueValidator<CharSequence> values) {
        return new HttpHeadersFactory() {
            @Override
            public HttpHeaders newHeaders() {
                return new RequestHeaders(names, values);
            }

            @Override
            public HttpHeaders newEmptyHeaders() {
                return new RequestHeaders(names, values);
            }
        };
    }

    private final DefaultHeaders.NameValidator<CharSequence> nameValidator;
    private final DefaultHeaders.ValueValidator<CharSequence> valueValidator;
    /** Allocated on the first header (a body's trailers usually have none). */
    private CharSequence[] names;
    private CharSequence[] values;
    private int size;
    /**
     * One bit per (length, first letter) class of the names present ({@link #nameBit}): most lookups on the request
     * path are for headers a request does not carry (x-request-id, x-kvgate-explain, the priority headers,
     * connection), and a clear bit answers them without comparing a single name. Bits are only ever added, except
     * by {@link #clear}; a removal leaves a bit that merely costs the scan.
     */
    private long nameBits;

    RequestHeaders(DefaultHeaders.NameValidator<CharSequence> nameValidator, DefaultHeaders.ValueValidator<CharSequence> valueValidator) {
        this.nameValidator = nameValidator;
        this.valueValidator = valueValidator;
    }

    /** The i-th header's name, in arrival order ({@code i < size()}). */
    public CharSequence nameAt(int i) {
        return names[i];
    }

    /** The i-th header's value, in arrival order ({@code i < size()}). */
    public CharSequence valueAt(int i) {
        return values[i];
    }

    private static boolean same(CharSequence a, CharSequence b) {
        return AsciiString.contentEqualsIgnoreCase(a, b);
    }

    private static long nameBit(CharSequence name) {
        int n = name.length();
        int first = n == 0 ? 0 : name.charAt(0) | 0x20; // ASCII lower case (other bytes only share a class)
        return 1L << ((n * 31 + first) & 63);
    }

    private int indexOf(CharSequence name, int from) {
        if ((nameBits & nameBit(name)) == 0) {
            return -1;
        }
        for (int i = from; i < size; i++) {
            if (same(names[i], name)) {
                return i;
            }
        }
        return -1;
    }

    private static CharSequence toCharSequence(Object value) {
        if (value instanceof CharSequence cs) {
            return cs;
        }
        if (value instanceof Date d) {
            return DateFormatter.format(d);
        }
        if (value instanceof Calendar c) {
            return DateFormatter.format(c.getTime());
        }
        return String.valueOf(value);
    }

    private void append(CharSequence name, Object value) {
        if (value == null) {
            throw new NullPointerException("value");
        }
        nameValidator.validateName(name);
        CharSequence v = toCharSequence(value);
        valueValidator.validate(v);
        if (names == null) {
            names = new CharSequence[8];
            values = new CharSequence[8];
        } else if (size == names.length) {
            names = Arrays.copyOf(names, size * 2);
            values = Arrays.copyOf(values, size * 2);
        }
        names[size] = name;
        values[size] = v;
        size++;
        nameBits |= nameBit(name);
    }

    private void removeAll(CharSequence name) {
        int kept = 0;
        for (int i = 0; i < size; i++) {
            if (!same(names[i], name)) {
                names[kept] = names[i];
                values[kept] = values[i];
                kept++;
            }
        }
        for (int i = kept; i < size; i++) {
            names[i] = null;
            values[i] = null;
        }
        size = kept;
    }

    // ---- reads -----------------------------------------------------------------------------------------------

    @Override
    public String get(String name) {
        return get((CharSequence) name);
    }

    @Override
    public String get(CharSequence name) {
        int i = indexOf(name, 0);
        return i < 0 ? null : values[i].toString();
    }

    @Override
    public Integer getInt(CharSequence name) {
        String v = get(name);
        try {
            return v == null ? null : Integer.parseInt(v);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    @Override
    public int getInt(CharSequence name, int defaultValue) {
        Integer v = getInt(name);
        return v == null ? defaultValue : v;
    }

    @Override
    public Short getShort(CharSequence name) {
        String v = get(name);
        try {
            return v == null ? null : Short.parseShort(v);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    @Override
    public short getShort(CharSequence name, short defaultValue) {
        Short v = getShort(name);
        return v == null ? defaultValue : v;
    }

    @Override
    public Long getTimeMillis(CharSequence name) {
        String v = get(name);
        if (v == null) {
            return null;
        }
        Date d = DateFormatter.parseHttpDate(v);
        return d == null ? null : d.getTime();
    }

    @Override
    public long getTimeMillis(CharSequence name, long defaultValue) {
        Long v = getTimeMillis(name);
        return v == null ? defaultValue : v;
    }

    @Override
    public List<String> getAll(String name) {
        return getAll((CharSequence) name);
    }

    @Override
    public List<String> getAll(CharSequence name) {
        int i = indexOf(name, 0);
        if (i < 0) {
            return Collections.emptyList();
        }
        List<String> all = new ArrayList<>(2);
        for (; i >= 0; i = indexOf(name, i + 1)) {
            all.add(values[i].toString());
        }
        return all;
    }

    @Override
    public List<Map.Entry<String, String>> entries() {
        List<Map.Entry<String, String>> all = new ArrayList<>(size);
        for (int i = 0; i < size; i++) {
            all.add(new AbstractMap.SimpleImmutableEntry<>(names[i].toString(), values[i].toString()));
        }
        return all;
    }

    @Override
    public boolean contains(String name) {
        return indexOf(name, 0) >= 0;
    }

    @Override
    public boolean contains(CharSequence name) {
        return indexOf(name, 0) >= 0;
    }

    @Override
    public boolean contains(String name, String value, boolean ignoreCase) {
        return contains((CharSequence) name, value, ignoreCase);
    }

    @Override
    public boolean contains(CharSequence name, CharSequence value, boolean ignoreCase) {
        for (int i = indexOf(name, 0); i >= 0; i = indexOf(name, i + 1)) {
            if (ignoreCase ? AsciiString.contentEqualsIgnoreCase(values[i], value) : AsciiString.contentEquals(values[i], value)) {
                return true;
            }
        }
        return false;
    }

    /** As Netty's: whether any value of {@code name}, read as a comma-separated list of trimmed tokens, has {@code value}. */
    @Override
    public boolean containsValue(CharSequence name, CharSequence value, boolean ignoreCase) {
        for (int i = indexOf(name, 0); i >= 0; i = indexOf(name, i + 1)) {
            if (hasToken(values[i], value, ignoreCase)) {
                return true;
            }
        }
        return false;
    }

    private static boolean hasToken(CharSequence list, CharSequence token, boolean ignoreCase) {
        int start = 0;
        int n = list.length();
        while (start <= n) {
            int comma = start;
            while (comma < n && list.charAt(comma) != ',') {
                comma++;
            }
            int s = start;
            int e = comma;
            while (s < e && list.charAt(s) <= ' ') {
                s++;
            }
            while (e > s && list.charAt(e - 1) <= ' ') {
                e--;
            }
            if (e - s == token.length() && (ignoreCase
                ? AsciiString.regionMatches(list, true, s, token, 0, e - s)
                : AsciiString.regionMatches(list, false, s, token, 0, e - s))) {
                return true;
            }
            start = comma + 1;
        }
        return false;
    }

    /** Netty deprecates it for {@link #iteratorCharSequence()}, but it is still how {@code for (Map.Entry e : headers)} reads. */
    @Deprecated
    @Override
    public Iterator<Map.Entry<String, String>> iterator() {
        return new Iterator<>() {
            private int next;

            @Override
            public boolean hasNext() {
                return next < size;
            }

            @Override
            public Map.Entry<String, String> next() {
                if (next >= size) {
                    throw new NoSuchElementException();
                }
                int i = next++;
                return new AbstractMap.SimpleImmutableEntry<>(names[i].toString(), values[i].toString());
            }
        };
    }

    @Override
    public Iterator<Map.Entry<CharSequence, CharSequence>> iteratorCharSequence() {
        return new Iterator<>() {
            private int next;

            @Override
            public boolean hasNext() {
                return next < size;
            }

            @Override
            public Map.Entry<CharSequence, CharSequence> next() {
                if (next >= size) {
                    throw new NoSuchElementException();
                }
                int i = next++;
                return new AbstractMap.SimpleImmutableEntry<>(names[i], values[i]);
            }
        };
    }

    @Override
    public boolean isEmpty() {
        return size == 0;
    }

    @Override
    public int size() {
        return size;
    }

    /** As Netty's: the distinct names as they were written (a set of strings, so "Host" and "host" are two). */
    @Override
    public Set<String> names() {
        Set<String> all = new LinkedHashSet<>();
        for (int i = 0; i < size; i++) {
            all.add(names[i].toString());
        }
        return all;
    }

    // ---- writes ----------------------------------------------------------------------------------------------

    @Override
    public HttpHeaders add(String name, Object value) {
        return add((CharSequence) name, value);
    }

    @Override
    public HttpHeaders add(CharSequence name, Object value) {
        append(name, value);
        return this;
    }

    @Override
    public HttpHeaders add(String name, Iterable<?> values) {
        return add((CharSequence) name, values);
    }

    @Override
    public HttpHeaders add(CharSequence name, Iterable<?> values) {
        for (Object v : values) {
            append(name, v);
        }
        return this;
    }

    @Override
    public HttpHeaders addInt(CharSequence name, int value) {
        append(name, Integer.toString(value));
        return this;
    }

    @Override
    public HttpHeaders addShort(CharSequence name, short value) {
        append(name, Short.toString(value));
        return this;
    }

    @Override
    public HttpHeaders set(String name, Object value) {
        return set((CharSequence) name, value);
    }

    @Override
    public HttpHeaders set(CharSequence name, Object value) {
        removeAll(name);
        append(name, value);
        return this;
    }

    @Override
    public HttpHeaders set(String name, Iterable<?> values) {
        return set((CharSequence) name, values);
    }

    @Override
    public HttpHeaders set(CharSequence name, Iterable<?> values) {
        removeAll(name);
        for (Object v : values) {
            append(name, v);
        }
        return this;
    }

    @Override
    public HttpHeaders setInt(CharSequence name, int value) {
        return set(name, Integer.toString(value));
    }

    @Override
    public HttpHeaders setShort(CharSequence name, short value) {
        return set(name, Short.toString(value));
    }

    @Override
    public HttpHeaders remove(String name) {
        removeAll(name);
        return this;
    }

    @Override
    public HttpHeaders remove(CharSequence name) {
        removeAll(name);
        return this;
    }

    @Override
    public HttpHeaders clear() {
        if (names != null) {
            Arrays.fill(names, 0, size, null);
            Arrays.fill(values, 0, size, null);
        }
        size = 0;
        nameBits = 0;
        return this;
    }
}
