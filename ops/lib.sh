# Shared helpers for ops/ scripts (sourced, not run).

# Installs Debian packages churnwatch needs when they are missing and we may install
# (root, or passwordless sudo). Otherwise says what to install and fails.
# Extra Debian packages a caller needs may be named in EXTRA_PACKAGES="command:package ...".
ensure_system_packages() {
    local missing=()
    local extra
    for extra in ${EXTRA_PACKAGES:-}; do command -v "${extra%%:*}" >/dev/null 2>&1 || missing+=("${extra#*:}"); done
    pkg-config --exists libpq 2>/dev/null || missing+=(libpq-dev)
    if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
        missing+=(postgresql)
    fi
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "missing Debian packages: ${missing[*]} (install them: apt-get install -y ${missing[*]})" >&2
            return 1
        fi
    fi
    echo "installing ${missing[*]} ..." >&2
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    # Debian's package starts a system cluster; ours are separate, so it can stay or go.
}

# Debian's chromium, for the report's browser test (ReportBrowserTests): installed when missing
# and we may install (root, or passwordless sudo); otherwise the test prints why it skips.
ensure_browser() {
    local b
    for b in chromium chromium-browser google-chrome; do command -v "$b" >/dev/null 2>&1 && return 0; done
    command -v apt-get >/dev/null 2>&1 || { echo "note: no chromium and no apt-get: the report's browser test will say why it skips" >&2; return 1; }
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "note: no chromium (apt-get install chromium): the report's browser test will say why it skips" >&2
            return 1
        fi
    fi
    echo "installing chromium (the report's browser test) ..." >&2
    $sudo apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null 2>&1 \
        || { echo "note: could not install chromium: the report's browser test will say why it skips" >&2; return 1; }
}

# Apple's official Python library, used to cross-check the JWS we verify and sign. Installs it
# for the current python3 when possible, else into a venv in the user's cache. Exports
# CHURNWATCH_PYTHON, the interpreter that has it.
ensure_python_crosscheck() {
    command -v python3 >/dev/null 2>&1 || return 1
    if python3 -c 'import appstoreserverlibrary' 2>/dev/null; then
        export CHURNWATCH_PYTHON=python3; return 0
    fi
    if python3 -m pip install --quiet --disable-pip-version-check app-store-server-library >/dev/null 2>&1 \
        && python3 -c 'import appstoreserverlibrary' 2>/dev/null; then
        export CHURNWATCH_PYTHON=python3; return 0
    fi
    local venv=${XDG_CACHE_HOME:-$HOME/.cache}/churnwatch/venv
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" >/dev/null 2>&1 || rm -rf "$venv"
    fi
    if [ -x "$venv/bin/python" ] && { "$venv/bin/python" -c 'import appstoreserverlibrary' 2>/dev/null \
        || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check app-store-server-library >/dev/null 2>&1; }; then
        export CHURNWATCH_PYTHON=$venv/bin/python; return 0
    fi
    # A system Python that refuses pip (PEP 668) and has no venv module: the user's own site
    # directory, which leaves the system's packages alone.
    if [ "$(id -u)" != 0 ] && python3 -m pip install --quiet --user --break-system-packages --disable-pip-version-check app-store-server-library >/dev/null 2>&1 \
        && python3 -c 'import appstoreserverlibrary' 2>/dev/null; then
        export CHURNWATCH_PYTHON=python3; return 0
    fi
    echo "note: could not install app-store-server-library from PyPI; the Python cross-check will say why it skips" >&2
    return 1
}

# The Standard Webhooks reference library (PyPI standardwebhooks), which ops/webhook_receiver.py
# --reference uses to cross-check its own verification. Installs it for the current python3 when
# possible, else into the same venv in the user's cache as ensure_python_crosscheck. Exports
# CHURNWATCH_WEBHOOK_PYTHON, the interpreter that has it.
ensure_python_webhooks() {
    command -v python3 >/dev/null 2>&1 || return 1
    if python3 -c 'import standardwebhooks' 2>/dev/null; then
        export CHURNWATCH_WEBHOOK_PYTHON=python3; return 0
    fi
    if python3 -m pip install --quiet --disable-pip-version-check 'standardwebhooks==1.1.0' >/dev/null 2>&1 \
        && python3 -c 'import standardwebhooks' 2>/dev/null; then
        export CHURNWATCH_WEBHOOK_PYTHON=python3; return 0
    fi
    local venv=${XDG_CACHE_HOME:-$HOME/.cache}/churnwatch/venv
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" >/dev/null 2>&1 || rm -rf "$venv"
    fi
    if [ -x "$venv/bin/python" ] && { "$venv/bin/python" -c 'import standardwebhooks' 2>/dev/null \
        || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'standardwebhooks==1.1.0' >/dev/null 2>&1; }; then
        export CHURNWATCH_WEBHOOK_PYTHON=$venv/bin/python; return 0
    fi
    # A system Python that refuses pip (PEP 668) and has no venv module: the user's own site
    # directory, which leaves the system's packages alone.
    if [ "$(id -u)" != 0 ] && python3 -m pip install --quiet --user --break-system-packages --disable-pip-version-check 'standardwebhooks==1.1.0' >/dev/null 2>&1 \
        && python3 -c 'import standardwebhooks' 2>/dev/null; then
        export CHURNWATCH_WEBHOOK_PYTHON=python3; return 0
    fi
    echo "note: could not install standardwebhooks from PyPI; webhook_receiver.py --reference will exit 2" >&2
    return 1
}

# Some machines resolve Swift packages from a local git mirror owned by root; git refuses to
# read another user's repository unless it is marked safe. Mark it for this process only.
allow_shared_package_mirror() {
    [ "$(id -u)" = 0 ] && return 0
    local mirror
    mirror=$(git config --get-regexp '^url\..*\.insteadof$' 'https://github.com/' 2>/dev/null | head -1 | sed 's/^url\.//; s/\.insteadof .*$//')
    [ -n "$mirror" ] && [ -d "$mirror" ] || return 0
    [ "$(stat -c %u "$mirror")" = "$(id -u)" ] && return 0
    git config --global --get-all safe.directory 2>/dev/null | grep -qx '\*' && return 0
    echo "note: marking the package mirror $mirror (owned by another user) as safe for git in ~/.gitconfig" >&2
    git config --global --add safe.directory '*'
}
