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
