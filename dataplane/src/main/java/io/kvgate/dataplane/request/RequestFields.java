package io.kvgate.dataplane.request;

/**
 * The routing fields of one OpenAI request body, pulled out by {@link RequestFieldExtractor} without building a
 * tree. Mutable and reused per connection; event-loop only.
 */
public final class RequestFields {
    public String model;
    public boolean modelNotString;
    public boolean stream;
    public String user;
    public boolean hasMessages;
    public boolean messagesNotArray;
    public boolean hasPrompt;
    public boolean promptIsTokenIds;
    public boolean hasStreamOptions;
    public int n = 1;
    public boolean hasKvTransferParams;

    public void reset() {
        model = null;
        modelNotString = false;
        stream = false;
        user = null;
        hasMessages = false;
        messagesNotArray = false;
        hasPrompt = false;
        promptIsTokenIds = false;
        hasStreamOptions = false;
        n = 1;
        hasKvTransferParams = false;
    }
}
