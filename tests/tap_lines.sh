# Sourced (bash) by the test scripts that pass on the TAP of a program they
# run (tests/python_env.sh, tests/test_multinode.sh); they count results in
# $n and failures in $failed.

# zc_tap_lines PREFIX LOG: LOG's results renumbered on from $n, PREFIX put
# before each description, its comment lines passed on (its plan and
# anything else dropped); the failures are added to $failed.
zc_tap_lines() {
    local prefix=$1 line verdict
    while IFS= read -r line; do
        case $line in
        "ok "*|"not ok "*)
            n=$((n + 1))
            verdict=${line%% [0-9]*}
            [ "$verdict" = "not ok" ] && failed=$((failed + 1))
            echo "$verdict $n - $prefix${line#* - }" ;;
        "#"*) echo "$line" ;;
        esac
    done <"$2"
}
