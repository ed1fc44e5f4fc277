#!/usr/bin/env bash
# Shadow mode through real floodgate serve processes: a limit with
# shadow = on counts as usual and allows what it would refuse, saying so
# in the JSON, the logs and floodgate_shadow_refusals_total; in a set it
# neither stops the set nor is refunded; [server] shadow = on does it for
# every limit, the failure policy's refusals (on_failure = closed with
# Redis unreachable) included.
. "$(dirname "$0")/../serve/lib.sh"

printf 'shadow-test-token-%s\n' "$$" >"$T/token"
chmod 600 "$T/token"
AUTH="Authorization: Bearer shadow-test-token-$$"
cat >"$T/s.ini" <<INI
[server]
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
max_key_bytes = 1024
[limit sh]
key = query:u
algorithm = fixed_window
rate = 2/h
shadow = on
[limit en]
key = query:u
algorithm = fixed_window
rate = 3/h
[limit one]
key = query:u
rate = 1/h
shadow = on
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
S=http://127.0.0.1:$FGPORT_s
A=http://127.0.0.1:$(grep -o 'event=admin_listening addr=[^ ]*' "$T/s.log" | sed 's/.*://')

# One shadow limit: always 200; the would-be refusals say so.
codes=""
for i in 1 2 3 4; do codes="$codes $(http POST "$S/v1/check?limit=sh&key=a")"; done
expect_eq "a shadow limit always allows" "$codes" " 200 200 200 200"
case "$(cat "$T/b")" in
'{"allowed":true,"limit":2,"remaining":0,"reset_ms":'*',"retry_after_ms":0,"source":"store","shadowed":true,"name":"sh"}') ok "JSON says shadowed" ;;
*) bad "JSON: $(cat "$T/b")" ;;
esac
expect_eq "RateLimit shows what the limit counts" "$(header RateLimit | sed 's/;t=.*//')" '"sh";r=0'
expect_eq "no Retry-After on a shadowed refusal" "$(header Retry-After)" ""
http POST "$S/v1/check?limit=sh&key=other" >/dev/null
case "$(cat "$T/b")" in *shadowed*) bad "an allowed check marked shadowed" ;; *) ok "an allowed check is not marked" ;; esac
# Counted as usual: the two allowed units are taken, the refusals nothing.
http GET "$A/v1/peek?limit=sh&key=a" -H "$AUTH" >/dev/null
case "$(cat "$T/b")" in *'"remaining":0,'*) ok "peek: the shadow limit counted" ;; *) bad "peek: $(cat "$T/b")" ;; esac

# A set [sh, en]: sh's refusals do not stop it; en decides.
codes=""
for i in 1 2 3 4; do codes="$codes $(http POST "$S/v1/check?limit=sh,en&key=b")"; done
expect_eq "a shadowed refusal does not stop the set" "$codes" " 200 200 200 429"
case "$(header RateLimit)" in *'"sh";r=0'*'"en";r=0'*) ok "RateLimit names both" ;; *) bad "RateLimit: $(header RateLimit)" ;; esac
# en took 3 (the 4th was refused and took nothing); sh took 2; neither
# was refunded wrongly: sh's would-be refusals took nothing to refund.
http GET "$A/v1/peek?limit=en&key=b" -H "$AUTH" >/dev/null
case "$(cat "$T/b")" in *'"remaining":0,'*) ok "en took three" ;; *) bad "en: $(cat "$T/b")" ;; esac
http GET "$A/v1/peek?limit=sh&key=b" -H "$AUTH" >/dev/null
case "$(cat "$T/b")" in *'"remaining":0,'*) ok "sh kept its two" ;; *) bad "sh: $(cat "$T/b")" ;; esac
# [en, one]: en allows, one would refuse: allowed, en keeps its unit.
codes=""
for i in 1 2; do codes="$codes $(http POST "$S/v1/check?limit=en,one&key=c")"; done
expect_eq "enforcing then shadow" "$codes" " 200 200"
http GET "$A/v1/peek?limit=en&key=c" -H "$AUTH" >/dev/null
case "$(cat "$T/b")" in *'"remaining":1,'*) ok "en not refunded after a shadowed refusal" ;; *) bad "en: $(cat "$T/b")" ;; esac

