# `need TOOL PACKAGE`: installs Debian's PACKAGE when TOOL is missing (no PACKAGE: TOOL must be there).
need() {
    local tool=$1 package=$2
    if ! command -v "$tool" >/dev/null 2>&1; then
        if [ -z "$package" ] || ! command -v apt-get >/dev/null 2>&1; then
            echo "$tool is required: install it${package:+ (Debian package $package)}" >&2
            exit 1
        fi
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
    fi
    echo "$tool: $(command -v "$tool")"
}

# `debian_mirror`: the Debian archive apt is configured with (its first non-security source),
# so a script fetches Debian's files from where this machine's apt does.
debian_mirror() {
    local uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | sed -nE 's/^URIs:[[:space:]]*//p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' \
        | tr ' ' '\n' | grep -v -- '-security' | grep -m1 . || true)
    if [ -z "$uri" ]; then
        echo "no Debian archive in apt's sources" >&2
        return 1
    fi
    echo "${uri%/}"
}
