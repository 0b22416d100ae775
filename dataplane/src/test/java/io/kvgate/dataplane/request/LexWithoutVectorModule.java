package io.kvgate.dataplane.request;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Run by {@link JsonLexerWithoutVectorModuleTest} in a JVM started without {@code deploy/jvm.options}: lexes bodies
 * whose strings cross every vector boundary, valid ones through the extractor (direct buffers) and refused ones
 * through the lexer (heap buffers), and prints which string skip ran and the verdicts (one line each).
 */
public final class LexWithoutVectorModule {
    private LexWithoutVectorModule() {
    }

    public static void main(String[] args) throws Exception {
        System.out.println("scan " + JsonLexer.stringScan() + (JsonLexer.VECTOR_BYTES == 0 ? ""
            : JsonLexer.readsDirectBuffersInPlace() ? ", direct buffers in place" : ", a segment per body"));
        int ok = 0;
        int refused = 0;
        for (int len = 0; len <= 200; len++) {
            String content = "a".repeat(len);
            RequestFields f = new RequestFields();
            RequestFieldExtractor x = new RequestFieldExtractor(f);
            byte[] good = ("{\"model\":\"m\",\"messages\":[{\"content\":\"" + content + "é\\n\"}]}").getBytes(StandardCharsets.UTF_8);
            io.netty.buffer.ByteBuf direct = io.netty.buffer.Unpooled.directBuffer(good.length + len % 7);
            direct.writeZero(len % 7).writeBytes(good).readerIndex(len % 7);
            x.body(direct);
            if (x.finish() == RequestFieldExtractor.Result.OK && f.model.equals("m")) {
                ok++;
            }
            direct.release();
            byte[] bad = ("{\"model\":\"m\",\"user\":\"" + content + "\u0001\"}").getBytes(StandardCharsets.UTF_8);
            JsonLexer lexer = JsonLexer.forThisThread();
            lexer.start(ByteBuffer.wrap(bad));
            try {
                while (lexer.nextToken() != null) {
                    lexer.getText();
                }
            } catch (JsonLexer.MalformedJsonException e) {
                if (e.getMessage().contains("at byte " + (21 + len))) {
                    refused++;
                }
            } finally {
                lexer.clear();
            }
        }
        System.out.println("accepted " + ok + " refused " + refused);
    }
}
