package io.kvgate.tools.bench;

import java.net.URI;
import java.net.URISyntaxException;

/**
 * One server to load: a label (for reports and compare mode) and a plain-HTTP base URL. The request path is the
 * base path plus {@code /v1/chat/completions} or {@code /v1/completions} (a base path already ending in {@code /v1}
 * is not doubled).
 *
 * @param label    name in reports and file names ({@code [A-Za-z0-9._-]+})
 * @param url      the URL as given
 * @param host     host name or address
 * @param port     TCP port
 * @param basePath path prefix without trailing slash ("" for none)
 */
public record BenchTarget(String label, String url, String host, int port, String basePath) {

    /** Parses {@code URL} or {@code label=URL}; the default label is {@code defaultLabel}. */
    public static BenchTarget parse(String spec, String defaultLabel) {
        String label = defaultLabel;
        String url = spec;
        int eq = spec.indexOf('=');
        if (eq > 0 && !spec.substring(0, eq).contains("/") && !spec.substring(0, eq).contains(":")) {
            label = spec.substring(0, eq);
            url = spec.substring(eq + 1);
        }
        if (!label.matches("[A-Za-z0-9._-]+")) {
            throw new IllegalArgumentException("--target label '" + label + "' must match [A-Za-z0-9._-]+");
        }
        URI uri;
        try {
            uri = new URI(url);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("--target '" + url + "' is not a URL: " + e.getMessage());
        }
        if (!"http".equalsIgnoreCase(uri.getScheme())) {
            throw new IllegalArgumentException("--target '" + url + "' must be an http:// URL (TLS is not supported)");
        }
        if (uri.getHost() == null) {
            throw new IllegalArgumentException("--target '" + url + "' has no host");
        }
        int port = uri.getPort() < 0 ? 80 : uri.getPort();
        String path = uri.getRawPath() == null ? "" : uri.getRawPath();
        while (path.endsWith("/")) {
            path = path.substring(0, path.length() - 1);
        }
        return new BenchTarget(label, url, uri.getHost(), port, path);
    }

    /** The request path for a route. */
    public String path(BenchConfig.Route route) {
        String suffix = route == BenchConfig.Route.CHAT ? "/chat/completions" : "/completions";
        return (basePath.endsWith("/v1") ? basePath : basePath + "/v1") + suffix;
    }

    /** The Host header value. */
    public String hostHeader() {
        String h = host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
        return port == 80 ? h : h + ":" + port;
    }
}
