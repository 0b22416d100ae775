package io.kvgate.dataplane.tls;

import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * A throw-away PKI for TLS tests, minted with the {@code openssl} command (installed by {@code .ci/setup}): one CA
 * (ECDSA P-256) and the leaf certificates a test asks for, each with the serial it names, as PEM files (PKCS#8 keys)
 * in a directory; plus the JDK contexts a test client or engine uses with them.
 */
public final class TestPki {
    public final Path dir;
    public final Path caCert;
    private final Path caKey;

    public TestPki(Path dir) throws Exception {
        this.dir = dir;
        this.caCert = dir.resolve("ca.pem");
        this.caKey = dir.resolve("ca.key");
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", caKey.toString(),
            "-out", caCert.toString(), "-days", "2", "-subj", "/CN=kvgate test CA");
    }

    /** A leaf's files. */
    public record Leaf(Path cert, Path key, BigInteger serial) {}

    /**
     * A leaf signed by the CA: {@code cn} as subject CN, {@code san} as subjectAltName (e.g. {@code IP:127.0.0.1}),
     * good for server and client authentication; written as {@code <name>.pem} and {@code <name>.key}.
     */
    public Leaf leaf(String name, String cn, String san, long serial) throws Exception {
        return leaf(name, cn, san, serial, "ec");
    }

    /** {@link #leaf} with {@code keyType} {@code ec} (P-256) or {@code rsa} (2048 bits). */
    public Leaf leaf(String name, String cn, String san, long serial, String keyType) throws Exception {
        Path key = dir.resolve(name + ".key.tmp");
        Path csr = dir.resolve(name + ".csr");
        Path cert = dir.resolve(name + ".pem.tmp");
        Path ext = dir.resolve(name + ".ext");
        Files.writeString(ext, "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
            + "extendedKeyUsage=serverAuth,clientAuth\n" + (san == null ? "" : "subjectAltName=" + san + "\n"));
        List<String> keyArgs = keyType.equals("rsa") ? List.of("-newkey", "rsa:2048")
            : List.of("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256");
        List<String> req = new ArrayList<>(List.of("req"));
        req.addAll(keyArgs);
        req.addAll(List.of("-nodes", "-keyout", key.toString(), "-out", csr.toString(), "-subj", "/CN=" + cn));
        openssl(req.toArray(String[]::new));
        openssl("x509", "-req", "-in", csr.toString(), "-CA", caCert.toString(), "-CAkey", caKey.toString(), "-set_serial",
            "0x" + Long.toHexString(serial), "-days", "2", "-out", cert.toString(), "-extfile", ext.toString());
        // Renamed into place, as a certificate manager does: a reader never sees half a file.
        Path finalKey = dir.resolve(name + ".key");
        Path finalCert = dir.resolve(name + ".pem");
        Files.move(key, finalKey, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        Files.move(cert, finalCert, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        return new Leaf(finalCert, finalKey, BigInteger.valueOf(serial));
    }

    static void openssl(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("openssl"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed: " + out);
        }
    }

    /** A JDK TLS context trusting the CA, presenting {@code client} when not null. */
    public SSLContext clientContext(Leaf client) throws Exception {
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(client == null ? null : keyManagers(client), trustManagers(), null);
        return ctx;
    }

    /** A JDK TLS context serving {@code leaf} and trusting the CA (to verify client certificates). */
    public SSLContext serverContext(Leaf leaf) throws Exception {
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(keyManagers(leaf), trustManagers(), null);
        return ctx;
    }

    private javax.net.ssl.KeyManager[] keyManagers(Leaf leaf) throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        var key = PemFiles.privateKey("key", leaf.key().toString(), Files.readAllBytes(leaf.key()));
        ks.setKeyEntry("leaf", key, new char[0], new Certificate[] {read(leaf.cert())});
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, new char[0]);
        return kmf.getKeyManagers();
    }

    private javax.net.ssl.TrustManager[] trustManagers() throws Exception {
        KeyStore ts = KeyStore.getInstance("PKCS12");
        ts.load(null, null);
        ts.setCertificateEntry("ca", read(caCert));
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ts);
        return tmf.getTrustManagers();
    }

    public static X509Certificate read(Path pem) throws Exception {
        try (InputStream in = Files.newInputStream(pem)) {
            return (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
        }
    }
}
