#!/usr/bin/env bash
# The soak of tests/fault/soak.sh for 60 s (`make soak` runs 10 minutes):
# three floodgate serve processes under mixed traffic, Redis restarted
# every 20 s and a SIGHUP reload every 10 s; RSS flat from 25 s (after
# the first restart), descriptors back, no error the policies do not
# explain.
SOAK_S=${SOAK_S:-60} RESTART_S=${RESTART_S:-20} HUP_S=${HUP_S:-10} \
    exec bash "$(dirname "$0")/../fault/soak.sh"
