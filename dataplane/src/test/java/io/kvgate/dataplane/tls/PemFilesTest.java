package io.kvgate.dataplane.tls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.security.KeyPairGenerator;
import java.util.Base64;
import org.junit.jupiter.api.Test;

/** Every way a key or certificate file can be unusable is reported with its key, its file and what is wrong. */
class PemFilesTest {
    private static byte[] pem(String type, byte[] der) {
        return ("-----BEGIN " + type + "-----\n" + Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(der)
            + "\n-----END " + type + "-----\n").getBytes(StandardCharsets.US_ASCII);
    }

    private static String refusal(byte[] keyFile) {
        return assertThrows(PemFiles.BadFile.class, () -> PemFiles.privateKey("tls.key_file", "/k.pem", keyFile)).getMessage();
    }

    @Test
    void pkcs8RsaAndEcKeysAreRead() throws Exception {
        for (String alg : new String[] {"RSA", "EC"}) {
            KeyPairGenerator g = KeyPairGenerator.getInstance(alg);
            g.initialize(alg.equals("RSA") ? 2048 : 256);
            var key = PemFiles.privateKey("tls.key_file", "/k.pem", pem("PRIVATE KEY", g.generateKeyPair().getPrivate().getEncoded()));
            assertEquals(alg, key.getAlgorithm());
        }
    }

    @Test
    void otherKeyEncodingsAreRefusedWithTheConversionCommand() {
        String m = refusal("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n".getBytes(StandardCharsets.US_ASCII));
        assertTrue(m.startsWith("tls.key_file: value '/k.pem' holds a PKCS#1 RSA key: it must be an unencrypted PKCS#8 key"), m);
        assertTrue(m.contains("openssl pkcs8 -topk8 -nocrypt -in /k.pem"), m);
        assertTrue(refusal("-----BEGIN EC PRIVATE KEY-----\n".getBytes(StandardCharsets.US_ASCII)).contains("holds a SEC1 EC key"));
        assertTrue(refusal("-----BEGIN ENCRYPTED PRIVATE KEY-----\n".getBytes(StandardCharsets.US_ASCII))
            .contains("holds an encrypted PKCS#8 key"));
        assertTrue(refusal("hello".getBytes(StandardCharsets.US_ASCII)).contains("holds no private key"));
    }

    @Test
    void aKeyOfAnotherAlgorithmOrBrokenBase64IsRefused() throws Exception {
        byte[] ed = KeyPairGenerator.getInstance("Ed25519").generateKeyPair().getPrivate().getEncoded();
        assertTrue(refusal(pem("PRIVATE KEY", ed)).contains("holds a PKCS#8 key that is neither RSA nor EC"));
        // The MIME decoder skips what is not base64: what is left is no key of either kind.
        assertTrue(refusal("-----BEGIN PRIVATE KEY-----\n***\n-----END PRIVATE KEY-----\n".getBytes(StandardCharsets.US_ASCII))
            .contains("holds a PKCS#8 key that is neither RSA nor EC"));
    }

    @Test
    void aCertificateFileWithoutCertificatesIsRefused() {
        String m = assertThrows(PemFiles.BadFile.class, () -> PemFiles.certificates("tls.cert_file", "/c.pem",
            "no pem here".getBytes(StandardCharsets.US_ASCII))).getMessage();
        assertTrue(m.startsWith("tls.cert_file: value '/c.pem' "), m);
        String unreadable = assertThrows(PemFiles.BadFile.class, () -> PemFiles.read("tls.cert_file", "/nonexistent/c.pem"))
            .getMessage();
        assertTrue(unreadable.startsWith("tls.cert_file: value '/nonexistent/c.pem' cannot be read (NoSuchFileException"),
            unreadable);
    }
}
