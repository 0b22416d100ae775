# Request bodies of the front-door benchmarks (sourced by frontdoor-bench.sh and frontdoor-ab.sh).
# make_body BYTES FILE: one chat message padded so the whole JSON body is exactly BYTES.
make_body() {
  local pre='{"model":"bench","messages":[{"role":"user","content":"' post='"}],"max_tokens":1}'
  local pad=$(( $1 - ${#pre} - ${#post} ))
  { printf '%s' "$pre"; head -c "$pad" /dev/zero | tr '\0' 'a'; printf '%s' "$post"; } > "$2"
  [ "$(stat -c %s "$2")" = "$1" ]
}
# make_token_body MODEL FILE: a completions body of exactly 1024 bytes whose prompt is token ids, the same ids for
# every model name of the same length. 136 token ids: 8 full blocks of 16 are hashed and looked up per request.
make_token_body() {
  local pre="{\"model\":\"$1\",\"prompt\":[" post='],"max_tokens":1}' ids="" i=100000
  while [ $(( ${#pre} + ${#ids} + 7 + ${#post} )) -le 1024 ]; do ids="${ids:+$ids,}$i"; i=$((i + 7919)); done
  local pad=$(( 1024 - ${#pre} - ${#ids} - ${#post} )) # spaces inside the array (still valid JSON)
  { printf '%s%s' "$pre" "$ids"; head -c "$pad" /dev/zero | tr '\0' ' '; printf '%s' "$post"; } > "$2"
  [ "$(stat -c %s "$2")" = 1024 ]
}
# The route a payload name is posted to: kv / rr are token-id completions, the rest chat.
uri_of() { case "$1" in kv|rr) echo /v1/completions ;; *) echo /v1/chat/completions ;; esac; }
