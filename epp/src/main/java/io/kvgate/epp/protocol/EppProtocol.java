package io.kvgate.epp.protocol;

import com.google.protobuf.ByteString;
import com.google.protobuf.ListValue;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.StreamedBodyResponse;
import java.util.ArrayList;
import java.util.List;

/**
 * The names and shapes of the Gateway API Inference Extension's endpoint-picker protocol (proposal 004) over Envoy's
 * ext_proc, shared by the picker and by {@code epp-check}, which must agree on them byte for byte. Nothing here knows
 * the gateway: the conformance client uses it against any picker.
 */
public final class EppProtocol {
    private EppProtocol() {}

    /** The header (request mutation) and {@code envoy.lb} metadata key carrying the picked endpoint(s). */
    public static final String DESTINATION = "x-gateway-destination-endpoint";
    /** The metadata namespace Envoy's load balancer (ORIGINAL_DST, override_host) reads the destination from. */
    public static final String LB_NAMESPACE = "envoy.lb";
    /** Where Envoy puts the subset the picker must choose from. */
    public static final String SUBSET_NAMESPACE = "envoy.lb.subset_hint";
    public static final String SUBSET_KEY = "x-gateway-destination-endpoint-subset";
    /** The response-phase report of the endpoint that actually served the request (after Envoy's retries). */
    public static final String SERVED = "x-gateway-destination-endpoint-served";
    /** llm-d's decode-side sidecar convention: the prefill pod of a P/D request, on the request to the decode pod. */
    public static final String PREFILLER = "x-prefiller-host-port";
    /** The largest body piece a picker echoes in one StreamedBodyResponse (llm-d's chunking). */
    public static final int MAX_ECHO_CHUNK = 62_000;
    /** gRPC health service names an EPP answers. */
    public static final String HEALTH_LIVENESS = "liveness";
    public static final String HEALTH_READINESS = "readiness";
    public static final String HEALTH_EXT_PROC = "envoy.service.ext_proc.v3.ExternalProcessor";

    /** A header's value as Envoy sends it: {@code raw_value} bytes (current Envoy) or {@code value}. */
    public static String value(HeaderValue h) {
        return h.getRawValue().isEmpty() ? h.getValue() : h.getRawValue().toStringUtf8();
    }

    /** The value of {@code name} (lower case) in {@code map}, or null. */
    public static String header(HeaderMap map, String name) {
        for (HeaderValue h : map.getHeadersList()) {
            if (h.getKey().equalsIgnoreCase(name)) {
                return value(h);
            }
        }
        return null;
    }

    /** A header as Envoy sends it (the value in {@code raw_value}). */
    public static HeaderValue headerValue(String name, String value) {
        return HeaderValue.newBuilder().setKey(name).setRawValue(ByteString.copyFromUtf8(value)).build();
    }

    /** A header set (overwriting one of the same name). */
    public static HeaderValueOption set(String name, String value) {
        return HeaderValueOption.newBuilder().setHeader(headerValue(name, value))
            .setAppendAction(HeaderValueOption.HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD).build();
    }

    /** {@code {namespace: {key: value}}}, the shape of {@code dynamic_metadata} and of a metadata context entry. */
    public static Struct namespaced(String namespace, String key, String value) {
        return Struct.newBuilder().putFields(namespace, Value.newBuilder()
            .setStructValue(Struct.newBuilder().putFields(key, Value.newBuilder().setStringValue(value).build())).build())
            .build();
    }

    /** A metadata context Envoy sends with a subset hint of {@code endpoints} (an empty list is a hint too). */
    public static Metadata subsetHint(List<String> endpoints) {
        ListValue.Builder list = ListValue.newBuilder();
        endpoints.forEach(e -> list.addValues(Value.newBuilder().setStringValue(e)));
        return Metadata.newBuilder().putFilterMetadata(SUBSET_NAMESPACE, Struct.newBuilder()
            .putFields(SUBSET_KEY, Value.newBuilder().setListValue(list).build()).build()).build();
    }

    /** The metadata context of the response phase: the endpoint that served the request. */
    public static Metadata servedReport(String endpoint) {
        return Metadata.newBuilder().putFilterMetadata(LB_NAMESPACE, Struct.newBuilder()
            .putFields(SERVED, Value.newBuilder().setStringValue(endpoint).build()).build()).build();
    }

    /**
     * The subset hint in {@code metadata}: null when there is none, else its endpoints (possibly empty: then no
     * endpoint is eligible). A comma-separated string value is read as a list, as some gateways send it.
     */
    public static List<String> subset(Metadata metadata) {
        Struct ns = metadata.getFilterMetadataMap().get(SUBSET_NAMESPACE);
        if (ns == null || !ns.containsFields(SUBSET_KEY)) {
            return null;
        }
        Value v = ns.getFieldsOrThrow(SUBSET_KEY);
        List<String> out = new ArrayList<>();
        if (v.hasListValue()) {
            for (Value e : v.getListValue().getValuesList()) {
                if (!e.getStringValue().isBlank()) {
                    out.add(e.getStringValue().strip());
                }
            }
        } else if (v.hasStringValue()) {
            for (String e : v.getStringValue().split(",")) {
                if (!e.isBlank()) {
                    out.add(e.strip());
                }
            }
        }
        return out;
    }

    /** The served endpoint reported in {@code metadata}, or null. */
    public static String served(Metadata metadata) {
        Struct ns = metadata.getFilterMetadataMap().get(LB_NAMESPACE);
        if (ns == null || !ns.containsFields(SERVED)) {
            return null;
        }
        String s = ns.getFieldsOrThrow(SERVED).getStringValue();
        return s.isBlank() ? null : s.strip();
    }

    /** The destination in a {@code dynamic_metadata} struct, or null. */
    public static String destination(Struct dynamicMetadata) {
        Value ns = dynamicMetadata.getFieldsMap().get(LB_NAMESPACE);
        if (ns == null || !ns.hasStructValue()) {
            return null;
        }
        Value d = ns.getStructValue().getFieldsMap().get(DESTINATION);
        return d == null ? null : d.getStringValue();
    }

    /** One echoed body piece. */
    public static BodyResponse streamed(ByteString piece, boolean endOfStream) {
        return BodyResponse.newBuilder().setResponse(CommonResponse.newBuilder().setBodyMutation(BodyMutation.newBuilder()
            .setStreamedResponse(StreamedBodyResponse.newBuilder().setBody(piece).setEndOfStream(endOfStream)))).build();
    }

    /**
     * {@code body} cut into pieces of at most {@link #MAX_ECHO_CHUNK} bytes (no copy: substrings of the rope); one empty
     * piece for an empty body, so the end of stream is still said.
     */
    public static List<ByteString> chunks(ByteString body) {
        List<ByteString> out = new ArrayList<>(body.size() / MAX_ECHO_CHUNK + 1);
        for (int i = 0; i < body.size(); i += MAX_ECHO_CHUNK) {
            out.add(body.substring(i, Math.min(body.size(), i + MAX_ECHO_CHUNK)));
        }
        if (out.isEmpty()) {
            out.add(ByteString.EMPTY);
        }
        return out;
    }

    /** A header mutation setting the destination (and the P/D prefill pod when there is one). */
    public static HeaderMutation destinationHeaders(String destination, String prefiller) {
        HeaderMutation.Builder m = HeaderMutation.newBuilder().addSetHeaders(set(DESTINATION, destination));
        if (prefiller != null) {
            m.addSetHeaders(set(PREFILLER, prefiller));
        }
        return m.build();
    }
}
