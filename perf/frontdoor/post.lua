-- wrk script: POST the JSON chat body named by $BODY_FILE to /v1/chat/completions on every request.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
