package io.kvgate.dataplane.tls;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;

/**
 * Reads the PEM files a TLS context is built from, so that a bad file is reported by the configuration key that
 * names it and the problem found ("tls.key_file: value '/etc/kvgate/key.pem' ...: it is a PKCS#1 RSA key ..."),
 * instead of a provider's exception from deep inside a handshake or a context build. Stateless.
 */
public final class PemFiles {
    private PemFiles() {}

    /** A file that cannot be used: the configuration key, the file and the problem. */
    public static final class BadFile extends Exception {
        private final String key;
        private final String file;

        BadFile(String key, String file, String problem) {
            super(key + ": value '" + file + "' " + problem);
            this.key = key;
            this.file = file;
        }

        public String key() {
            return key;
        }

        public String file() {
            return file;
        }
    }

    /** The file's bytes; an unreadable file is a {@link BadFile}. */
    public static byte[] read(String key, String file) throws BadFile {
        try {
            return Files.readAllBytes(Path.of(file));
        } catch (IOException e) {
            throw new BadFile(key, file, "cannot be read (" + e.getClass().getSimpleName() + ": " + e.getMessage() + ")");
        }
    }

    /** Every certificate of a PEM file, in file order (a chain: leaf first); none is a {@link BadFile}. */
    public static List<X509Certificate> certificates(String key, String file, byte[] pem) throws BadFile {
        try {
            List<X509Certificate> out = new ArrayList<>();
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(pem))) {
                out.add((X509Certificate) c);
            }
            if (out.isEmpty()) {
                throw new BadFile(key, file, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
            }
            return out;
        } catch (CertificateException e) {
            throw new BadFile(key, file, "is not a PEM certificate file (" + e.getMessage() + ")");
        }
    }

    private static final String PKCS8_BEGIN = "-----BEGIN PRIVATE KEY-----";
    private static final String PKCS8_END = "-----END PRIVATE KEY-----";

    /** The unencrypted PKCS#8 private key (RSA or EC) of a PEM file. */
    public static PrivateKey privateKey(String key, String file, byte[] pem) throws BadFile {
        String text = new String(pem, StandardCharsets.US_ASCII);
        int begin = text.indexOf(PKCS8_BEGIN);
        int end = text.indexOf(PKCS8_END);
        if (begin < 0 || end < begin) {
            String found = text.contains("BEGIN RSA PRIVATE KEY") ? "a PKCS#1 RSA key"
                : text.contains("BEGIN EC PRIVATE KEY") ? "a SEC1 EC key"
                : text.contains("BEGIN ENCRYPTED PRIVATE KEY") ? "an encrypted PKCS#8 key" : "no private key";
            throw new BadFile(key, file, "holds " + found + ": it must be an unencrypted PKCS#8 key (" + PKCS8_BEGIN
                + "); convert it with: openssl pkcs8 -topk8 -nocrypt -in " + file + " -out key.pem");
        }
        byte[] der;
        try {
            der = Base64.getMimeDecoder().decode(text.substring(begin + PKCS8_BEGIN.length(), end));
        } catch (IllegalArgumentException e) {
            throw new BadFile(key, file, "is not valid PEM (base64: " + e.getMessage() + ")");
        }
        for (String algorithm : new String[] {"RSA", "EC"}) {
            try {
                return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
            } catch (Exception ignored) {
                // not this algorithm: try the next one
            }
        }
        throw new BadFile(key, file, "holds a PKCS#8 key that is neither RSA nor EC");
    }

    /** Whether {@code key} is the private half of {@code cert}'s public key: a signature made with one verifies. */
    public static boolean matches(PrivateKey key, X509Certificate cert) {
        try {
            String alg = key.getAlgorithm().equals("EC") ? "SHA256withECDSA" : "SHA256withRSA";
            byte[] probe = "kvgate key check".getBytes(StandardCharsets.US_ASCII);
            Signature s = Signature.getInstance(alg);
            s.initSign(key);
            s.update(probe);
            byte[] sig = s.sign();
            Signature v = Signature.getInstance(alg);
            v.initVerify(cert.getPublicKey());
            v.update(probe);
            return v.verify(sig);
        } catch (Exception e) {
            return false; // different key types, or unusable: not a pair
        }
    }

    /** SHA-256 over the contents of {@code files} (what a file watch compares); absent files count as empty. */
    static String digest(List<String> files) {
        try {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            for (String f : files) {
                byte[] b;
                try {
                    b = Files.readAllBytes(Path.of(f));
                } catch (IOException e) {
                    b = new byte[0];
                }
                d.update(f.getBytes(StandardCharsets.UTF_8));
                d.update((byte) 0);
                d.update(Integer.toString(b.length).getBytes(StandardCharsets.US_ASCII));
                d.update((byte) 0);
                d.update(b);
            }
            return HexFormat.of().formatHex(d.digest());
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The subject's common name (CN) of a certificate, or null. */
    public static String commonName(X509Certificate cert) {
        try {
            var name = new javax.naming.ldap.LdapName(cert.getSubjectX500Principal().getName());
            for (var rdn : name.getRdns()) {
                if (rdn.getType().equalsIgnoreCase("CN")) {
                    return String.valueOf(rdn.getValue());
                }
            }
        } catch (javax.naming.InvalidNameException e) {
            return null;
        }
        return null;
    }
}
