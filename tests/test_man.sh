#!/bin/sh
# Every man page in man/ renders, from the source tree and installed.
#
# From the source tree, as the README says (`man -l man/PAGE` from the top
# directory): each page renders to text that has a NAME section naming the
# page, with nothing on stderr (man-db's --warnings: groff's mac
# warnings; groff -ww where man-db is missing).  A page that names more
# than one function is written once; its other names are symbolic links to
# it (a one-line `.so man3/PAGE` redirect resolves against the current
# directory, so it opens installed but not from the source tree): no page
# in man/ may be such a redirect, and every link must stay inside man/.
#
# Installed (`make install-man install-man-aliases` into a scratch mandir,
# when the build directory is the current one, as under make check): every
# alias is installed as a `.so` redirect to its page and renders with
# `man -M`.
set -u

srcdir=${ZC_TEST_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
top=$(cd "$srcdir/.." && pwd)
tmp=${TMPDIR:-/tmp}/zc_test_man.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

# Pages that are links to a page whose NAME does not list them: concept
# names that point at the page of their calls.
concept_aliases="zc_ring_attn.3"

n=0
result() { # status description
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
skip() {
    n=$((n + 1))
    echo "ok $n # SKIP $1"
}

if man --version 2>/dev/null | grep -q '^man '; then
    renderer=man-db
elif command -v groff >/dev/null 2>&1; then
    renderer=groff
else
    echo "1..0 # SKIP neither man-db nor groff is installed (tools/deps.sh installs them)"
    exit 0
fi
# Plain text, one width, no pager, no locale surprises.
MANWIDTH=80 MANPAGER=cat PAGER=cat LC_ALL=C.UTF-8
export MANWIDTH MANPAGER PAGER LC_ALL
unset MANOPT MANPATH MANSECT MAN_KEEP_FORMATTING

# render FILE-OR-NAME OUT ERR [man options...]: exit status of the renderer.
render() {
    out=$2 err=$3 page=$1
    shift 3
    if [ "$renderer" = man-db ]; then
        man --warnings "$@" "$page" >"$out" 2>"$err"
    else
        # Only for local files; groff follows the symbolic links itself.
        groff -t -man -Tutf8 -P-cbou -ww -rLL=80n "$page" >"$out" 2>"$err"
    fi
}

# check_text OUT NAME: the page has a NAME section that names NAME.
check_text() {
    [ "$(wc -l <"$1")" -ge 5 ] || return 1
    awk '/^NAME/ { p = 1; next } /^[A-Z]/ { p = 0 } p' "$1" >"$1.name"
    [ -s "$1.name" ] || return 1
    case " $concept_aliases " in *" $2 "*) return 0 ;; esac
    grep -qw -- "${2%.*}" "$1.name"
}

# judge PAGE WHO FILE-OR-NAME [man options...]: render (as render does) and
# set why to what is wrong with it, if anything: the renderer (WHO in the
# message) failed or wrote to stderr, or the text does not name PAGE.
judge() {
    jpage=$1 who=$2 page=$3
    shift 3
    render "$page" "$tmp/out" "$tmp/err" "$@"
    st=$?
    if [ "$st" -ne 0 ]; then
        why="$who exited $st"
    elif [ -s "$tmp/err" ]; then
        why="$who wrote to stderr: $(head -n 3 "$tmp/err" | tr '\n' ' ')"
    elif ! check_text "$tmp/out" "$jpage"; then
        why="no text, or no NAME section naming ${jpage%.*}"
    fi
}

# verdict DESCRIPTION: ok, or not ok with why after DESCRIPTION.
verdict() {
    if [ -z "$why" ]; then
        result 0 "$1"
    else
        result 1 "$1: $why"
    fi
}

start=$(pwd)
cd "$top" || exit 1
pages=$(ls man 2>/dev/null | grep -E '^[a-z0-9_-]+\.[137]$')
[ -n "$pages" ] || { echo "Bail out! no man pages in $top/man (set ZC_TEST_SRCDIR)"; exit 1; }

for p in $pages; do
    f=man/$p
    why=
    if [ -h "$f" ]; then
        target=$(readlink "$f")
        case $target in
        */*) why="links to $target, outside man/" ;;
        *) [ -f "man/$target" ] && [ ! -h "man/$target" ] ||
               why="links to $target, which is not a page" ;;
        esac
    elif head -n 1 "$f" | grep -q '^\.so '; then
        why="is a .so redirect (make it a symbolic link to its page)"
    fi
    # (groff takes no man options: render leaves -l out for it)
    [ -n "$why" ] || judge "$p" "$renderer" "$f" -l
    verdict "man -l $f"
done

# Installed: the aliases become .so redirects that man resolves from the
# root of the hierarchy.  Needs the build directory (make check's cwd).
cd "$start" || exit 1
aliases=$(cd "$top/man" && for p in $pages; do [ -h "$p" ] && echo "$p"; done)
if [ "$renderer" != man-db ]; then
    skip "installed pages: man-db is not installed"
elif [ ! -f Makefile ] || ! grep -q '^install-man-aliases:' Makefile; then
    skip "installed pages: not run from a configured build directory"
elif ! (unset MAKEFLAGS MFLAGS MAKELEVEL
        make -s install-man install-man-aliases mandir="$tmp/man") >"$tmp/install.log" 2>&1; then
    result 1 "make install-man install-man-aliases: $(tail -n 3 "$tmp/install.log" | tr '\n' ' ')"
else
    result 0 "make install-man install-man-aliases into a scratch mandir"
    for p in $aliases; do
        sec=${p##*.}
        target=$(readlink "$top/man/$p")
        inst=$tmp/man/man$sec/$p
        why=
        if [ "$(cat "$inst" 2>/dev/null)" != ".so man${target##*.}/$target" ]; then
            why="installed as something other than '.so man${target##*.}/$target'"
        else
            judge "$p" man "${p%.*}" -M "$tmp/man" "$sec"
        fi
        verdict "installed man $sec ${p%.*}"
    done
fi

echo "1..$n"
