# bench/lib.bash -- sourced by every bench/*.sh (not a .sh itself, which
# make bench would run as a benchmark): its arguments, its settings
# and its signals, the same way in each.

# bench_args "$@": --help prints the script's opening comment; it takes no
# arguments (its settings are the environment variables it names).
bench_args() {
    case ${1:-} in
    -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    esac
    [ $# -eq 0 ] && return
    echo "$0: no arguments (settings are environment variables; see --help)" >&2
    exit 2
}

# bench_whole VAR...: each variable a whole number, 1 or more, written
# without leading zeros (the shell's arithmetic reads 010 as 8), or exit 2.
bench_whole() {
    local v
    for v in "$@"; do
        case ${!v} in
        '' | *[!0-9]* | 0*)
            echo "$0: $v must be a whole number, 1 or more, without leading zeros, not '${!v}'" >&2
            exit 2
            ;;
        esac
    done
}

# bench_traps, once 'cleanup' is defined: it runs at exit; on Ctrl-C or
# SIGTERM it runs, then the script dies of the signal, so that make bench
# stops too (a script that exits instead is taken to have handled it, and
# the next benchmark would start).
bench_traps() {
    trap cleanup EXIT
    trap 'cleanup; trap - INT EXIT; kill -INT $$' INT
    trap 'cleanup; trap - TERM EXIT; kill -TERM $$' TERM
}
