#!/usr/bin/env bash
# floodgate serve against ambiguous input, as an attacker would send it:
# a query parameter or a key header given twice is refused (400 with the
# reason), not first-wins; X-Forwarded-For entries in the forms proxies
# write (IPv4 with a port, [IPv6] with or without one) name the client,
# one key per address whatever its spelling; an IPv4 address with leading
# zeros is refused, not silently replaced by the proxy's own address.
. "$(dirname "$0")/../serve/lib.sh"

cat >"$T/fg.ini" <<INI
[server]
workers = 2
trusted_proxies = 127.0.0.1
[store]
url = memory
[limit user]
key = header:X-User-Id
algorithm = fixed_window
rate = 100/day
[limit byq]
key = query:u
algorithm = fixed_window
rate = 100/day
[limit per_ip]
key = ip
algorithm = fixed_window
rate = 1/day
INI
start_fg s -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
B="http://127.0.0.1:$FGPORT_s"

# is400 NAME WANT-IN-BODY HTTP-ARGS...: a 400 whose reason says WANT.
is400() {
    local name=$1 want=$2; shift 2
    local c
    c=$(http "$@")
    if [ "$c" = 400 ] && grep -q -- "$want" "$T/b"; then
        ok "$name"
    else
        bad "$name: got $c $(head -c 200 "$T/b")"
    fi
}

# --- a query parameter twice ---------------------------------------------
is400 "/v1/check key= twice" "key parameter given twice" \
    POST "$B/v1/check?limit=user&key=a&key=b"
is400 "/v1/check key= twice, the same value" "key parameter given twice" \
    POST "$B/v1/check?limit=user&key=a&key=a"
is400 "/v1/check key= twice, one spelt k%65y" "key parameter given twice" \
    POST "$B/v1/check?limit=user&k%65y=a&key=b"
is400 "/v1/check limit= twice" "limit parameter given twice" \
    POST "$B/v1/check?limit=user&limit=byq&key=a"
is400 "/v1/check cost= twice" "cost parameter given twice" \
    POST "$B/v1/check?limit=user&key=a&cost=1&cost=5"
is400 "/v1/auth limit= twice" "limit parameter given twice" \
    GET "$B/v1/auth?limit=user&limit=byq" -H 'X-User-Id: a'
is400 "/v1/auth query key source twice" "query parameter u given twice" \
    GET "$B/v1/auth?limit=byq&u=a&u=b"
# --- a limit list with an empty name or a NUL in it ---------------------
is400 "/v1/check limit=user%00junk" "limit parameter contains a NUL" \
    POST "$B/v1/check?limit=user%00junk&key=a"
for l in 'user,' ',user' 'user,,byq'; do
    is400 "/v1/check limit=$l" "empty name in limit parameter" \
        POST "$B/v1/check?limit=$l&key=a"
done
expect_eq "/v1/check with each once is answered" \
    "$(http POST "$B/v1/check?limit=user&key=a&cost=2")" 200

# --- a key header twice ----------------------------------------------------
is400 "/v1/auth X-User-Id twice" "header X-User-Id given 2 times" \
    GET "$B/v1/auth?limit=user" -H 'X-User-Id: alice' -H 'X-User-Id: bob'
is400 "/v1/auth X-User-Id twice, other case" "header X-User-Id given 2 times" \
    GET "$B/v1/auth?limit=user" -H 'X-User-Id: alice' -H 'x-user-id: alice'
# An empty header value is valid and ends where the next line starts: the
# next header keeps its name, so a key header after it is still seen and
# still counted as given twice.
expect_eq "/v1/auth X-User-Id after an empty header is read" \
    "$(http GET "$B/v1/auth?limit=user" -H 'X-Empty;' -H 'X-User-Id: ev')" 200
is400 "/v1/auth X-User-Id twice, an empty header between" "header X-User-Id given 2 times" \
    GET "$B/v1/auth?limit=user" -H 'X-User-Id: r1' -H 'X-Pad;' -H 'X-User-Id: bob'
is400 "/v1/auth X-User-Id twice, each after an empty header" "header X-User-Id given 2 times" \
    GET "$B/v1/auth?limit=user" -H 'X-A;' -H 'X-User-Id: r2' -H 'X-B;' -H 'X-User-Id: bob'
expect_eq "/v1/auth X-User-Id once" \
    "$(http GET "$B/v1/auth?limit=user" -H 'X-User-Id: alice')" 200

# --- X-Forwarded-For forms (per_ip: 1/day, so a second request of the
# same key is refused with 403) ----------------------------------------------
# auth IP [XFF-LINES...]: the status of /v1/auth?limit=per_ip.
auth() {
    local args=() x
    for x in "$@"; do args+=(-H "X-Forwarded-For: $x"); done
    http GET "$B/v1/auth?limit=per_ip" "${args[@]}"
}
expect_eq "7.7.7.7:1234 is 7.7.7.7 (first)" "$(auth '7.7.7.7:1234')" 200
expect_eq "7.7.7.7 after 7.7.7.7:1234: the same key" "$(auth '7.7.7.7')" 403
expect_eq "[2001:db8::1] (first)" "$(auth '[2001:db8::1]')" 200
expect_eq "[2001:db8::1]:443: the same key" "$(auth '[2001:db8::1]:443')" 403
expect_eq "2001:DB8::1: the same key" "$(auth '2001:DB8::1')" 403
expect_eq "2001:db8:0:0::1: the same key" "$(auth '2001:db8:0:0::1')" 403
expect_eq "[2001:db8::1]:80: the same key" "$(auth '[2001:db8::1]:80')" 403
expect_eq "::ffff:1.2.3.4 (first)" "$(auth '::ffff:1.2.3.4')" 200
expect_eq "1.2.3.4: the same key as ::ffff:1.2.3.4" "$(auth '1.2.3.4')" 403
expect_eq "another address is another key" "$(auth '8.8.4.4')" 200
# Several X-Forwarded-For lines are one list (RFC 9110 5.3), joined in
# order: the client is the rightmost untrusted entry of them all.
expect_eq "two lines joined: 9.9.9.9 then 127.0.0.1" "$(auth '9.9.9.9' '127.0.0.1')" 200
expect_eq "9.9.9.9 again, in one line" "$(auth '6.6.6.6, 9.9.9.9')" 403
# Leading zeros: octal to some parsers, decimal to others. Refused.
is400 "007.007.007.007 refused" "ambiguous" \
    GET "$B/v1/auth?limit=per_ip" -H 'X-Forwarded-For: 007.007.007.007'
is400 "010.0.0.1:80 refused" "ambiguous" \
    GET "$B/v1/auth?limit=per_ip" -H 'X-Forwarded-For: 010.0.0.1:80'
# An X-Forwarded-For after an empty header still names the client.
expect_eq "5.5.5.5 after an empty header (first)" \
    "$(http GET "$B/v1/auth?limit=per_ip" -H 'X-Pad;' -H 'X-Forwarded-For: 5.5.5.5')" 200
expect_eq "5.5.5.5 again: the same key" "$(auth '5.5.5.5')" 403
# The proxy's own address did not take the blame: still unused.
expect_eq "the proxy's own key was never counted" "$(auth)" 200

check "server alive" kill -0 "$FGPID_s"
finish