# Metrics and logs: each would-be refusal.
curl -s -m 5 "$S/metrics" >"$T/m.txt"
expect_eq "metric for sh" "$(grep '^floodgate_shadow_refusals_total{limit="sh"}' "$T/m.txt" | cut -d" " -f2)" 4
expect_eq "metric for one" "$(grep '^floodgate_shadow_refusals_total{limit="one"}' "$T/m.txt" | cut -d' ' -f2)" 1
expect_eq "metric for en" "$(grep '^floodgate_shadow_refusals_total{limit="en"}' "$T/m.txt" | cut -d' ' -f2)" 0
expect_eq "a log line each" "$(grep -c 'event=shadow_refusal ' "$T/s.log")" 5
check "the line names limit and key" grep -q 'event=shadow_refusal worker=0 limit=sh key=a remaining=0 ' "$T/s.log"
# The longest key, each byte escaped (1024 '"', 2050 bytes logged): its
# shadow_refusal and admin lines are whole, every field after it kept.
q=$(printf '%1024s' '' | tr ' ' '"')
qe=$(printf '%1024s' '' | sed 's/ /%22/g')
for _ in 1 2; do http POST "$S/v1/check?limit=one&key=$qe" >/dev/null; done
http POST "$A/v1/reset?limit=one&key=$qe" -H "$AUTH" >/dev/null
esc="\"${q//\"/\\\"}\""
check "a shadow_refusal line with the longest key is whole" \
    grep -qF "limit=one key=$esc remaining=0 " "$T/s.log"
check "its last field is there" \
    bash -c "grep -F 'limit=one key=$esc' '$T/s.log' | grep -q ' suppressed=[0-9]*\$'"
check "an admin line with the longest key is whole" \
    grep -qF "route=reset limit=one key=$esc status=200 peer=127.0.0.1" "$T/s.log"

# A flood of would-be refusals: at most 20 lines a second per worker; the
# next line, or within a second or two a line of its own, says how many
# were left out, with no later request.
l0=$(wc -l <"$T/s.log")
curl -s -m 20 -o /dev/null -X POST "$S/v1/check?limit=sh&key=flood&n=[1-100]"
for _ in $(seq 1 40); do
    tail -n +"$((l0 + 1))" "$T/s.log" | grep -q 'event=shadow_refusal_suppressed' && break
    sleep 0.1
done
tail -n +"$((l0 + 1))" "$T/s.log" | grep 'event=shadow_refusal' >"$T/flood.log"
lines=$(grep -c 'event=shadow_refusal ' "$T/flood.log")
left=$(grep -o 'suppressed=[0-9]*' "$T/flood.log" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
check "a flood of shadow refusals: few lines ($lines for 98)" [ "$lines" -le 80 ]
expect_eq "a flood of shadow refusals: lines and those left out count all, unasked" "$((lines + left))" 98
check "the count line names the worker" grep -q 'event=shadow_refusal_suppressed worker=[0-9]* suppressed=[0-9]*$' "$T/flood.log"

# [server] shadow = on, Redis unreachable, on_failure = closed: the policy's
# refusal is shadowed too (200, not 503); the same file without it: 503.
DEAD=$(free_port)
for mode in on off; do
    cat >"$T/c$mode.ini" <<INI
[server]
shadow = $mode
[store]
url = redis://127.0.0.1:$DEAD
timeout = 50ms
[limit closed_l]
key = query:u
rate = 10/s
on_failure = closed
INI
    start_fg "c$mode" -c "$T/c$mode.ini" --listen 127.0.0.1:0 || bad "server shadow=$mode starts"
done
eval "P=\$FGPORT_con"
expect_eq "[server] shadow: a fail-closed refusal allowed" "$(http POST "http://127.0.0.1:$P/v1/check?limit=closed_l&key=u")" 200
case "$(cat "$T/b")" in *'"source":"fail_closed","shadowed":true'*) ok "it says fail_closed, shadowed" ;; *) bad "body: $(cat "$T/b")" ;; esac
eval "P=\$FGPORT_coff"
expect_eq "without shadow: 503" "$(http POST "http://127.0.0.1:$P/v1/check?limit=closed_l&key=u")" 503

# Bad values are refused at start with the line.
printf '[limit x]\nkey = query:u\nrate = 1/s\nshadow = maybe\n' >"$T/bad.ini"
out=$(timeout 5 "$FLOODGATE" serve -c "$T/bad.ini" --listen 127.0.0.1:0 2>&1)
case "$out" in *"bad.ini:4: shadow must be on or off"*) ok "shadow = maybe refused" ;; *) bad "shadow = maybe: $out" ;; esac

finish
