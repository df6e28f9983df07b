"""Config values that run commands wherever a shell reads them unquoted: each part makes a file named pwned-* in the
shell's folder. A redirection needs no program (the dry-run check runs commands with an empty PATH, so that no real
program starts); a URL may hold no `>` or space, so its parts name /bin/mkdir and split on $IFS."""

HOSTILE = "x $(>pwned-subst) ;>pwned-semi; `>pwned-tick` 'q' \"dq\" \\ &>pwned-amp |>pwned-pipe end"
HOSTILE_URL_PATH = "m$(/bin/mkdir$IFS'pwned-url');/bin/mkdir$IFS'pwned-url2';'q'"
MARKERS = ["pwned-amp", "pwned-pipe", "pwned-semi", "pwned-subst", "pwned-tick", "pwned-url", "pwned-url2"]


def markers(root):
    """The marker files anywhere under root."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("pwned*"))
