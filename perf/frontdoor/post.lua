-- wrk script: POST the JSON body named by $BODY_FILE to $URI_PATH (default /v1/chat/completions) on every request.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.path = os.getenv("URI_PATH") or "/v1/chat/completions"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
