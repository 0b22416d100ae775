package io.kvgate.control.config;

/** Section {@code tracing}: OpenTelemetry spans over OTLP/HTTP (see [tracing](tracing.md)); read by {@link TracingConfig#read}. */
public final class TracingKeys {
    private TracingKeys() {}

    public static final ConfigSection<TracingConfig> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "tracing",
        "OpenTelemetry traces exported over OTLP/HTTP (see [tracing](tracing.md)); the SDK is built at start-up",
        GatewayConfig::tracing).restartAsWhole();

    public static final ConfigKey<TracingConfig, String> OTLP_ENDPOINT = SECTION.stringKey("otlp_endpoint", null)
        .typeText("http(s) URL").defaultText("none (off)")
        .doc("where spans are POSTed, the full OTLP/HTTP traces URL (e.g. `http://127.0.0.1:4318/v1/traces`)")
        .readBack(TracingConfig::otlpEndpoint);
    public static final ConfigKey<TracingConfig, Double> SAMPLE_RATIO = SECTION.doubleKey("sample_ratio", 0, 0, 1)
        .doc("share of requests without a sampled client `traceparent` that start a trace; 0 = off entirely (a client's"
            + " `traceparent` then reaches the engine untouched)")
        .readBack(TracingConfig::sampleRatio);
    public static final ConfigKey<TracingConfig, String> SERVICE_NAME = SECTION.stringKey("service_name",
            TracingConfig.DEFAULT_SERVICE_NAME)
        .doc("the `service.name` resource attribute of every span").readBack(TracingConfig::serviceName);
}
